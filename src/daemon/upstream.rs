//! One upstream MCP server and everything routed through it: the child process, the sessions
//! bound to it, the router and the fair call queue.
//!
//! Each upstream is an actor: one task owns all of its state and handles one event at a time
//! (a session's line, a child's line, a child's exit, a control command, a deadline), so routing
//! needs no locks. The router reads only a message's `id`, `method`, `params._meta.progressToken`
//! and `params.requestId`/`params.progressToken` of notifications; every other byte is forwarded
//! as it came. It must never block on a session: a session that stops reading is disconnected
//! rather than allowed to stall everyone else.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

use super::child::{self, ChildRecord};
use super::outbox::Outbox;
use super::scheduler::{FairQueue, QueueKey};
use super::stats::{CallStats, Outcome};
use crate::config::ServerConfig;
use crate::wire::{
    self, ErrorCode, Hello, Kind, Line, Message, WireError, error_line, raw, response_line,
    rpc_code,
};
use tokio::net::unix::OwnedWriteHalf;

pub type SessionId = u64;

/// The protocol version the daemon offers a child when no session has said which it speaks.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";
/// How long a respawn waits after a crash; doubles on each quick failure up to `MAX_BACKOFF`.
pub const RESPAWN_COOLDOWN: Duration = Duration::from_secs(3);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A child that ran at least this long before exiting is not counted as a failing start.
const HEALTHY_RUN: Duration = Duration::from_secs(10);
/// After this many consecutive call timeouts the child is considered wedged and restarted.
const WEDGED_AFTER_TIMEOUTS: u32 = 3;
/// Grace between SIGTERM and SIGKILL when stopping a child.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Lines a session may have waiting to be written before it counts as not reading.
pub const SESSION_BUFFER: usize = 1024;
const STDERR_TAIL: usize = 20;
/// Control-mode calls each get their own queue key from this range, so they share fairly too.
const CONTROL_KEY_BASE: QueueKey = 1 << 48;

/// Events the actor handles, one at a time.
pub enum Event {
    SessionOpen {
        id: SessionId,
        hello: Hello,
        out: Outbox<OwnedWriteHalf>,
    },
    SessionLine {
        id: SessionId,
        line: Vec<u8>,
    },
    SessionClosed {
        id: SessionId,
    },
    /// A line for the session from its own connection (an error about what it sent).
    SessionReply {
        id: SessionId,
        line: Vec<u8>,
    },
    Child {
        generation: u64,
        event: ChildEvent,
    },
    Control(ControlCmd),
}

pub enum ChildEvent {
    Line(Vec<u8>),
    LineTooLong,
    Exited(String),
}

pub enum ControlCmd {
    Status(oneshot::Sender<Value>),
    /// A request on behalf of a control connection (`tools/list`, `tools/call`).
    Request {
        method: String,
        params: Value,
        reply: oneshot::Sender<Result<Box<RawValue>, WireError>>,
    },
    Restart(oneshot::Sender<Result<Value, WireError>>),
    Shutdown {
        grace: Duration,
        done: oneshot::Sender<()>,
    },
}

/// The cheap, cloneable way to talk to an upstream's actor.
#[derive(Clone)]
pub struct UpstreamHandle {
    pub name: String,
    tx: mpsc::Sender<Event>,
}

fn gone() -> WireError {
    WireError::new(ErrorCode::ShuttingDown, "the upstream has stopped")
}

impl UpstreamHandle {
    pub async fn send(&self, event: Event) -> bool {
        self.tx.send(event).await.is_ok()
    }

    pub async fn status(&self) -> Value {
        let (tx, rx) = oneshot::channel();
        if !self.send(Event::Control(ControlCmd::Status(tx))).await {
            return json!({"name": self.name, "state": "stopped"});
        }
        rx.await
            .unwrap_or_else(|_| json!({"name": self.name, "state": "stopped"}))
    }

    pub async fn request(&self, method: &str, params: Value) -> Result<Box<RawValue>, WireError> {
        let (tx, rx) = oneshot::channel();
        let cmd = ControlCmd::Request {
            method: method.to_string(),
            params,
            reply: tx,
        };
        if !self.send(Event::Control(cmd)).await {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }

    pub async fn restart(&self) -> Result<Value, WireError> {
        let (tx, rx) = oneshot::channel();
        if !self.send(Event::Control(ControlCmd::Restart(tx))).await {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }

    pub async fn shutdown(&self, grace: Duration) {
        let (tx, rx) = oneshot::channel();
        if self
            .send(Event::Control(ControlCmd::Shutdown { grace, done: tx }))
            .await
        {
            let _ = rx.await;
        }
    }
}

/// Start an upstream's actor; it spawns the child at once.
pub fn start(
    config: ServerConfig,
    record_path: PathBuf,
    max_line: usize,
    coogle_tool: bool,
) -> UpstreamHandle {
    let (tx, rx) = mpsc::channel(4096);
    let name = config.name.clone();
    let mut actor = Upstream::new(config, record_path, max_line, tx.clone());
    actor.coogle_tool = coogle_tool;
    actor.load_cache();
    tokio::spawn(actor.run(rx));
    UpstreamHandle { name, tx }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Starting,
    Initializing,
    Ready,
    /// Crashed; a respawn is scheduled.
    Backoff,
    /// Could not start; retried on demand and on schedule.
    Failed,
    Stopping,
    Stopped,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Initializing => "initializing",
            State::Ready => "ready",
            State::Backoff => "restarting",
            State::Failed => "failed",
            State::Stopping => "stopping",
            State::Stopped => "stopped",
        }
    }
}

enum Internal {
    Initialize,
    ToolsList,
    /// A request the daemon makes for its own bookkeeping; the answer only gets logged.
    Housekeeping,
}

enum Origin {
    Session {
        id: SessionId,
        client_id: Box<RawValue>,
    },
    Control(oneshot::Sender<Result<Box<RawValue>, WireError>>),
    Internal(Internal),
    /// A call started with the `coogle` tool's `start_call`: its result is kept for `wait`.
    Operation(String),
}

/// Someone waiting for a restart to finish.
enum RestartWaiter {
    Control(oneshot::Sender<Result<Value, WireError>>),
    Tool {
        session: SessionId,
        client_id: Box<RawValue>,
    },
}

impl Origin {
    fn session(&self) -> Option<SessionId> {
        match self {
            Origin::Session { id, .. } => Some(*id),
            _ => None,
        }
    }
    fn matches_client(&self, sid: SessionId, key: &str) -> bool {
        matches!(self, Origin::Session { id, client_id } if *id == sid && id_key(client_id) == key)
    }
}

struct Queued {
    origin: Origin,
    msg: Message,
    tool: String,
    /// The Google account the call is for (`arguments.user_google_email`), "" when unnamed.
    account: String,
    enqueued: Instant,
}

/// A Google sign-in the upstream asked for and the user has not completed yet.
struct SignIn {
    url: String,
    since: Instant,
    at: SystemTime,
}

/// What workspace-mcp writes before the URL of a sign-in flow it started.
const SIGN_IN_MARKER: &str = "Authorization URL: ";

struct Pending {
    origin: Origin,
    is_call: bool,
    tool: Option<String>,
    started: Instant,
    deadline: Instant,
    token: bool,
    task: TaskRole,
    /// For calls: the account, to notice sign-in requests and their completion.
    account: Option<String>,
    /// A session's first-page `tools/list`: the `coogle` tool is added to the answer.
    first_tools_page: bool,
}

/// How a request relates to MCP tasks, which belong to the session that created them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TaskRole {
    None,
    /// Task-augmented (`params.task`): its answer names a task this session now owns.
    Creates,
    /// `tasks/list`: its answer is filtered to the session's own tasks.
    Lists,
}

/// The metadata key that ties a server request or notification to a task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

struct ChildHandle {
    pid: u32,
    started: Instant,
    writer: Outbox<tokio::net::unix::pipe::Sender>,
    exited: watch::Receiver<bool>,
}

struct Session {
    out: Outbox<OwnedWriteHalf>,
    hello: Hello,
    connected_at: SystemTime,
    connected: Instant,
    client_info: Option<Value>,
    capabilities: Option<Value>,
    protocol_version: Option<String>,
    initialized: bool,
    log_level: Option<u8>,
    in_flight: usize,
    stats: CallStats,
}

struct ServerRequest {
    session: SessionId,
    child_id: Box<RawValue>,
}

/// Canonical text of a JSON-RPC id, so `1` and `1` written differently still match.
fn id_key(id: &RawValue) -> String {
    serde_json::from_str::<Value>(id.get())
        .map(|v| v.to_string())
        .unwrap_or_else(|_| id.get().to_string())
}

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn log_level_rank(level: &str) -> Option<u8> {
    LOG_LEVELS.iter().position(|l| *l == level).map(|p| p as u8)
}

fn log_level_name(rank: u8) -> Option<&'static str> {
    LOG_LEVELS.get(rank as usize).copied()
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

struct Upstream {
    name: String,
    config: ServerConfig,
    record_path: PathBuf,
    max_line: usize,
    tx: mpsc::Sender<Event>,

