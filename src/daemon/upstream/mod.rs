//! One upstream MCP server and everything routed through it: the child process, the sessions
//! bound to it, the router and the fair call queue.
//!
//! Each upstream is an actor: one task owns all of its state and handles one event at a time
//! (a session's line, a child's line, a child's exit, a control command, a deadline), so routing
//! needs no locks. The router reads only what [`request`] classifies and the few notification
//! fields it routes by; every other byte is forwarded as it came. It must never block on a
//! session: a session that stops reading is disconnected rather than allowed to stall everyone
//! else.
//!
//! The parts, each in its own file:
//! - [`lifecycle`]: start, initialize, exit, backoff, restart, shutdown; [`child_io`] the pipes;
//! - [`from_sessions`] and [`from_child`]: the router, both directions; [`era`] the bridge
//!   between protocol eras, [`listen`] 2026-07-28 subscriptions, [`mrtr`] input rounds;
//! - [`inflight`]: the one table of requests the child is working on;
//! - [`sessions`], [`tasks`], [`subscriptions`], [`server_requests`], [`log_level`],
//!   [`sign_in`]: what belongs to whom;
//! - [`cache`]: the child's answers kept for instant starts; [`status`] and [`coogle_call`].

mod cache;
mod child_io;
mod coogle_call;
mod era;
mod from_child;
mod from_sessions;
mod handing_over;
mod inflight;
mod lifecycle;
mod listen;
mod log_level;
mod mrtr;
mod on_demand;
mod request;
mod server_requests;
mod sessions;
mod sign_in;
mod status;
mod subscriptions;
mod tasks;
#[cfg(test)]
mod tests;
mod waiting;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::daemon::session_socket::SessionWriter;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::SessionId;
use super::coogle_tool;
use super::operations::Operations;
use super::outbox::Outbox;
use super::scheduler::QueueKey;
use super::stats::CallStats;
use crate::config::ServerConfig;
use crate::daemon::handover::carried::CarriedScope;
use crate::wire::{
    self, ChildReady, ErrorCode, Hello, Message, ToolCallParams, UpstreamStatus, WireError,
    error_line, raw, response_line, rpc_code,
};
use cache::Cache;
pub(crate) use child_io::DetachedPipes;
pub(crate) use handing_over::{Adopted, Detached, started_at};
use inflight::InFlight;
use lifecycle::{Life, RestartWaiter};
use server_requests::ServerRequests;
use sessions::Session;
use sign_in::SignIns;
use subscriptions::Subscriptions;
use tasks::Tasks;

/// Control-mode calls each get their own queue key from this range, so they share fairly too.
const CONTROL_KEY_BASE: QueueKey = 1 << 48;