    state: State,
    child: Option<ChildHandle>,
    generation: u64,
    init_result: Option<Box<RawValue>>,
    tools_cache: Option<Box<RawValue>>,
    tools_count: Option<usize>,

    next_uid: u64,
    pending: HashMap<u64, Pending>,
    deadlines: BTreeSet<(Instant, u64)>,
    queue: FairQueue<Queued>,
    in_flight: usize,
    held: VecDeque<(QueueKey, Origin, Message)>,
    by_client: HashMap<(SessionId, String), u64>,
    tokens: HashMap<u64, (SessionId, Box<RawValue>)>,
    server_requests: HashMap<String, ServerRequest>,
    next_server_request: u64,
    next_control_key: QueueKey,

    sessions: HashMap<SessionId, Session>,
    /// Resource URI → the sessions subscribed to it.
    subscriptions: HashMap<String, HashSet<SessionId>>,
    /// MCP task id → the session that created it (the only one that may see it).
    tasks: HashMap<String, SessionId>,
    /// Google account ("" when unnamed) → the sign-in the upstream is waiting for.
    sign_ins: HashMap<String, SignIn>,
    /// The log level the child was last asked for (the most verbose any session wants).
    child_log_level: Option<u8>,

    restarts: u64,
    consecutive_failures: u32,
    consecutive_timeouts: u32,
    last_error: Option<String>,
    last_attempt: Option<Instant>,
    restart_at: Option<Instant>,
    manual_restart: bool,
    /// Why the daemon itself stopped the child (wedged, protocol broken), for `lastError`.
    stop_reason: Option<String>,
    restart_waiters: Vec<RestartWaiter>,
    /// Whether the `coogle` tool is offered (config `coogleTool`) ...
    coogle_tool: bool,
    /// ... and whether the upstream has a tool of that name itself (then it is not).
    upstream_has_coogle: bool,
    ops: super::coogle_tool::Operations,
    stats: CallStats,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    shutdown: Option<(Instant, Option<oneshot::Sender<()>>)>,
    /// Where the initialize result and tool list are kept between daemon runs.
    cache_path: PathBuf,
}

/// What the daemon remembers of an upstream between runs, so a new session gets `initialize`
/// and `tools/list` answered at once while a slow child (uvx: seconds) is still starting.
#[derive(serde::Serialize, serde::Deserialize)]
struct CacheFile {
    version: String,
    initialize: Box<RawValue>,
    tools: Box<RawValue>,
}

impl Upstream {
    fn new(
        config: ServerConfig,
        record_path: PathBuf,
        max_line: usize,
        tx: mpsc::Sender<Event>,
    ) -> Self {
        Upstream {
            name: config.name.clone(),
            record_path,
            max_line,
            tx,
            state: State::Stopped,
            child: None,
            generation: 0,
            init_result: None,
            tools_cache: None,
            tools_count: None,
            next_uid: 1,
            pending: HashMap::new(),
            deadlines: BTreeSet::new(),
            queue: FairQueue::default(),
            in_flight: 0,
            held: VecDeque::new(),
            by_client: HashMap::new(),
            tokens: HashMap::new(),
            server_requests: HashMap::new(),
            next_server_request: 1,
            next_control_key: CONTROL_KEY_BASE,
            sessions: HashMap::new(),
            subscriptions: HashMap::new(),
            tasks: HashMap::new(),
            sign_ins: HashMap::new(),
            child_log_level: None,
            restarts: 0,
            consecutive_failures: 0,
            consecutive_timeouts: 0,
            last_error: None,
            last_attempt: None,
            restart_at: None,
            manual_restart: false,
            stop_reason: None,
            restart_waiters: Vec::new(),
            coogle_tool: false,
            upstream_has_coogle: false,
            ops: Default::default(),
            stats: CallStats::default(),
            stderr_tail: Arc::new(Mutex::new(VecDeque::new())),
            shutdown: None,
            cache_path: crate::paths::cache_dir().join(format!(
                "upstream-{}-{}.json",
                config.name,
                config.cache_key()
            )),
            config,
        }
    }

    fn load_cache(&mut self) {
        let Ok(bytes) = std::fs::read(&self.cache_path) else {
            return;
        };
        match serde_json::from_slice::<CacheFile>(&bytes) {
            Ok(c) => {
                tracing::debug!(upstream = %self.name, path = %self.cache_path.display(), "answering new sessions from the cached initialize result and tool list until the child is ready");
                self.init_result = Some(c.initialize);
                self.tools_count = count_tools(&c.tools);
                self.upstream_has_coogle =
                    super::coogle_tool::inject(&c.tools, &self.name).is_none();
                self.tools_cache = Some(c.tools);
            }
            Err(e) => {
                tracing::warn!(path = %self.cache_path.display(), "ignoring an unreadable upstream cache: {e}")
            }
        }
    }

    /// Written when a live tool list arrives; a failure costs only speed, so it is logged.
    fn save_cache(&self) {
        let (Some(initialize), Some(tools)) = (&self.init_result, &self.tools_cache) else {
            return;
        };
        let file = CacheFile {
            version: wire::VERSION.to_string(),
            initialize: initialize.clone(),
            tools: tools.clone(),
        };
        let write = || -> std::io::Result<()> {
            let dir = self
                .cache_path
                .parent()
                .unwrap_or(std::path::Path::new("."));
            // Never recreate a home directory that is gone (a deleted test HOME, a removed
            // account): the cache is an optimisation, not worth resurrecting a tree for.
            if !crate::paths::home().is_dir() {
                return Ok(());
            }
            std::fs::create_dir_all(dir)?;
            let tmp = self
                .cache_path
                .with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(&tmp, serde_json::to_vec(&file).unwrap_or_default())?;
            std::fs::rename(&tmp, &self.cache_path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %self.cache_path.display(), "could not save the upstream cache: {e}");
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Event>) {
        self.start_child();
        loop {
            let wake = self.next_wakeup();
            tokio::select! {
                event = rx.recv() => match event {
                    Some(event) => self.handle(event),
                    None => break,
                },
                _ = sleep_until(wake) => self.on_timer(),
            }
            if self.state == State::Stopped && self.shutdown.is_some() {
                if let Some((_, Some(done))) = self.shutdown.take() {
                    let _ = done.send(());
                }
                break;
            }
        }
        child::remove_record(&self.record_path);
        tracing::debug!(upstream = %self.name, "upstream actor stopped");
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let deadline = self.deadlines.first().map(|(t, _)| *t);
        let shutdown = self.shutdown.as_ref().map(|(t, _)| *t);
        [
            deadline,
            self.restart_at,
            shutdown,
            self.ops.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::SessionOpen { id, hello, out } => self.on_session_open(id, hello, out),
            Event::SessionLine { id, line } => self.on_session_line(id, &line),
            Event::SessionClosed { id } => self.on_session_closed(id),
            Event::SessionReply { id, line } => self.send_to_session(id, line),
            Event::Child { generation, event } => {
                if generation != self.generation {
                    return;
                }
                match event {
                    ChildEvent::Line(line) => self.on_child_line(&line),
                    ChildEvent::LineTooLong => {
                        let msg = format!(
                            "the upstream wrote a line over {} bytes; restarting it",
                            self.max_line
                        );
                        tracing::error!(upstream = %self.name, "{msg}");
                        self.stop_reason = Some(msg);
                        self.kill_child();
                    }
                    ChildEvent::Exited(status) => self.on_child_exit(status),
                }
            }
            Event::Control(cmd) => self.on_control(cmd),
        }
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        for w in self.ops.expire(now) {
            let still = super::coogle_tool::running(&w.operation);
            self.send_to_session(w.session, response_line(&w.client_id, &raw(&still)));
        }
        while let Some(&(t, uid)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.deadlines.pop_first();
            self.on_timeout(uid);
        }
        if self.restart_at.is_some_and(|t| t <= now) {
            self.restart_at = None;
            if matches!(self.state, State::Backoff | State::Failed) && self.shutdown.is_none() {
                self.start_child();
            }
        }
        if self.shutdown.as_ref().is_some_and(|(t, _)| *t <= now) {
            self.finish_shutdown();
        }
    }

    // ---------------------------------------------------------------------------------------
    // The child.

    fn start_child(&mut self) {
        self.generation += 1;
        self.last_attempt = Some(Instant::now());
        self.restart_at = None;
        self.state = State::Starting;
        let spawned = match child::spawn(&self.config) {
            Ok(s) => s,
            Err(e) => {
                self.on_start_failed(e.to_string());
                return;
            }
        };
        let generation = self.generation;
        let pid = spawned.pid;
        tracing::info!(upstream = %self.name, pid, command = %child::display_command(&self.config), "started upstream");
        let record = ChildRecord {
            pid,
            pgid: pid,
            start_ticks: child::proc_stat(pid).map(|(_, s)| s),
            command: child::display_command(&self.config),
            daemon_pid: std::process::id(),
        };
        if let Err(e) = child::write_record(&self.record_path, &record) {
            tracing::warn!(path = %self.record_path.display(), "could not record the child pid: {e}");
        }

        // The child's stdin as a non-blocking pipe, so the actor can write without a hop.
        let stdin = spawned
            .stdin
            .into_owned_fd()
            .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
        let (writer, _) = match stdin {
            Ok(pipe) => Outbox::new(pipe),
            Err(e) => {
                child::signal_group(pid, libc::SIGKILL);
                self.on_start_failed(format!("could not set up the child's stdin: {e}"));
                return;
            }
        };

        let tx = self.tx.clone();
        let max_line = self.max_line;
        let stdout = spawned.stdout;
        let reader = tokio::spawn(async move {
            let mut r = BufReader::with_capacity(64 * 1024, stdout);
            let mut buf = Vec::new();
            loop {
                match wire::read_line_capped(&mut r, &mut buf, max_line).await {
                    Ok(Line::Complete) => {
                        if wire::is_blank(&buf) {
                            buf.clear();
                            continue;
                        }
                        let line = std::mem::take(&mut buf);
                        let event = ChildEvent::Line(line);
                        if tx.send(Event::Child { generation, event }).await.is_err() {
                            break;
                        }
                    }
                    Ok(Line::TooLong) => {
                        let event = ChildEvent::LineTooLong;
                        let _ = tx.send(Event::Child { generation, event }).await;
                        break;
                    }
                    Ok(Line::Eof) | Err(_) => break,
                }
            }
        });

        let name = self.name.clone();
        let tail = self.stderr_tail.clone();
        let stderr = spawned.stderr;
        tokio::spawn(async move {
            let mut r = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let mut text = String::from_utf8_lossy(&buf).trim_end().to_string();
                        if text.len() > 4096 {
                            let mut cut = 4096;
                            while !text.is_char_boundary(cut) {
                                cut -= 1;
                            }
                            text.truncate(cut);
                            text.push('…');
                        }
                        tracing::info!(target: "coogle::child", upstream = %name, "{text}");
                        if let Ok(mut t) = tail.lock() {
                            if t.len() == STDERR_TAIL {
                                t.pop_front();
                            }
                            t.push_back(text);
                        }
                    }
                }
            }
        });

        let (exited_tx, exited_rx) = watch::channel(false);
        let tx = self.tx.clone();
        let mut proc = spawned.child;
        tokio::spawn(async move {
            let status = match proc.wait().await {
                Ok(s) => s.to_string(),
                Err(e) => format!("wait failed: {e}"),
            };
            // Sweep the group: a grandchild (python under uvx) must not outlive its parent.
            child::signal_group(pid, libc::SIGKILL);
            let _ = exited_tx.send(true);
            // Deliver every line the child wrote before its exit is reported.
            let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
            let event = ChildEvent::Exited(status);
            let _ = tx.send(Event::Child { generation, event }).await;
        });

        self.child = Some(ChildHandle {
            pid,
            started: Instant::now(),
            writer,
            exited: exited_rx,
        });
        self.state = State::Initializing;
        let version = self
            .sessions
            .values()
            .find_map(|s| s.protocol_version.clone())
            .unwrap_or_else(|| DEFAULT_PROTOCOL_VERSION.to_string());
        let params = json!({
            "protocolVersion": version,
            "capabilities": self.config.client_capabilities,
            "clientInfo": {"name": "coogle", "title": "coogle", "version": wire::VERSION},
        });
        self.send_internal(Internal::Initialize, "initialize", &params);
    }

    fn send_internal(&mut self, what: Internal, method: &str, params: &Value) {
        let uid = self.take_uid();
        self.to_child(wire::request_line(&raw(&uid), method, params));
        self.add_pending(uid, Origin::Internal(what), false, None, false);
    }

    fn take_uid(&mut self) -> u64 {
        let uid = self.next_uid;
        self.next_uid += 1;
        uid
    }

    fn add_pending(
        &mut self,
        uid: u64,
        origin: Origin,
        is_call: bool,
        tool: Option<String>,
        token: bool,
    ) {
        let now = Instant::now();
        let deadline = now + self.config.call_timeout;
        self.deadlines.insert((deadline, uid));
        self.pending.insert(
            uid,
            Pending {
                origin,
                is_call,
                tool,
                started: now,
                deadline,
                token,
                task: TaskRole::None,
                account: None,
                first_tools_page: false,
            },
        );
    }

    fn to_child(&self, line: Vec<u8>) {
        if let Some(c) = &self.child {
            // A child that closed its stdin is about to be reported as exited.
            let _ = c.writer.send(line);
        }
    }

    fn stderr_hint(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        match tail.back() {
            Some(last) => format!("; its last stderr line: {last}"),
            None => String::new(),
        }
    }

    fn on_start_failed(&mut self, reason: String) {
        let reason = format!("{reason}{}", self.stderr_hint());
        tracing::error!(upstream = %self.name, "could not start the upstream: {reason}");
        self.child = None;
        self.state = State::Failed;
        self.consecutive_failures += 1;
        self.last_error = Some(reason.clone());
        let text = format!(
            "coogle could not start the `{}` server ({}): {reason}",
            self.name,
            child::display_command(&self.config)
        );
        self.fail_waiting(ErrorCode::UpstreamUnavailable, &text);
        let err = WireError::new(ErrorCode::UpstreamUnavailable, &text);
        self.answer_restart_waiters(Err(err));
        if self.shutdown.is_some() {
            self.state = State::Stopped;
            return;
        }
        self.restart_at = Some(Instant::now() + self.backoff());
    }

    fn backoff(&self) -> Duration {
        let exp = self.consecutive_failures.saturating_sub(1).min(5);
        (RESPAWN_COOLDOWN * 2u32.pow(exp)).min(MAX_BACKOFF)
    }

    /// Answer every call and request that is waiting for the child with an error.
    fn fail_waiting(&mut self, code: ErrorCode, text: &str) {
        for q in self.queue.drain_all() {
            self.count_session_outcome(&q.origin, Outcome::Error, Duration::ZERO);
            self.reply_error(q.origin, true, code, text);
        }
        while let Some((_, origin, msg)) = self.held.pop_front() {
            let is_call = msg.method().as_deref() == Some("tools/call");
            self.reply_error(origin, is_call, code, text);
        }
    }

    fn kill_child(&mut self) {
        if let Some(c) = &self.child {
            let pid = c.pid;
            let mut exited = c.exited.clone();
            tokio::spawn(async move {
                child::stop_group(pid, STOP_GRACE, async move {
                    let _ = exited.wait_for(|e| *e).await;
                })
                .await;
            });
        }
    }

    fn on_child_exit(&mut self, status: String) {
        let Some(c) = self.child.take() else { return };
        let ran = c.started.elapsed();
        let was_ready = self.state == State::Ready;
        child::remove_record(&self.record_path);
        self.in_flight = 0;
        self.tokens.clear();
        self.server_requests.clear();
        self.by_client.clear();
        self.deadlines.clear();

        if self.shutdown.is_some() {
            tracing::info!(upstream = %self.name, "upstream stopped ({status})");
            let text = "coogle is shutting down; the call was cancelled";
            for (_, p) in std::mem::take(&mut self.pending) {
                self.reply_error(p.origin, p.is_call, ErrorCode::ShuttingDown, text);
            }
            self.state = State::Stopped;
            return;
        }

        let manual = std::mem::take(&mut self.manual_restart);
        let reason = if manual {
            "it was restarted on request".to_string()
        } else if let Some(why) = self.stop_reason.take() {
            why
        } else {
            format!("it exited ({status}){}", self.stderr_hint())
        };
        if !manual {
            tracing::warn!(upstream = %self.name, pid = c.pid, "upstream exited: {status}");
        }
        for (_, p) in std::mem::take(&mut self.pending) {
            let started = p.started;
            match p.origin {
                Origin::Internal(Internal::Initialize) => {}
                origin => {
                    let text = format!(
                        "coogle: the `{}` server stopped during this call ({reason}); it is being restarted, so retry the call",
                        self.name
                    );
                    if p.is_call {
                        self.stats.record(Outcome::Error, started.elapsed());
                        self.count_session_outcome(&origin, Outcome::Error, started.elapsed());
                    }
                    self.reply_error(origin, p.is_call, ErrorCode::UpstreamUnavailable, &text);
                }
            }
        }

        if manual {
            self.restarts += 1;
            self.start_child();
            return;
        }
        if !was_ready {
            self.on_start_failed(format!("it exited before answering initialize ({status})"));
            return;
        }
        self.restarts += 1;
        self.last_error = Some(reason);
        if ran >= HEALTHY_RUN {
            self.consecutive_failures = 0;
        }
        self.consecutive_failures += 1;
        self.state = State::Backoff;
        let wait = self.backoff();
        tracing::info!(upstream = %self.name, "respawning in {} ms", ms(wait));
        self.restart_at = Some(Instant::now() + wait);
    }

    /// Someone wants the child: if it is down and not scheduled soon, schedule it.
    fn demand(&mut self) {
        if self.state != State::Failed || self.shutdown.is_some() {
            return;
        }
        let earliest = self
            .last_attempt
            .map_or_else(Instant::now, |t| t + RESPAWN_COOLDOWN);
        let at = earliest.max(Instant::now());
        if self.restart_at.is_none_or(|r| r > at) {
            self.restart_at = Some(at);
        }
    }

    fn offers_coogle_tool(&self) -> bool {
        self.coogle_tool && !self.upstream_has_coogle
    }

    /// A first-page tool list as sessions see it: with the `coogle` tool when it is offered.
    fn tools_for_session(&self, result: &RawValue) -> Box<RawValue> {
        if self.offers_coogle_tool()
            && let Some(with) = super::coogle_tool::inject(result, &self.name)
        {
            return with;
        }
        result.to_owned()
    }

    /// Keep only the session's own tasks in a `tasks/list` answer.
    fn filter_task_list(&self, sid: SessionId, msg: &mut Message) {
        let Some(result) = msg.field("result") else {
            return;
        };
        let Ok(mut result) = serde_json::from_str::<Value>(result.get()) else {
            return;
        };
        if let Some(tasks) = result.get_mut("tasks").and_then(|t| t.as_array_mut()) {
            tasks.retain(|t| {
                t.get("taskId")
                    .and_then(|id| id.as_str())
                    .is_some_and(|id| self.tasks.get(id) == Some(&sid))
            });
        }
        msg.set_field("result", raw(&result));
    }

    /// Ask the child for the most verbose level any session wants; each session still gets
    /// only what its own level admits, so no session silences another.
    fn sync_child_log_level(&mut self) {
        let wanted = self.sessions.values().filter_map(|s| s.log_level).min();
        if wanted.is_none() || wanted == self.child_log_level || self.state != State::Ready {
            return;
        }
        self.child_log_level = wanted;
        if let Some(level) = wanted.and_then(log_level_name) {
            self.send_internal(
                Internal::Housekeeping,
                "logging/setLevel",
                &json!({"level": level}),
            );
        }
    }

    /// After a respawn the new child knows nothing of the sessions' subscriptions.
    fn resubscribe(&mut self) {
        let uris: Vec<String> = self.subscriptions.keys().cloned().collect();
        for uri in uris {
            self.send_internal(
                Internal::Housekeeping,
                "resources/subscribe",
                &json!({"uri": uri}),
            );
        }
    }

    // ---------------------------------------------------------------------------------------
    // Lines from the child.

    fn on_child_line(&mut self, line: &[u8]) {
        let mut msg = match Message::parse(line) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(upstream = %self.name, "ignoring a line from the upstream that is not JSON-RPC: {e}");
                return;
            }
        };
        match msg.kind() {
            Kind::Response => {
                let uid = msg
                    .id()
                    .and_then(|id| serde_json::from_str::<u64>(id.get()).ok());
                let Some(p) = uid.and_then(|u| self.pending.remove(&u).map(|p| (u, p))) else {
                    tracing::debug!(upstream = %self.name, "dropping a response to no pending request (cancelled or timed out)");
                    return;
                };
                self.complete(p.0, p.1, msg);
            }
            Kind::Request => self.on_server_request(msg),
            Kind::Notification => {
                let method = msg.method().unwrap_or_default();
                self.on_child_notification(&method, &mut msg);
            }
        }
    }

    fn complete(&mut self, uid: u64, p: Pending, mut msg: Message) {
        self.deadlines.remove(&(p.deadline, uid));
        if p.token {
            self.tokens.remove(&uid);
        }
        let latency = p.started.elapsed();
        if p.is_call {
            self.in_flight = self.in_flight.saturating_sub(1);
            self.consecutive_timeouts = 0;
            let outcome = if msg.is_error_response() || result_is_error(&msg) {
                Outcome::Error
            } else {
                Outcome::Ok
            };
            self.stats.record(outcome, latency);
            self.count_session_outcome(&p.origin, outcome, latency);
            if let Some(account) = &p.account {
                self.track_sign_in(account, &msg);
            }
        }
        match p.origin {
            Origin::Session { id, client_id } => {
                self.by_client.remove(&(id, id_key(&client_id)));
                if let Some(s) = self.sessions.get_mut(&id) {
                    s.in_flight = s.in_flight.saturating_sub(1);
                }
                match p.task {
                    TaskRole::Creates => {
                        if let Some(task_id) = created_task_id(&msg) {
                            self.tasks.insert(task_id, id);
                        }
                    }
                    TaskRole::Lists => self.filter_task_list(id, &mut msg),
                    TaskRole::None => {}
                }
                if p.first_tools_page
                    && let Some(result) = msg.field("result")
                {
                    let listed = self.tools_for_session(result);
                    msg.set_field("result", listed);
                }
                msg.set_id(client_id);
                self.send_to_session(id, msg.to_line());
            }
            Origin::Control(reply) => {
                let result = match msg.field("result") {
                    Some(r) => Ok(r.to_owned()),
                    None => Err(WireError::new(
                        ErrorCode::UpstreamError,
                        msg.error_message()
                            .unwrap_or_else(|| "the upstream answered without a result".into()),
                    )),
                };
                let _ = reply.send(result);
            }
            Origin::Operation(op) => {
                let result = match msg.field("result") {
                    Some(r) => r.to_owned(),
                    None => raw(&wire::tool_error_result(
                        &msg.error_message()
                            .unwrap_or_else(|| "the call failed".into()),
                    )),
                };
                self.finish_operation(&op, result);
            }
            Origin::Internal(Internal::Initialize) => self.on_initialized(&msg),
            Origin::Internal(Internal::ToolsList) => {
                if let Some(result) = msg.field("result") {
                    self.set_tools_cache(result.to_owned());
                }
            }
            Origin::Internal(Internal::Housekeeping) => {
                if let Some(e) = msg.error_message() {
                    tracing::debug!(upstream = %self.name, "the upstream refused a housekeeping request: {e}");
                }
            }
        }
        self.pump();
        self.check_shutdown();
    }

    fn on_initialized(&mut self, msg: &Message) {
        let Some(result) = msg.field("result") else {
            let why = msg.error_message().unwrap_or_default();
            self.last_error = Some(format!("initialize failed: {why}"));
            tracing::error!(upstream = %self.name, "the upstream refused initialize: {why}");
            self.kill_child();
            return;
        };
        self.init_result = Some(result.to_owned());
        self.to_child(wire::notification_line("notifications/initialized", None));
        self.state = State::Ready;
        let ready_pid = self.child.as_ref().map(|c| c.pid);
        tracing::info!(upstream = %self.name, pid = ?ready_pid, "upstream ready");
        self.answer_restart_waiters(Ok(json!({"server": self.name, "pid": ready_pid})));
        self.send_internal(Internal::ToolsList, "tools/list", &json!({}));
        self.child_log_level = None;
        self.sync_child_log_level();
        self.resubscribe();
        let held: Vec<_> = self.held.drain(..).collect();
        for (key, origin, msg) in held {
            self.route_request(key, origin, msg);
        }
        self.pump();
    }

    fn set_tools_cache(&mut self, result: Box<RawValue>) {
        let names = |r: &RawValue| -> Option<Vec<String>> {
            let v: Value = serde_json::from_str(r.get()).ok()?;
            let mut n: Vec<String> = v
                .get("tools")?
                .as_array()?
                .iter()
                .filter_map(|t| t.get("name")?.as_str().map(String::from))
                .collect();
            n.sort();
            Some(n)
        };
        let changed = match &self.tools_cache {
            Some(old) => old.get() != result.get(),
            None => false,
        };
        if changed {
            tracing::info!(upstream = %self.name, before = ?self.tools_cache.as_deref().and_then(names), after = ?names(&result), "the tool list changed");
        }
        self.tools_count = count_tools(&result);
        self.upstream_has_coogle = super::coogle_tool::inject(&result, &self.name).is_none();
        self.tools_cache = Some(result);
        self.save_cache();
        if changed {
            self.broadcast(&wire::notification_line(
                "notifications/tools/list_changed",
                None,
            ));
        }
    }

    fn on_child_notification(&mut self, method: &str, msg: &mut Message) {
        match method {
            "notifications/progress" => {
                let token = msg
                    .params_field("progressToken")
                    .and_then(|t| serde_json::from_str::<u64>(t.get()).ok());
                let Some((sid, original)) = token.and_then(|t| self.tokens.get(&t)) else {
                    return;
                };
                let sid = *sid;
                msg.set_params_field("progressToken", original.clone());
                self.send_to_session(sid, msg.to_line());
            }
            "notifications/message" => {
                let level = msg
                    .params_field("level")
                    .and_then(|l| serde_json::from_str::<String>(l.get()).ok())
                    .and_then(|l| log_level_rank(&l))
                    .unwrap_or(0);
                let line = msg.to_line();
                let ids: Vec<SessionId> = self
                    .sessions
                    .iter()
                    .filter(|(_, s)| s.initialized && s.log_level.is_none_or(|min| level >= min))
                    .map(|(id, _)| *id)
                    .collect();
                for id in ids {
                    self.send_to_session(id, line.clone());
                }
            }
            "notifications/tasks/status" => {
                let owner = msg
                    .params_field("taskId")
                    .and_then(|t| serde_json::from_str::<String>(t.get()).ok())
                    .and_then(|t| self.tasks.get(&t).copied());
                if let Some(sid) = owner {
                    self.send_to_session(sid, msg.to_line());
                }
            }
            "notifications/resources/updated" => {
                let uri = msg
                    .params_field("uri")
                    .and_then(|u| serde_json::from_str::<String>(u.get()).ok())
                    .unwrap_or_default();
                let line = msg.to_line();
                let targets: Vec<SessionId> = self
                    .subscriptions
                    .get(&uri)
                    .map(|s| s.iter().copied().collect())
                    .unwrap_or_default();
                for sid in targets {
                    self.send_to_session(sid, line.clone());
                }
            }
            "notifications/cancelled" => {
                // The child cancels a request it sent: find it by the child's own id.
                let Some(child_key) = msg.params_field("requestId").map(|r| id_key(&r)) else {
                    return;
                };
                let Some(daemon_key) = self
                    .server_requests
                    .iter()
                    .find(|(_, r)| id_key(&r.child_id) == child_key)
                    .map(|(k, _)| k.clone())
                else {
                    return;
                };
                let Some(sreq) = self.server_requests.remove(&daemon_key) else {
                    return;
                };
                msg.set_params_field("requestId", raw(&key_to_daemon_id(&daemon_key)));
                self.send_to_session(sreq.session, msg.to_line());
            }
            _ => {
                if method == "notifications/tools/list_changed" {
                    // Serve the next tools/list live, and refresh the cache.
                    self.tools_cache = None;
                    if self.state == State::Ready {
                        self.send_internal(Internal::ToolsList, "tools/list", &json!({}));
                    }
                }
                self.broadcast(&msg.to_line());
            }
        }
    }

    fn on_server_request(&mut self, mut msg: Message) {
        let method = msg.method().unwrap_or_default();
        let child_id = msg.id().map(|i| i.to_owned()).unwrap_or_else(|| raw(&()));
        if method == "ping" {
            self.to_child(response_line(&child_id, &raw(&json!({}))));
            return;
        }
        // The session that caused it: the owner of the task it names, else the one session
        // with requests in flight, provided its client declared the capability.
        let capability = method.split('/').next().unwrap_or_default();
        let related = related_task(&msg).and_then(|t| self.tasks.get(&t).copied());
        let caller = related.or_else(|| {
            let mut busy = self.sessions.iter().filter(|(_, s)| s.in_flight > 0);
            match (busy.next(), busy.next()) {
                (Some((id, _)), None) => Some(*id),
                _ => None,
            }
        });
        let target = caller.filter(|id| {
            self.sessions.get(id).is_some_and(|s| {
                s.capabilities
                    .as_ref()
                    .is_some_and(|c| c.get(capability).is_some())
            })
        });
        let Some(sid) = target else {
            let text = format!(
                "coogle: no connected session can answer {method} (the calling session's client does not declare the `{capability}` capability, or the caller is ambiguous)"
            );
            self.to_child(error_line(
                Some(&child_id),
                rpc_code::METHOD_NOT_FOUND,
                &text,
            ));
            return;
        };
        let n = self.next_server_request;
        self.next_server_request += 1;
        let daemon_id = format!("coogle-s{n}");
        msg.set_id(raw(&daemon_id));
        self.server_requests.insert(
            id_key(&raw(&daemon_id)),
            ServerRequest {
                session: sid,
                child_id,
            },
        );
        self.send_to_session(sid, msg.to_line());
    }

    // ---------------------------------------------------------------------------------------
    // Sessions.

    fn on_session_open(&mut self, id: SessionId, hello: Hello, out: Outbox<OwnedWriteHalf>) {
        tracing::info!(upstream = %self.name, session = id, pid = ?hello.pid, claude_session = ?hello.claude_session_id, "session connected");
        self.sessions.insert(
            id,
            Session {
                out,
                hello,
                connected_at: SystemTime::now(),
                connected: Instant::now(),
                client_info: None,
                capabilities: None,
                protocol_version: None,
                initialized: false,
                log_level: None,
                in_flight: 0,
                stats: CallStats::default(),
            },
        );
        self.demand();
    }

    fn on_session_line(&mut self, sid: SessionId, line: &[u8]) {
        if !self.sessions.contains_key(&sid) {
            return;
        }
        let msg = match Message::parse(line) {
            Ok(m) => m,
            Err(e) => {
                self.send_to_session(sid, error_line(None, e.rpc_code(), &e.to_string()));
                return;
            }
        };
        match msg.kind() {
            Kind::Request => self.on_session_request(sid, msg),
            Kind::Notification => self.on_session_notification(sid, msg),
            Kind::Response => {
                let key = msg.id().map(id_key).unwrap_or_default();
                match self.server_requests.remove(&key) {
                    Some(sreq) if sreq.session == sid => {
                        let mut msg = msg;
                        msg.set_id(sreq.child_id);
                        self.to_child(msg.to_line());
                    }
                    Some(sreq) => {
                        self.server_requests.insert(key, sreq);
                    }
                    None => {}
                }
            }
        }
    }

    fn on_session_request(&mut self, sid: SessionId, msg: Message) {
        let method = msg.method().unwrap_or_default();
        let client_id = msg.id().map(|i| i.to_owned()).unwrap_or_else(|| raw(&()));
        match method.as_str() {
            "tools/call" if self.offers_coogle_tool() => {
                let params = msg.params_value();
                if params.get("name").and_then(|n| n.as_str())
                    == Some(super::coogle_tool::TOOL_NAME)
                {
                    let args = params.get("arguments").cloned().unwrap_or(json!({}));
                    self.coogle_call(sid, client_id, &args);
                } else {
                    let origin = Origin::Session { id: sid, client_id };
                    self.route_request(sid, origin, msg);
                }
            }
            "initialize" => {
                let params = msg.params_value();
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.client_info = params.get("clientInfo").cloned();
                    s.capabilities = params.get("capabilities").cloned();
                    s.protocol_version = params
                        .get("protocolVersion")
                        .and_then(|v| v.as_str())
                        .map(String::from);
                }
                match &self.init_result {
                    Some(init) => {
                        let line = response_line(&client_id, init);
                        self.send_to_session(sid, line);
                    }
                    None => {
                        let origin = Origin::Session { id: sid, client_id };
                        self.held.push_back((sid, origin, msg));
                        self.demand();
                    }
                }
            }
            "ping" => self.send_to_session(sid, response_line(&client_id, &raw(&json!({})))),
            "logging/setLevel" => {
                let level = msg
                    .params_value()
                    .get("level")
                    .and_then(|l| l.as_str())
                    .and_then(log_level_rank);
                let Some(level) = level else {
                    let line = error_line(
                        Some(&client_id),
                        rpc_code::INVALID_PARAMS,
                        "logging/setLevel needs a level: debug, info, notice, warning, error, critical, alert or emergency",
                    );
                    self.send_to_session(sid, line);
                    return;
                };
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.log_level = Some(level);
                }
                self.send_to_session(sid, response_line(&client_id, &raw(&json!({}))));
                self.sync_child_log_level();
            }
            "tasks/get" | "tasks/result" | "tasks/cancel" => {
                let task_id = msg
                    .params_value()
                    .get("taskId")
                    .and_then(|t| t.as_str())
                    .map(String::from)
                    .unwrap_or_default();
                if self.tasks.get(&task_id) != Some(&sid) {
                    let line = error_line(
                        Some(&client_id),
                        rpc_code::INVALID_PARAMS,
                        &format!(
                            "no task {task_id:?} (a task is visible only to the session that created it)"
                        ),
                    );
                    self.send_to_session(sid, line);
                    return;
                }
                let origin = Origin::Session { id: sid, client_id };
                self.route_request(sid, origin, msg);
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                let uri = msg
                    .params_value()
                    .get("uri")
                    .and_then(|u| u.as_str())
                    .map(String::from);
                let Some(uri) = uri else {
                    let line = error_line(
                        Some(&client_id),
                        rpc_code::INVALID_PARAMS,
                        &format!("{method} needs params.uri"),
                    );
                    self.send_to_session(sid, line);
                    return;
                };
                // The child hears the first subscribe and the last unsubscribe of each URI;
                // the sessions in between are answered here.
                let subscribers = self.subscriptions.entry(uri.clone()).or_default();
                let forward = if method == "resources/subscribe" {
                    let first = subscribers.is_empty();
                    subscribers.insert(sid);
                    first
                } else {
                    let was = subscribers.remove(&sid);
                    let last = was && subscribers.is_empty();
                    if subscribers.is_empty() {
                        self.subscriptions.remove(&uri);
                    }
                    last
                };
                if forward {
                    let origin = Origin::Session { id: sid, client_id };
                    self.route_request(sid, origin, msg);
                } else {
                    self.send_to_session(sid, response_line(&client_id, &raw(&json!({}))));
                }
            }
            _ => {
                let origin = Origin::Session { id: sid, client_id };
                self.route_request(sid, origin, msg);
            }
        }
    }

    /// Requests from a session or a control connection: queue calls, serve from cache, forward.
    fn route_request(&mut self, key: QueueKey, origin: Origin, msg: Message) {
        if self.shutdown.is_some() {
            let is_call = msg.method().as_deref() == Some("tools/call");
            self.reply_error(
                origin,
                is_call,
                ErrorCode::ShuttingDown,
                "coogle is shutting down",
            );
            return;
        }
        let method = msg.method().unwrap_or_default();
        if method == "tools/call" {
            let params = msg.params_value();
            let tool = params
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or_default()
                .to_string();
            let account = params
                .pointer("/arguments/user_google_email")
                .and_then(|e| e.as_str())
                .unwrap_or_default()
                .to_string();
            let queued = Queued {
                origin,
                msg,
                tool,
                account,
                enqueued: Instant::now(),
            };
            self.queue.push(key, queued);
            self.demand();
            self.pump();
            return;
        }
        if method == "tools/list"
            && msg.params_value().get("cursor").is_none()
            && let Some(cache) = &self.tools_cache
        {
            let listed = match origin {
                Origin::Session { .. } => self.tools_for_session(cache),
                _ => cache.clone(),
            };
            self.reply_ok(origin, &listed);
            return;
        }
        if self.state == State::Ready {
            self.dispatch(origin, msg, false, None);
        } else {
            self.held.push_back((key, origin, msg));
            self.demand();
        }
    }

    fn dispatch(&mut self, origin: Origin, mut msg: Message, is_call: bool, tool: Option<String>) {
        let uid = self.take_uid();
        let mut token = false;
        if let Origin::Session { id, client_id } = &origin {
            if let Some(t) = msg.progress_token() {
                msg.set_progress_token(raw(&uid));
                self.tokens.insert(uid, (*id, t));
                token = true;
            }
            self.by_client.insert((*id, id_key(client_id)), uid);
            if let Some(s) = self.sessions.get_mut(id) {
                s.in_flight += 1;
            }
        }
        let first_tools_page = matches!(origin, Origin::Session { .. })
            && msg.method().as_deref() == Some("tools/list")
            && msg.params_value().get("cursor").is_none();
        let task = match &origin {
            Origin::Session { .. } if msg.params_field("task").is_some() => TaskRole::Creates,
            Origin::Session { .. } if msg.method().as_deref() == Some("tasks/list") => {
                TaskRole::Lists
            }
            _ => TaskRole::None,
        };
        msg.set_id(raw(&uid));
        self.to_child(msg.to_line());
        if is_call {
            self.in_flight += 1;
        }
        self.add_pending(uid, origin, is_call, tool, token);
        if let Some(p) = self.pending.get_mut(&uid) {
            p.task = task;
            p.first_tools_page = first_tools_page;
        }
    }

    fn pump(&mut self) {
        if self.state != State::Ready || self.shutdown.is_some() {
            return;
        }
        while self.in_flight < self.config.max_concurrent {
            let Some((_, q)) = self.queue.pop() else {
                break;
            };
            // A call that was already waiting when the upstream asked this account to sign in
            // gets that same sign-in: forwarding it would only start another flow.
            if let Some(sign_in) = self.sign_ins.get(&q.account)
                && q.enqueued <= sign_in.since
            {
                let text = sign_in_text(&self.name, &sign_in.url);
                self.count_session_outcome(&q.origin, Outcome::Error, Duration::ZERO);
                self.reply_error(q.origin, true, ErrorCode::UpstreamError, &text);
                continue;
            }
            self.dispatch_call(q);
        }
    }

    fn dispatch_call(&mut self, q: Queued) {
        let account = q.account;
        let uid = self.next_uid;
        self.dispatch(q.origin, q.msg, true, Some(q.tool));
        if let Some(p) = self.pending.get_mut(&uid) {
            p.account = Some(account);
        }
    }

    /// Note a sign-in the upstream asked for, or that an account's calls work again.
    fn track_sign_in(&mut self, account: &str, msg: &Message) {
        match sign_in_url(msg) {
            Some(url) => {
                let fresh = self.sign_ins.get(account).is_none_or(|s| s.url != url);
                self.sign_ins.insert(
                    account.to_string(),
                    SignIn {
                        url: url.clone(),
                        since: Instant::now(),
                        at: SystemTime::now(),
                    },
                );
                if fresh {
                    tracing::warn!(upstream = %self.name, account, "Google sign-in required: {url}");
                    let data = format!(
                        "Google sign-in required for the `{}` server: open {url} in a browser and sign in; calls work again afterwards.",
                        self.name
                    );
                    let params = json!({"level": "warning", "logger": "coogle", "data": data});
                    let line = wire::notification_line("notifications/message", Some(&params));
                    self.broadcast(&line);
                }
            }
            None => {
                if !msg.is_error_response() && self.sign_ins.remove(account).is_some() {
                    tracing::info!(upstream = %self.name, account, "signed in: calls work again");
                }
            }
        }
    }

    fn on_session_notification(&mut self, sid: SessionId, msg: Message) {
        match msg.method().as_deref() {
            Some("notifications/initialized") => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.initialized = true;
                }
            }
            Some("notifications/cancelled") => {
                if let Some(req) = msg.params_field("requestId") {
                    let reason = msg
                        .params_value()
                        .get("reason")
                        .and_then(|r| r.as_str())
                        .unwrap_or("cancelled by the client")
                        .to_string();
                    self.cancel(sid, &id_key(&req), &reason);
                }
            }
            _ => {
                if self.state == State::Ready {
                    self.to_child(msg.to_line());
                }
            }
        }
    }

    /// Cancel one of a session's requests wherever it is: queued, held or in flight.
    fn cancel(&mut self, sid: SessionId, key: &str, reason: &str) {
        if let Some(q) = self
            .queue
            .remove_first(sid, |q| q.origin.matches_client(sid, key))
        {
            self.count_session_outcome(&q.origin, Outcome::Cancelled, Duration::ZERO);
            self.stats.record(Outcome::Cancelled, Duration::ZERO);
            return;
        }
        if let Some(pos) = self
            .held
            .iter()
            .position(|(_, o, _)| o.matches_client(sid, key))
        {
            self.held.remove(pos);
            return;
        }
        if let Some(uid) = self.by_client.remove(&(sid, key.to_string())) {
            self.abandon(uid, reason, Outcome::Cancelled);
        }
    }

    /// Forget an in-flight request and tell the child to stop working on it.
    fn abandon(&mut self, uid: u64, reason: &str, outcome: Outcome) -> Option<Pending> {
        let p = self.pending.remove(&uid)?;
        self.deadlines.remove(&(p.deadline, uid));
        if p.token {
            self.tokens.remove(&uid);
        }
        if let Some(sid) = p.origin.session()
            && let Some(s) = self.sessions.get_mut(&sid)
        {
            s.in_flight = s.in_flight.saturating_sub(1);
            if p.is_call {
                s.stats.record(outcome, p.started.elapsed());
            }
        }
        if p.is_call {
            self.in_flight = self.in_flight.saturating_sub(1);
            self.stats.record(outcome, p.started.elapsed());
        }
        self.to_child(wire::notification_line(
            "notifications/cancelled",
            Some(&json!({"requestId": uid, "reason": reason})),
        ));
        self.pump();
        self.check_shutdown();
        Some(p)
    }

    fn on_timeout(&mut self, uid: u64) {
        let secs = self.config.call_timeout.as_secs_f64();
        let is_init = matches!(
            self.pending.get(&uid).map(|p| &p.origin),
            Some(Origin::Internal(Internal::Initialize))
        );
        if is_init {
            self.pending.remove(&uid);
            self.last_error = Some(format!("it did not answer initialize within {secs} s"));
            tracing::error!(upstream = %self.name, "the upstream did not answer initialize within {secs} s; stopping it");
            self.kill_child();
            return;
        }
        let reason = format!("timed out after {secs} s");
        let Some(p) = self.abandon(uid, &reason, Outcome::Timeout) else {
            return;
        };
        if let Origin::Session { id, client_id } = &p.origin {
            self.by_client.remove(&(*id, id_key(client_id)));
        }
        let what = p.tool.as_deref().map_or_else(
            || "the request".to_string(),
            |t| format!("the call to `{t}`"),
        );
        let text = format!(
            "coogle: {what} on the `{}` server timed out after {secs} s and was cancelled upstream",
            self.name
        );
        tracing::warn!(upstream = %self.name, "{text}");
        self.reply_error(p.origin, p.is_call, ErrorCode::Timeout, &text);
        if p.is_call {
            self.consecutive_timeouts += 1;
            if self.consecutive_timeouts >= WEDGED_AFTER_TIMEOUTS && self.child.is_some() {
                tracing::warn!(upstream = %self.name, "{} calls in a row timed out; restarting the upstream", self.consecutive_timeouts);
                self.stop_reason = Some(format!(
                    "{} calls in a row timed out, so coogle restarted it",
                    self.consecutive_timeouts
                ));
                self.consecutive_timeouts = 0;
                self.kill_child();
            }
        }
    }

    fn on_session_closed(&mut self, sid: SessionId) {
        let Some(session) = self.sessions.remove(&sid) else {
            return;
        };
        drop(session);
        tracing::info!(upstream = %self.name, session = sid, "session disconnected");
        let dropped = self.queue.remove_key(sid);
        for q in &dropped {
            self.stats.record(Outcome::Cancelled, Duration::ZERO);
            let _ = q;
        }
        self.held.retain(|(_, o, _)| o.session() != Some(sid));
        self.ops.forget_session(sid);
        let owned: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, owner)| **owner == sid)
            .map(|(t, _)| t.clone())
            .collect();
        for task_id in owned {
            self.tasks.remove(&task_id);
            if self.state == State::Ready {
                self.send_internal(
                    Internal::Housekeeping,
                    "tasks/cancel",
                    &json!({"taskId": task_id}),
                );
            }
        }
        let mut abandoned = Vec::new();
        self.subscriptions.retain(|uri, subs| {
            if subs.remove(&sid) && subs.is_empty() {
                abandoned.push(uri.clone());
                return false;
            }
            !subs.is_empty()
        });
        if self.state == State::Ready {
            for uri in abandoned {
                self.send_internal(
                    Internal::Housekeeping,
                    "resources/unsubscribe",
                    &json!({"uri": uri}),
                );
            }
        }
        let mine: Vec<u64> = self
            .by_client
            .iter()
            .filter(|((s, _), _)| *s == sid)
            .map(|(_, uid)| *uid)
            .collect();
        self.by_client.retain(|(s, _), _| *s != sid);
        for uid in mine {
            self.abandon(uid, "the client disconnected", Outcome::Cancelled);
        }
        let orphaned: Vec<String> = self
            .server_requests
            .iter()
            .filter(|(_, r)| r.session == sid)
            .map(|(k, _)| k.clone())
            .collect();
        for k in orphaned {
            if let Some(r) = self.server_requests.remove(&k) {
                self.to_child(error_line(
                    Some(&r.child_id),
                    rpc_code::INTERNAL_ERROR,
                    "coogle: the session this request was routed to disconnected",
                ));
            }
        }
    }

    fn send_to_session(&mut self, sid: SessionId, line: Vec<u8>) {
        let Some(s) = self.sessions.get(&sid) else {
            return;
        };
        match s.out.send(line) {
            Ok(()) if s.out.queued() > SESSION_BUFFER => {
                tracing::warn!(upstream = %self.name, session = sid, "the session is not reading its responses; disconnecting it");
                self.on_session_closed(sid);
            }
            Ok(()) => {}
            Err(_) => self.on_session_closed(sid),
        }
    }

    fn broadcast(&mut self, line: &[u8]) {
        let ids: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.initialized)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.send_to_session(id, line.to_vec());
        }
    }

    fn count_session_outcome(&mut self, origin: &Origin, outcome: Outcome, latency: Duration) {
        if let Some(sid) = origin.session()
            && let Some(s) = self.sessions.get_mut(&sid)
        {
            s.stats.record(outcome, latency);
        }
    }

    fn reply_ok(&mut self, origin: Origin, result: &RawValue) {
        match origin {
            Origin::Session { id, client_id } => {
                self.send_to_session(id, response_line(&client_id, result))
            }
            Origin::Control(reply) => {
                let _ = reply.send(Ok(result.to_owned()));
            }
            Origin::Operation(op) => self.finish_operation(&op, result.to_owned()),
            Origin::Internal(_) => {}
        }
    }

    /// Answer a request the daemon could not get answered: a tool result with `isError` for
    /// calls (the agent reads why), a JSON-RPC error for other requests.
    fn reply_error(&mut self, origin: Origin, is_call: bool, code: ErrorCode, text: &str) {
        match origin {
            Origin::Session { id, client_id } => {
                let line = if is_call {
                    response_line(&client_id, &raw(&wire::tool_error_result(text)))
                } else {
                    let rpc = if code == ErrorCode::Timeout {
                        rpc_code::REQUEST_TIMEOUT
                    } else {
                        rpc_code::UPSTREAM_UNAVAILABLE
                    };
                    error_line(Some(&client_id), rpc, text)
                };
                self.send_to_session(id, line);
            }
            Origin::Control(reply) => {
                let _ = reply.send(Err(WireError::new(code, text)));
            }
            Origin::Operation(op) => {
                self.finish_operation(&op, raw(&wire::tool_error_result(text)));
            }
            Origin::Internal(_) => {}
        }
    }

    fn finish_operation(&mut self, op: &str, result: Box<RawValue>) {
        for w in self.ops.finish(op, result.clone()) {
            self.send_to_session(w.session, response_line(&w.client_id, &result));
        }
    }

    /// A call of the `coogle` tool, answered by the daemon.
    fn coogle_call(&mut self, sid: SessionId, client_id: Box<RawValue>, arguments: &Value) {
        use super::coogle_tool::{self, Action, WaitOutcome, Waiter};
        self.ops.expire(Instant::now());
        let action = match coogle_tool::parse(arguments) {
            Ok(a) => a,
            Err(e) => {
                let result = wire::tool_error_result(&format!("coogle: {e}"));
                self.send_to_session(sid, response_line(&client_id, &raw(&result)));
                return;
            }
        };
        let result = match action {
            Action::Status => {
                let status = self.status_json();
                coogle_tool::result(&status_text(&status), status)
            }
            Action::Info => {
                let info = json!({
                    "coogle": wire::VERSION,
                    "daemonPid": std::process::id(),
                    "server": self.name,
                    "command": child::display_command(&self.config),
                    "session": sid,
                });
                let text = format!(
                    "coogle {} (daemon pid {}), server `{}` ({}), this session #{sid}",
                    wire::VERSION,
                    std::process::id(),
                    self.name,
                    child::display_command(&self.config)
                );
                coogle_tool::result(&text, info)
            }
            Action::Restart => {
                self.request_restart(RestartWaiter::Tool {
                    session: sid,
                    client_id,
                });
                return;
            }
            Action::StartCall { tool, arguments } => {
                let op = self.ops.start(&tool);
                let params = json!({"name": tool, "arguments": arguments});
                let line = wire::request_line(&raw(&0), "tools/call", &params);
                if let Ok(msg) = Message::parse(line.trim_ascii_end()) {
                    self.route_request(sid, Origin::Operation(op.clone()), msg);
                }
                coogle_tool::result(
                    &format!(
                        "Started operation {op} (`{tool}`); fetch its result with action `wait` and operation \"{op}\"."
                    ),
                    json!({"operation": op, "status": "running"}),
                )
            }
            Action::Wait { operation, wait } => {
                let waiter = Waiter {
                    operation: operation.clone(),
                    session: sid,
                    client_id: client_id.clone(),
                };
                match self.ops.wait(waiter, wait) {
                    WaitOutcome::Done(result) => {
                        self.send_to_session(sid, response_line(&client_id, &result));
                        return;
                    }
                    WaitOutcome::Waiting => return,
                    WaitOutcome::Running => coogle_tool::running(&operation),
                    WaitOutcome::Unknown => wire::tool_error_result(&format!(
                        "coogle: no operation {operation:?} (results are kept {} minutes after they finish)",
                        coogle_tool::RETENTION.as_secs() / 60
                    )),
                }
            }
            Action::ListOperations => {
                let list = self.ops.list();
                let n = list.as_array().map_or(0, Vec::len);
                coogle_tool::result(&format!("{n} operation(s)"), json!({"operations": list}))
            }
            Action::Cancel { operation } => {
                let is_op = |o: &Origin| matches!(o, Origin::Operation(x) if *x == operation);
                if self.ops.is_running(&operation) != Some(true) {
                    wire::tool_error_result(&format!(
                        "coogle: operation {operation:?} is not running"
                    ))
                } else {
                    if self.queue.remove_first(sid, |q| is_op(&q.origin)).is_none() {
                        let uid = self
                            .pending
                            .iter()
                            .find(|(_, p)| is_op(&p.origin))
                            .map(|(u, _)| *u);
                        if let Some(uid) = uid {
                            self.abandon(uid, "cancelled with the coogle tool", Outcome::Cancelled);
                        }
                    }
                    let text = format!("coogle: operation {operation} was cancelled");
                    self.finish_operation(&operation, raw(&wire::tool_error_result(&text)));
                    coogle_tool::result(
                        &format!("Cancelled operation {operation}."),
                        json!({"operation": operation, "status": "cancelled"}),
                    )
                }
            }
        };
        self.send_to_session(sid, response_line(&client_id, &raw(&result)));
    }

    // ---------------------------------------------------------------------------------------
    // Control.

    fn on_control(&mut self, cmd: ControlCmd) {
        match cmd {
            ControlCmd::Status(reply) => {
                let _ = reply.send(self.status_json());
            }
            ControlCmd::Request {
                method,
                params,
                reply,
            } => {
                let line = wire::request_line(&raw(&0), &method, &params);
                let msg = match Message::parse(line.trim_ascii_end()) {
                    Ok(m) => m,
                    Err(e) => {
                        let _ = reply.send(Err(WireError::new(ErrorCode::Internal, e.to_string())));
                        return;
                    }
                };
                let key = self.next_control_key;
                self.next_control_key += 1;
                self.route_request(key, Origin::Control(reply), msg);
            }
            ControlCmd::Restart(reply) => self.request_restart(RestartWaiter::Control(reply)),
            ControlCmd::Shutdown { grace, done } => {
                self.shutdown = Some((Instant::now() + grace, Some(done)));
                self.restart_at = None;
                self.fail_waiting(ErrorCode::ShuttingDown, "coogle is shutting down");
                let err = WireError::new(ErrorCode::ShuttingDown, "coogle is shutting down");
                self.answer_restart_waiters(Err(err));
                self.check_shutdown();
            }
        }
    }

    /// Restart the child (or start it, when it is down); `waiter` hears when it is ready.
    fn request_restart(&mut self, waiter: RestartWaiter) {
        if self.shutdown.is_some() {
            self.restart_waiters.push(waiter);
            let err = WireError::new(ErrorCode::ShuttingDown, "coogle is shutting down");
            self.answer_restart_waiters(Err(err));
            return;
        }
        self.restart_waiters.push(waiter);
        match self.state {
            State::Starting | State::Initializing => {}
            State::Ready => {
                tracing::info!(upstream = %self.name, "restarting the upstream on request");
                self.manual_restart = true;
                self.sign_ins.clear();
                self.kill_child();
            }
            _ => {
                self.consecutive_failures = 0;
                self.start_child();
            }
        }
    }

    fn answer_restart_waiters(&mut self, outcome: Result<Value, WireError>) {
        for w in std::mem::take(&mut self.restart_waiters) {
            match w {
                RestartWaiter::Control(reply) => {
                    let _ = reply.send(outcome.clone());
                }
                RestartWaiter::Tool { session, client_id } => {
                    let result = match &outcome {
                        Ok(v) => super::coogle_tool::result(
                            &format!("Restarted the `{}` server (pid {}).", self.name, v["pid"]),
                            v.clone(),
                        ),
                        Err(e) => wire::tool_error_result(&e.message),
                    };
                    self.send_to_session(session, response_line(&client_id, &raw(&result)));
                }
            }
        }
    }

    /// During shutdown: once no call is in flight (or the grace has passed), stop the child.
    fn check_shutdown(&mut self) {
        if self.shutdown.is_some() && self.in_flight == 0 && self.state != State::Stopping {
            self.finish_shutdown();
        }
    }

    fn finish_shutdown(&mut self) {
        if self.state == State::Stopping || self.state == State::Stopped {
            return;
        }
        if let Some((t, _)) = &mut self.shutdown {
            // Past here the grace timer has done its job.
            *t = Instant::now() + Duration::from_secs(3600);
        }
        if self.child.is_some() {
            self.state = State::Stopping;
            self.kill_child();
        } else {
            self.state = State::Stopped;
        }
    }

    fn status_json(&self) -> Value {
        let now = Instant::now();
        let sessions: Vec<Value> = {
            let mut ids: Vec<&SessionId> = self.sessions.keys().collect();
            ids.sort();
            ids.into_iter()
                .map(|id| {
                    let s = &self.sessions[id];
                    json!({
                        "id": id,
                        "clientInfo": s.client_info,
                        "claudeSessionId": s.hello.claude_session_id,
                        "pid": s.hello.pid,
                        "client": s.hello.client,
                        "version": s.hello.version,
                        "protocolVersion": s.protocol_version,
                        "connectedAtMs": s.connected_at.duration_since(UNIX_EPOCH).map(ms).unwrap_or(0),
                        "uptimeMs": ms(s.connected.elapsed()),
                        "queued": self.queue.len_of(*id),
                        "inFlight": s.in_flight,
                        "stats": s.stats.to_json(),
                    })
                })
                .collect()
        };
        json!({
            "name": self.name,
            "state": self.state.as_str(),
            "command": child::display_command(&self.config),
            "pid": self.child.as_ref().map(|c| c.pid),
            "uptimeMs": self.child.as_ref().map(|c| ms(c.started.elapsed())),
            "restarts": self.restarts,
            "consecutiveFailures": self.consecutive_failures,
            "nextRestartInMs": self.restart_at.map(|t| ms(t.saturating_duration_since(now))),
            "lastError": self.last_error,
            "queue": self.queue.len(),
            "inFlight": self.in_flight,
            "maxConcurrent": self.config.max_concurrent,
            "callTimeoutMs": ms(self.config.call_timeout),
            "tools": self.tools_count,
            "serverInfo": self.init_result.as_ref().and_then(|r| serde_json::from_str::<Value>(r.get()).ok()).and_then(|v| v.get("serverInfo").cloned()),
            "stats": self.stats.to_json(),
            "signIn": self.sign_ins.iter().map(|(account, s)| json!({
                "account": account,
                "url": s.url,
                "sinceMs": s.at.duration_since(UNIX_EPOCH).map(ms).unwrap_or(0),
            })).collect::<Vec<_>>(),
            "sessions": sessions,
        })
    }
}