/// Events the actor handles, one at a time.
pub(crate) enum Event {
    SessionOpen {
        id: SessionId,
        /// Boxed: an event waits in a queue slot the size of the largest, and this one comes once
        /// per session.
        hello: Box<Hello>,
        out: Outbox<SessionWriter>,
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

pub(crate) enum ChildEvent {
    Line(Vec<u8>),
    LineTooLong,
    /// Its stdout reached EOF: it can never answer again, whether or not it still runs.
    StdoutClosed,
    /// The stdout reader let go as told (an upgrade in place): every line it read is before
    /// this in the actor's queue.
    ReaderStopped,
    Exited(String),
}

/// Where a control request's answer goes.
type ControlReply = oneshot::Sender<Result<Box<RawValue>, WireError>>;

/// Where the answer to a start or restart goes: the child that is ready.
type ReadyReply = oneshot::Sender<Result<ChildReady, WireError>>;

pub(crate) enum ControlCmd {
    Status(oneshot::Sender<UpstreamStatus>),
    /// A request on behalf of a control connection (`tools/list`, `tools/call`), made by the
    /// handle (see [`Message::request`]); its id is the daemon's to give.
    Request {
        request: Message,
        reply: ControlReply,
    },
    Restart(ReadyReply),
    /// Start the child if it is not running (idle, failed); answered once it is ready.
    Start(ReadyReply),
    /// Send the child nothing new (an upgrade in place); answered once it works on nothing.
    Freeze(oneshot::Sender<()>),
    Unfreeze,
    /// Let go of the running child for the new daemon (see `handing_over`).
    Detach(oneshot::Sender<Option<Detached>>),
    Shutdown {
        grace: Duration,
        done: oneshot::Sender<()>,
    },
}

/// The cheap, cloneable way to talk to an upstream's actor.
#[derive(Clone)]
pub(crate) struct UpstreamHandle {
    pub name: String,
    tx: mpsc::Sender<Event>,
    /// Set by the actor while it has no session and nothing to do: an instance the registry
    /// may drop (see `on_demand::Upstream::is_unused`).
    unused: Arc<AtomicBool>,
}

fn gone() -> WireError {
    WireError::new(ErrorCode::ShuttingDown, "the upstream has stopped")
}

impl UpstreamHandle {
    /// Whether the actor had no session and nothing to do when it last looked.
    pub fn is_unused(&self) -> bool {
        self.unused.load(Ordering::Acquire)
    }

    pub async fn send(&self, event: Event) -> bool {
        self.tx.send(event).await.is_ok()
    }

    pub async fn status(&self) -> UpstreamStatus {
        let (tx, rx) = oneshot::channel();
        if !self.send(Event::Control(ControlCmd::Status(tx))).await {
            return UpstreamStatus::stopped(&self.name);
        }
        rx.await
            .unwrap_or_else(|_| UpstreamStatus::stopped(&self.name))
    }

    /// A request to the child on behalf of a control connection; the answer's `result`, raw.
    async fn request(
        &self,
        method: &str,
        params: Box<RawValue>,
    ) -> Result<Box<RawValue>, WireError> {
        let (tx, rx) = oneshot::channel();
        let cmd = ControlCmd::Request {
            request: Message::request(raw(&0), method, params),
            reply: tx,
        };
        if !self.send(Event::Control(cmd)).await {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }

    /// One page of the child's tool list (from the cache when it can answer).
    pub async fn tools_page(&self, cursor: Option<&str>) -> Result<ToolsPage, WireError> {
        #[derive(serde::Serialize)]
        struct Params<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            cursor: Option<&'a str>,
        }
        let page = self.request("tools/list", raw(&Params { cursor })).await?;
        serde_json::from_str(page.get()).map_err(|e| {
            WireError::new(
                ErrorCode::UpstreamError,
                format!("the server's tools/list answer is malformed: {e}"),
            )
        })
    }

    /// A tool call through the fair queue, as a session's would go; the tool's result as the
    /// server gave it.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: &serde_json::Map<String, Value>,
    ) -> Result<Value, WireError> {
        let params = raw(&ToolCallParams {
            name: tool,
            arguments,
        });
        let result = self.request("tools/call", params).await?;
        serde_json::from_str(result.get())
            .map_err(|e| WireError::new(ErrorCode::UpstreamError, e.to_string()))
    }

    pub async fn start(&self) -> Result<ChildReady, WireError> {
        let (tx, rx) = oneshot::channel();
        if !self.send(Event::Control(ControlCmd::Start(tx))).await {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }

    pub async fn restart(&self) -> Result<ChildReady, WireError> {
        let (tx, rx) = oneshot::channel();
        if !self.send(Event::Control(ControlCmd::Restart(tx))).await {
            return Err(gone());
        }
        rx.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Freeze the actor for an upgrade in place; the receiver resolves once nothing is in
    /// flight (`None`: the actor is gone).
    pub async fn freeze_start(&self) -> Option<oneshot::Receiver<()>> {
        let (tx, rx) = oneshot::channel();
        self.send(Event::Control(ControlCmd::Freeze(tx)))
            .await
            .then_some(rx)
    }

    pub async fn unfreeze(&self) {
        self.send(Event::Control(ControlCmd::Unfreeze)).await;
    }

    /// Let go of the running child; `None` when there is none to carry.
    pub async fn detach(&self) -> Option<Detached> {
        let (tx, rx) = oneshot::channel();
        if !self.send(Event::Control(ControlCmd::Detach(tx))).await {
            return None;
        }
        rx.await.ok().flatten()
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

/// One page of a `tools/list` answer, as far as control mode reads it.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ToolsPage {
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default, rename = "nextCursor")]
    pub next_cursor: Option<String>,
}

/// What an upstream actor is started with.
pub(crate) struct Start {
    pub config: ServerConfig,
    /// The values of the server's `passEnv` this instance's child gets (from its sessions).
    pub passed_env: BTreeMap<String, String>,
    /// Where what the daemon learns of the child is kept on disk, one file per instance (so
    /// nothing one project's child said answers another project's session); `None`: in memory
    /// only (an instance of one session).
    pub cache_key: Option<String>,
    /// How an upgrade in place names this instance, when its child can be carried.
    pub carried_as: Option<CarriedScope>,
    /// A running child to take over from the daemon this one replaced.
    pub adopted: Option<Adopted>,
    /// Which instance this is, for `status` (a project directory, a session); `None` when the
    /// server is shared by everyone.
    pub instance: Option<String>,
    pub record_path: PathBuf,
    pub max_line: usize,
    pub coogle_tool: bool,
    pub reaper: std::sync::Arc<super::reaper::Reaper>,
}

/// Start an upstream's actor; its child starts on demand.
pub(crate) fn start(s: Start) -> UpstreamHandle {
    let (tx, rx) = mpsc::channel(4096);
    let name = s.config.name.clone();
    let mut actor = Upstream::new(s.config, s.record_path, s.max_line, tx.clone());
    actor.cache = match &s.cache_key {
        Some(key) => Cache::new(&name, key),
        None => Cache::new(&name, "memory").without_disk(),
    };
    // What a session passes (`passEnv`) may be a secret too: never written out.
    crate::redact::add_known(s.passed_env.values().cloned());
    actor.passed_env = s.passed_env;
    actor.instance = s.instance;
    actor.coogle_tool = s.coogle_tool;
    actor.reaper = s.reaper;
    actor.life.idle_stop = actor.config.idle_stop;
    let caps = actor.config.client_capabilities.clone();
    actor.cache.load("config", &caps);
    actor.life.probe_kills = actor.cache.probe_kills();
    actor.carried_as = s.carried_as;
    if let Some(adopted) = s.adopted {
        actor.adopt(adopted);
    }
    let unused = actor.unused.clone();
    tokio::spawn(actor.run(rx));
    UpstreamHandle { name, tx, unused }
}

/// Requests the daemon makes of the child for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Internal {
    /// The probe that tells a 2026-07-28 child from a handshake-era one.
    Discover,
    Initialize,
    ToolsList,
    /// The daemon's own `subscriptions/listen` on a 2026-07-28 child.
    Listen,
    /// Bookkeeping (log level, subscriptions, cancelling a gone session's tasks): the answer
    /// only gets logged.
    Housekeeping,
}

/// Who is waiting for a request's answer.
enum Origin {
    Session {
        id: SessionId,
        client_id: Box<RawValue>,
    },
    Control(ControlReply),
    Internal(Internal),
    /// A call started with the `coogle` tool's `start_call`: its result is kept for `wait`.
    Operation(String),
}

impl Origin {
    fn session(&self) -> Option<SessionId> {
        match self {
            Origin::Session { id, .. } => Some(*id),
            _ => None,
        }
    }