/// The daemon's ids for server→client requests are JSON strings; `key` is their canonical text.
fn key_to_daemon_id(key: &str) -> Value {
    serde_json::from_str(key).unwrap_or(Value::Null)
}

/// `status` for an agent to read.
fn status_text(s: &Value) -> String {
    let mut t = format!(
        "Server `{}` is {} (pid {}, restarts {}, queue {}, in flight {}/{}).",
        s["name"].as_str().unwrap_or("?"),
        s["state"].as_str().unwrap_or("?"),
        s["pid"],
        s["restarts"],
        s["queue"],
        s["inFlight"],
        s["maxConcurrent"]
    );
    if let Some(e) = s["lastError"].as_str() {
        t.push_str(&format!("\nLast error: {e}"));
    }
    if let Some(ms) = s["nextRestartInMs"].as_u64() {
        t.push_str(&format!(
            "\nNext start attempt in {:.1} s.",
            ms as f64 / 1000.0
        ));
    }
    for si in s["signIn"].as_array().into_iter().flatten() {
        t.push_str(&format!(
            "\nGoogle sign-in required{}: {}",
            si["account"]
                .as_str()
                .filter(|a| !a.is_empty())
                .map(|a| format!(" for {a}"))
                .unwrap_or_default(),
            si["url"].as_str().unwrap_or("?")
        ));
    }
    let n = s["sessions"].as_array().map_or(0, Vec::len);
    t.push_str(&format!("\n{n} session(s) share it."));
    t
}