    fn matches_client(&self, sid: SessionId, key: &str) -> bool {
        matches!(self, Origin::Session { id, client_id } if *id == sid && wire::id_key(client_id) == key)
    }
}

struct Upstream {
    name: String,
    /// Which instance of the server this is, when it has several (see `registry`).
    instance: Option<String>,
    config: ServerConfig,
    tx: mpsc::Sender<Event>,
    life: Life,
    cache: Cache,
    inflight: InFlight,
    /// Every request that is not with the child yet (see `waiting`).
    waiting: waiting::WaitingRoom,
    /// The daemon's own `subscriptions/listen` on a 2026-07-28 child (its uid).
    own_listen: Option<u64>,
    next_control_key: QueueKey,
    /// Looked up on every line: foldhash rather than SipHash (see `inflight`).
    sessions: foldhash::HashMap<SessionId, Session>,
    server_requests: ServerRequests,
    subscriptions: Subscriptions,
    tasks: Tasks,
    sign_ins: SignIns,
    /// The log level the child was last asked for (the most verbose any session wants).
    child_log_level: Option<u8>,
    /// Log messages of a 2026-07-28 child that more than one session could have asked for,
    /// and that no session got.
    unattributed_logs: u64,
    /// When to retry delivering list changes sessions missed while not reading.
    missed_retry_at: Option<Instant>,
    /// Whether the `coogle` tool is offered (config `coogleTool`).
    coogle_tool: bool,
    ops: Operations,
    stats: CallStats,
    /// Stops what a child leaves behind when it exits (see `reaper`).
    reaper: std::sync::Arc<super::reaper::Reaper>,
    /// The values of `passEnv` its child gets (see `child::environment`).
    passed_env: BTreeMap<String, String>,
    /// Shared with the handle: see [`UpstreamHandle::is_unused`].
    unused: Arc<AtomicBool>,
    /// An upgrade in place is under way (see `handing_over`).
    frozen: Option<handing_over::Frozen>,
    /// The child was let go of: the actor ends, leaving it running.
    detached: bool,
    /// The sessions were told of an upgrade in place: what they sent and was not answered
    /// they send again to the new daemon, so it is dropped here, never failed.
    handed_over: bool,
    carried_as: Option<CarriedScope>,
    /// What sessions had set up before an upgrade, until they reconnect.
    carried_sessions: handing_over::CarriedSessions,
    carried_until: Option<Instant>,
    /// A detach under way: answered once the child's stdout reader has let go.
    detaching: Option<tokio::sync::oneshot::Sender<Option<handing_over::Detached>>>,
    /// An adopted child's stdout is read once this is open, or at its deadline.
    read_gate: Option<(tokio::sync::watch::Sender<bool>, Instant)>,
}

pub(super) fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
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
            instance: None,
            cache: Cache::new(&config.name, &config.cache_key()),
            life: Life::new(record_path, max_line),
            tx,
            inflight: InFlight::default(),
            waiting: waiting::WaitingRoom::default(),
            own_listen: None,
            next_control_key: CONTROL_KEY_BASE,
            sessions: foldhash::HashMap::default(),
            server_requests: ServerRequests::default(),
            subscriptions: Subscriptions::default(),
            tasks: Tasks::default(),
            sign_ins: SignIns::new(config.sign_in.as_ref()),
            child_log_level: None,
            unattributed_logs: 0,
            missed_retry_at: None,
            coogle_tool: false,
            ops: Operations::default(),
            stats: CallStats::default(),
            reaper: Default::default(),
            passed_env: BTreeMap::new(),
            unused: Arc::new(AtomicBool::new(false)),
            frozen: None,
            detached: false,
            handed_over: false,
            carried_as: None,
            carried_sessions: HashMap::new(),
            carried_until: None,
            read_gate: None,
            detaching: None,
            config,
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Event>) {
        // The child starts on the first request the cache cannot answer (see `demand`).
        //
        // One timer for the actor's life, only ever moved earlier. A deadline that moved later
        // (each call's timeout, set as the call starts) lets the timer fire early: `on_timer`
        // finds nothing due, and the timer is set again. A new timer per event cost a timer
        // wheel insertion and removal for each line (issue 22).
        let timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        loop {
            if let Some(wake) = self.next_wakeup()
                && armed.is_none_or(|at| wake < at)
            {
                timer.as_mut().reset(wake.into());
                armed = Some(wake);
            }
            tokio::select! {
                event = rx.recv() => match event {
                    Some(event) => {
                        self.handle(event);
                        self.note_idle();
                    }
                    None => break,
                },
                () = &mut timer, if armed.is_some() => {
                    armed = None;
                    self.on_timer();
                }
            }
            self.check_frozen();
            if self.detached {
                break;
            }
            self.unused.store(self.is_unused(), Ordering::Release);
            if matches!(
                self.life.state,
                wire::UpstreamState::Stopped | wire::UpstreamState::Idle
            ) && self.life.shutting_down()
            {
                if let Some((_, Some(done))) = self.life.shutdown.take() {
                    let _ = done.send(());
                }
                break;
            }
        }
        if self.detached {
            // The child runs on, the next daemon's now: its record stays.
            tracing::debug!(upstream = %self.name, "upstream actor handed its child over");
            return;
        }
        super::child::remove_record(&self.life.record_path);
        tracing::debug!(upstream = %self.name, "upstream actor stopped");
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let shutdown = self.life.shutdown.as_ref().map(|(t, _)| *t);
        [
            self.inflight.next_deadline(),
            self.life.restart_at,
            shutdown,
            self.ops.next_deadline(),
            self.waiting.input.next_due(),
            self.missed_retry_at,
            self.life
                .stdout_closed_at
                .map(|t| t + lifecycle::STDOUT_CLOSED_GRACE),
            self.idle_deadline(),
            self.read_gate_deadline(),
            self.carried_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::SessionOpen { id, hello, out } => self.on_session_open(id, *hello, out),
            Event::SessionLine { id, line } => self.on_session_line(id, line),
            Event::SessionClosed { id } => self.on_session_closed(id),
            Event::SessionReply { id, line } => self.send_to_session(id, line),
            Event::Child { generation, event } => {
                if generation != self.life.generation {
                    return;
                }
                match event {
                    ChildEvent::Line(line) => self.on_child_line(line),
                    ChildEvent::LineTooLong => {
                        let msg = format!(
                            "the upstream wrote a line over {} bytes; restarting it",
                            self.life.max_line
                        );
                        tracing::error!(upstream = %self.name, "{msg}");
                        self.life.stop_reason = Some(msg);
                        self.kill_child();
                    }
                    ChildEvent::StdoutClosed => {
                        self.detach_failed();
                        self.on_stdout_closed();
                    }
                    ChildEvent::ReaderStopped => self.finish_detach(),
                    ChildEvent::Exited(status) => {
                        self.detach_failed();
                        self.on_child_exit(status);
                    }
                }
            }
            Event::Control(cmd) => self.on_control(cmd),
        }
    }

    fn on_control(&mut self, cmd: ControlCmd) {
        match cmd {
            ControlCmd::Status(reply) => {
                let _ = reply.send(self.status());
            }
            ControlCmd::Request { request, reply } => self.on_control_request(request, reply),
            ControlCmd::Restart(reply) => self.request_restart(RestartWaiter::Control(reply)),
            ControlCmd::Start(reply) => self.request_start(reply),
            ControlCmd::Freeze(idle) => self.freeze(idle),
            ControlCmd::Unfreeze => self.unfreeze(),
            ControlCmd::Detach(reply) => self.detach(reply),
            ControlCmd::Shutdown { grace, done } => self.begin_shutdown(grace, done),
        }
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        if self.read_gate_deadline().is_some_and(|t| t <= now) {
            self.open_read_gate();
        }
        for w in self.ops.expire(now) {
            let still = coogle_tool::running(&w.operation);
            self.send_to_session(w.session, response_line(&w.client_id, &raw(&still)));
        }
        while let Some(uid) = self.inflight.expire(now) {
            self.on_timeout(uid);
        }
        self.retry_due_rounds(now);
        self.check_stdout_closed(now);
        self.check_idle(now);
        self.retry_missed(now);
        self.check_carried(now);
        if self.life.restart_at.is_some_and(|t| t <= now) {
            self.on_restart_due();
        }
        if self.life.shutdown.as_ref().is_some_and(|(t, _)| *t <= now) {
            self.finish_shutdown();
        }
    }

    /// A request of the daemon's own; returns its uid. On a 2026-07-28 child, and as the
    /// `server/discover` probe, it carries the daemon's envelope (unless `params` brings its own).
    fn send_internal(&mut self, what: Internal, method: &str, params: &Value) -> u64 {
        self.send_internal_as(what, method, params, None)
    }

    /// [`Self::send_internal`] with the capabilities to declare (a tool list revalidated for
    /// the sessions that were shown it) and the cache key its answer goes under.
    fn send_internal_as(
        &mut self,
        what: Internal,
        method: &str,
        params: &Value,
        tools_key: Option<(String, Box<RawValue>)>,
    ) -> u64 {
        let uid = self.inflight.take_uid();
        let mut msg = Message::request(raw(&uid), method, raw(params));
        // The probe is a 2026-07-28 request whatever the child turns out to be; the rest carry
        // the envelope once the child is known to be of that era (unless they bring their own).
        let modern = what == Internal::Discover || self.cache.era == Some(era::Era::Modern);
        if modern && params.is_object() && params.get("_meta").is_none() {
            let revalidated: Option<Value> = tools_key
                .as_ref()
                .and_then(|(_, c)| serde_json::from_str(c.get()).ok());
            let caps = revalidated
                .as_ref()
                .unwrap_or(&self.config.client_capabilities);
            msg.set_meta_fields(era::daemon_envelope(caps));
        }
        self.to_child(msg.to_line());
        let now = Instant::now();
        let deadline = match what {
            Internal::Listen => None,
            Internal::Discover => Some(now + self.probe_timeout()),
            _ => Some(now + self.config.call_timeout),
        };
        let tools_key = match what {
            Internal::ToolsList => tools_key.or_else(|| {
                let caps = raw(&self.config.client_capabilities);
                let key = if self.cache.era == Some(era::Era::Modern) {
                    era::capabilities_key(Some(&caps))
                } else {
                    "config".to_string()
                };
                Some((key, caps))
            }),
            _ => None,
        };
        self.inflight.insert(
            uid,
            inflight::Pending {
                origin: Origin::Internal(what),
                is_call: false,
                tool: None,
                started: now,
                deadline,
                token: None,
                task: tasks::TaskRole::None,
                account: None,
                first_tools_page: false,
                tools_key,
                listen: None,
                log_level: None,
                handshake_view: false,
                retry: None,
            },
        );
        uid
    }

    fn to_child(&self, line: Vec<u8>) {
        self.open_read_gate();
        if let Some(c) = &self.life.child {
            // A child that closed its stdin is about to be reported as exited.
            let _ = c.writer.send(line);
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
        // The daemon's own words may quote a child (its last stderr line, its error).
        self.reply_error_verbatim(origin, is_call, code, &crate::redact::scrub(text));
    }

    /// [`Self::reply_error`] for a text that passes on what the child itself answered a
    /// session (a sign-in URL, which holds the OAuth client id), as it would reach it directly.
    fn reply_error_verbatim(&mut self, origin: Origin, is_call: bool, code: ErrorCode, text: &str) {
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

    /// Ask the child for the most verbose level any session wants; each session still gets
    /// only what its own level admits, so no session silences another.
    fn sync_child_log_level(&mut self) {
        let wanted = log_level::wanted(self.sessions.values().map(|s| s.log_level));
        let modern = self.cache.era == Some(era::Era::Modern);
        if modern || wanted.is_none() || wanted == self.child_log_level || !self.life.is_ready() {
            return;
        }
        self.child_log_level = wanted;
        if let Some(level) = wanted.and_then(log_level::name) {
            let params = json!({"level": level});
            self.send_internal(Internal::Housekeeping, "logging/setLevel", &params);
        }
    }

    /// After a respawn the new child knows nothing of the sessions' subscriptions.
    fn resubscribe(&mut self) {
        for uri in self.subscriptions.uris() {
            let params = json!({"uri": uri});
            self.send_internal(Internal::Housekeeping, "resources/subscribe", &params);
        }
    }
}