/// The sign-in URL in a tool's answer, if the upstream started a Google sign-in flow.
fn sign_in_url(msg: &Message) -> Option<String> {
    let text = msg.field("result").or_else(|| msg.field("error"))?.get();
    let start = text.find(SIGN_IN_MARKER)? + SIGN_IN_MARKER.len();
    let url: String = text[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\\')
        .collect();
    url.starts_with("http").then_some(url)
}

fn sign_in_text(server: &str, url: &str) -> String {
    format!(
        "Google sign-in required for the `{server}` server: open {url} in a browser, sign in, then retry the call. (coogle answered this call itself so that no second sign-in flow was started.)"
    )
}

/// The task a `CreateTaskResult` names.
fn created_task_id(msg: &Message) -> Option<String> {
    let result: Value = serde_json::from_str(msg.field("result")?.get()).ok()?;
    result
        .get("task")?
        .get("taskId")?
        .as_str()
        .map(String::from)
}

/// The task a server request says it belongs to (`params._meta[RELATED_TASK].taskId`).
fn related_task(msg: &Message) -> Option<String> {
    let meta: Value = serde_json::from_str(msg.params_field("_meta")?.get()).ok()?;
    meta.get(RELATED_TASK)?
        .get("taskId")?
        .as_str()
        .map(String::from)
}

fn count_tools(result: &RawValue) -> Option<usize> {
    serde_json::from_str::<Value>(result.get())
        .ok()?
        .get("tools")?
        .as_array()
        .map(Vec::len)
}

/// A `tools/call` result that reports failure.
fn result_is_error(msg: &Message) -> bool {
    #[derive(serde::Deserialize)]
    struct IsError {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    msg.field("result")
        .and_then(|r| serde_json::from_str::<IsError>(r.get()).ok())
        .is_some_and(|r| r.is_error)
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_compare_canonically() {
        assert_eq!(
            id_key(&raw(&1)),
            id_key(&RawValue::from_string("1".into()).unwrap())
        );
        assert_eq!(
            id_key(&RawValue::from_string("\"a\"".into()).unwrap()),
            "\"a\""
        );
        assert_ne!(id_key(&raw(&1)), id_key(&raw(&"1")));
    }

    #[test]
    fn log_levels_are_ordered() {
        assert!(log_level_rank("debug") < log_level_rank("error"));
        assert_eq!(log_level_rank("nonsense"), None);
    }

    #[test]
    fn detects_error_results() {
        let m =
            Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#)
                .unwrap();
        assert!(result_is_error(&m));
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#).unwrap();
        assert!(!result_is_error(&m));
    }
}
