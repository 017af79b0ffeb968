//! Clients of the daemon: the control client (`status`, `restart`, `stop`), starting a daemon
//! when none answers, opening an mcp-mode connection, and the rmcp client the CLI's `tools` and
//! `call` use over it (the same path Claude Code takes through the shim).
//!
//! Every connection is checked before a byte is sent (DESIGN.md, "both ends check"): the
//! socket's directory must be this user's and private, and the process listening must run as
//! this user. Whoever created a shared-/tmp path first could otherwise listen there and read
//! the hello, the initialize and every tool call's arguments.
//!
//! This module never prints; callers decide what the user sees.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::paths::{self, PathError};
use crate::peer;
use crate::wire::{self, ControlRequest, ControlResponse, Hello, HelloReply, Line, WireError};

/// How long a client waits for a daemon it started to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Replies can be large (a tool result holding a document): the cap for lines from the daemon.
pub const REPLY_LINE_CAP: usize = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket (no file, or a stale one): no daemon runs.
    #[error("no coogle daemon is running on {}", socket.display())]
    NotRunning { socket: PathBuf },
    /// Something is there but the connection failed (a full backlog, permissions).
    #[error("could not connect to the coogle daemon on {}", socket.display())]
    Unreachable {
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A socket path no Unix socket can have: said before any attempt, by every command.
    #[error(transparent)]
    SocketPath(PathError),
    #[error("could not start the coogle daemon ({})", exe.display())]
    Spawn {
        exe: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "started a coogle daemon but it did not answer on {} within {secs} s",
        socket.display()
    )]
    StartTimeout {
        socket: PathBuf,
        secs: u64,
        log: PathBuf,
    },
    /// The daemon this client started exited before it answered: `reason` is what it said
    /// (its `error:` line and causes, from its log), `hint` its fix.
    #[error("the coogle daemon could not start: {reason}")]
    DaemonExited {
        reason: String,
        hint: Option<String>,
        log: PathBuf,
    },
    #[error("the connection to the daemon failed")]
    Io(#[from] io::Error),
    #[error("the daemon closed the connection without answering")]
    Closed,
    #[error("the daemon sent something that is not a coogle answer: {0}")]
    Protocol(String),
    /// The daemon's refusal, as its message says it (the code is for scripts).
    #[error("{}", .0.message)]
    Remote(WireError),
    #[error("{0}")]
    Mcp(String),
    #[error("refusing to use the daemon socket {socket}: {problem}")]
    Untrusted { socket: PathBuf, problem: Untrusted },
    #[error(
        "the coogle daemon (pid {pid}) accepted the shutdown but has not exited after {secs} s"
    )]
    StopTimeout { pid: u32, secs: u64 },
}

impl From<WireError> for ClientError {
    fn from(e: WireError) -> Self {
        ClientError::Remote(e)
    }
}

/// Why a client refused a socket before sending it anything.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error("{0}")]
    Dir(PathError),
    #[error(
        "the process listening on it runs as {}, not as you ({})",
        peer::describe_uid(*peer),
        peer::describe_uid(*me)
    )]
    Peer { peer: u32, me: u32 },
    #[error("could not ask the kernel who listens on it: {0}")]
    PeerUnknown(io::Error),
}

impl ClientError {
    /// A hint for the user, where one helps.
    pub fn hint(&self) -> Option<String> {
        match self {
            ClientError::NotRunning { .. } => Some(
                "one starts with the first agent session (`coogle mcp`); `coogle serve` runs one in the foreground"
                    .into(),
            ),
            ClientError::SocketPath(_) => Some(SHORTER_SOCKET.into()),
            ClientError::StartTimeout { log, .. } => {
                Some(format!("read the log with `coogle logs` ({})", log.display()))
            }
            ClientError::DaemonExited { hint, log, .. } => Some(hint.clone().unwrap_or_else(
                || format!("read the log with `coogle logs` ({})", log.display()),
            )),
            ClientError::Remote(e) if e.code == wire::ErrorCode::NotFound => {
                Some("`coogle status` lists the upstreams the daemon serves".into())
            }
            ClientError::Untrusted { socket, problem } => Some(untrusted_hint(socket, problem)),
            ClientError::StopTimeout { pid, .. } => Some(format!(
                "it may still be finishing calls in flight; `coogle status` shows them, `kill {pid}` stops it now"
            )),
            _ => None,
        }
    }
}

/// The fix for a socket path too long for a Unix socket.
pub const SHORTER_SOCKET: &str = "choose a shorter socket path: `socketPath` in config.json, --socket, or COOGLE_SOCKET (a shorter XDG_RUNTIME_DIR shortens the default)";

/// What is wrong with a refused socket, who owns what, and the ways out.
fn untrusted_hint(socket: &Path, problem: &Untrusted) -> String {
    let elsewhere = "or use another socket: set XDG_RUNTIME_DIR to a private directory, or \
                     `socketPath` in config.json (or --socket / COOGLE_SOCKET)";
    let dir = socket_dir(socket);
    let dir_owner = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(dir)
            .map(|m| peer::describe_uid(m.uid()))
            .unwrap_or_else(|_| "an unknown user".into())
    };
    match problem {
        Untrusted::Dir(PathError::WrongOwner { path, owner, .. }) => format!(
            "{} belongs to {}, not to you: another user may have created it to read coogle's traffic. \
             Remove it (`sudo rm -rf {}`), {elsewhere}",
            path.display(),
            peer::describe_uid(*owner),
            path.display()
        ),
        Untrusted::Dir(PathError::Symlink { path } | PathError::NotADirectory { path }) => {
            format!(
                "remove {} (`rm {}`), {elsewhere}",
                path.display(),
                path.display()
            )
        }
        Untrusted::Dir(PathError::NotPrivate { path, .. }) => format!(
            "`chmod 700 {}` (it is yours, owned by {}), {elsewhere}",
            path.display(),
            dir_owner()
        ),
        Untrusted::Dir(PathError::OthersCanWrite { path, .. }) => format!(
            "`chmod go-w {}` if it is yours to change, {elsewhere}",
            path.display()
        ),
        Untrusted::Dir(_) | Untrusted::PeerUnknown(_) => {
            format!(
                "check {} (owned by {}), {elsewhere}",
                dir.display(),
                dir_owner()
            )
        }
        Untrusted::Peer { peer: who, .. } => format!(
            "{} is served by {} and its directory {} is owned by {}; that is not your coogle \
             daemon. Stop that process and remove the socket (`sudo rm {}`), {elsewhere}",
            socket.display(),
            peer::describe_uid(*who),
            dir.display(),
            dir_owner(),
            socket.display()
        ),
    }
}

/// The directory a socket lives in (`.` for a bare file name).
fn socket_dir(socket: &Path) -> &Path {
    match socket.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Before connecting: the socket's directory is ours and private, checked without changing
/// anything. One that does not exist yet is fine: there is nothing to connect to, and the
/// daemon creates it (and refuses it if someone else wins that race).
fn check_dir(socket: &Path) -> Result<(), ClientError> {
    match paths::verify_private_dir(socket_dir(socket)) {
        Ok(()) => Ok(()),
        Err(PathError::Inspect { error, .. }) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(untrusted(socket, Untrusted::Dir(e))),
    }
}

/// After connecting, before the first byte: the listening process runs as this user.
fn check_peer(socket: &Path, stream: &impl std::os::fd::AsRawFd) -> Result<(), ClientError> {
    let me = paths::uid();
    match peer::peer_uid(stream) {
        Ok(uid) if uid == me => Ok(()),
        Ok(uid) => Err(untrusted(socket, Untrusted::Peer { peer: uid, me })),
        Err(e) => Err(untrusted(socket, Untrusted::PeerUnknown(e))),
    }
}

fn untrusted(socket: &Path, problem: Untrusted) -> ClientError {
    ClientError::Untrusted {
        socket: socket.to_path_buf(),
        problem,
    }
}

/// How to start a daemon when none answers.
#[derive(Debug, Clone)]
pub struct Starter {
    pub exe: PathBuf,
    pub config: Option<PathBuf>,
    pub socket: PathBuf,
    pub log_file: PathBuf,
}

impl Starter {
    /// Start `coogle serve` detached from this process (its own session, output to the log),
    /// so it outlives the agent session that happened to start it. The returned [`Started`]
    /// tells whether it exited before answering, and why.
    pub fn spawn(&self) -> Result<Started, ClientError> {
        let log = crate::logging::open_private(&self.log_file);
        // Where the daemon's own words will start in the log, should it fail at once.
        let log_offset = log
            .as_ref()
            .ok()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        let (out, err) = match log.and_then(|f| Ok((f.try_clone()?, f))) {
            Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
            Err(_) => (Stdio::null(), Stdio::null()),
        };
        let mut cmd = std::process::Command::new(crate::process::live_exe(&self.exe));
        cmd.arg("serve").arg("--socket").arg(&self.socket);
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        cmd.env_remove("CLAUDE_CODE_SESSION_ID")
            .env_remove(crate::shim::HANDOFF_VAR)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe and affects only the child.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| ClientError::Spawn {
            exe: self.exe.clone(),
            source,
        })?;
        tracing::info!(pid = child.id(), "started a coogle daemon");
        Ok(Started {
            child: Some(child),
            log: self.log_file.clone(),
            log_offset,
        })
    }
}

/// A daemon this process started, watched until it answers: a daemon that cannot start (a
/// broken config.json, a socket path too long) exits at once, and the client says why then,
/// not after [`START_TIMEOUT`]. Dropped, it is left to run and reaped whenever it exits.
pub struct Started {
    child: Option<std::process::Child>,
    log: PathBuf,
    log_offset: u64,
}

impl Started {
    /// The daemon's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// `Err` once the daemon has exited in failure, with what it said. A daemon that exited
    /// 0 found another one running ("already running"): that one will answer, so keep waiting.
    pub fn check(&mut self) -> Result<(), ClientError> {
        let Some(child) = &mut self.child else {
            return Ok(());
        };
        let status = match child.try_wait() {
            Ok(Some(status)) => status,
            Ok(None) | Err(_) => return Ok(()),
        };
        self.child = None;
        if status.success() {
            return Ok(());
        }
        let said = std::fs::read(&self.log).unwrap_or_default();
        // A rotation in between starts the file again.
        let from = usize::try_from(self.log_offset)
            .ok()
            .filter(|&o| o <= said.len())
            .unwrap_or(0);
        let (reason, hint) = daemon_said(&String::from_utf8_lossy(&said[from..]));
        Err(ClientError::DaemonExited {
            reason: reason.unwrap_or_else(|| format!("it exited ({status})")),
            hint,
            log: self.log.clone(),
        })
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Reap it whenever it exits (a second daemon exits at once with "already running").
            std::thread::spawn(move || {
                let _ = child.wait();
            });
        }
    }
}

/// The error a failed `coogle serve` printed (uv's shape, see [`crate::output::error`]) among
/// the lines it wrote to the log: its `error:` line with its causes, on one line, and its hint.
fn daemon_said(text: &str) -> (Option<String>, Option<String>) {
    let mut reason: Option<String> = None;
    let mut hint = None;
    for line in text.lines() {
        if let Some(e) = line.strip_prefix("error: ") {
            reason = Some(e.to_owned());
            hint = None;
        } else if let (Some(r), Some(cause)) = (
            reason.as_mut(),
            line.trim_start().strip_prefix("Caused by: "),
        ) {
            r.push_str(": ");
            r.push_str(cause);
        } else if let (Some(_), Some(h)) = (&reason, line.strip_prefix("hint: ")) {
            hint = Some(h.to_owned());
        }
    }
    (reason, hint)
}

/// Nothing listens at the socket (yet): worth starting a daemon and waiting for it.
pub fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// The waits between connection attempts to a daemon that is starting: short at first (a
/// daemon binds in milliseconds), then up to 200 ms, for [`START_TIMEOUT`] in all.
pub struct StartWait {
    delay: Duration,
    deadline: Instant,
}

impl StartWait {
    pub fn new() -> StartWait {
        StartWait {
            delay: Duration::from_millis(5),
            deadline: Instant::now() + START_TIMEOUT,
        }
    }

    /// How long to wait before the next attempt; `None` once the time is up.
    pub fn next_delay(&mut self) -> Option<Duration> {
        if Instant::now() >= self.deadline {
            return None;
        }
        let d = self.delay;
        self.delay = (self.delay * 2).min(Duration::from_millis(200));
        Some(d)
    }
}

impl Default for StartWait {
    fn default() -> Self {
        StartWait::new()
    }
}

impl Starter {
    fn timed_out(&self) -> ClientError {
        ClientError::StartTimeout {
            socket: self.socket.clone(),
            secs: START_TIMEOUT.as_secs(),
            log: self.log_file.clone(),
        }
    }
}

fn not_running(socket: &Path, source: io::Error) -> ClientError {
    if is_absent(&source) {
        ClientError::NotRunning {
            socket: socket.to_path_buf(),
        }
    } else {
        ClientError::Unreachable {
            socket: socket.to_path_buf(),
            source,
        }
    }
}

/// Connect to a running daemon, checking the socket path, the directory and the peer first.
pub async fn connect(socket: &Path) -> Result<UnixStream, ClientError> {
    check_path(socket)?;
    check_dir(socket)?;
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| not_running(socket, source))?;
    check_peer(socket, &stream)?;
    Ok(stream)
}

/// A socket path longer than a Unix socket address holds can never be connected to: said
/// as such, not as "no daemon is answering" (nor after waiting for one to start).
fn check_path(socket: &Path) -> Result<(), ClientError> {
    paths::RuntimePaths::for_socket(socket)
        .check_length()
        .map_err(ClientError::SocketPath)
}

/// Connect, starting a daemon with `starter` when none answers, and waiting for it. The same
/// steps as the shim's [`connect_or_start_blocking`], run on a blocking thread. Also returns
/// the daemon it started, if it did.
pub async fn connect_or_start(
    socket: &Path,
    starter: &Starter,
) -> Result<(UnixStream, Option<Started>), ClientError> {
    let (path, starter) = (socket.to_path_buf(), starter.clone());
    let (stream, started) =
        tokio::task::spawn_blocking(move || connect_or_start_blocking(&path, &starter))
            .await
            .map_err(|e| ClientError::Io(io::Error::other(e)))??;
    stream.set_nonblocking(true)?;
    Ok((UnixStream::from_std(stream)?, started))
}

/// Connect, starting a daemon with `starter` when none answers, and waiting for it with
/// backoff; a daemon that exits instead of answering ends the wait at once with its reason.
/// Blocking: the shim runs no async runtime. Also returns the daemon it started, if it did.
pub fn connect_or_start_blocking(
    socket: &Path,
    starter: &Starter,
) -> Result<(std::os::unix::net::UnixStream, Option<Started>), ClientError> {
    // Refuse a squatted directory before starting a daemon that would only refuse it too.
    if let Some(s) = try_connect_blocking(socket)? {
        return Ok((s, None));
    }
    let mut started = starter.spawn()?;
    let mut wait = StartWait::new();
    loop {
        let Some(delay) = wait.next_delay() else {
            return Err(starter.timed_out());
        };
        std::thread::sleep(delay);
        if let Some(s) = try_connect_blocking(socket)? {
            return Ok((s, Some(started)));
        }
        started.check()?;
    }
}

/// One checked attempt: `None` when nothing listens (yet).
fn try_connect_blocking(
    socket: &Path,
) -> Result<Option<std::os::unix::net::UnixStream>, ClientError> {
    check_path(socket)?;
    check_dir(socket)?;
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => {
            check_peer(socket, &s)?;
            Ok(Some(s))
        }
        Err(e) if is_absent(&e) => Ok(None),
        Err(source) => Err(not_running(socket, source)),
    }
}

/// `status`, typed.
pub async fn status(socket: &Path) -> Result<wire::Status, ClientError> {
    let v = control(socket, "status", Value::Null).await?;
    serde_json::from_value(v).map_err(|e| ClientError::Protocol(e.to_string()))
}

/// `info`, typed.
pub async fn info(socket: &Path) -> Result<wire::Info, ClientError> {
    let v = control(socket, "info", Value::Null).await?;
    serde_json::from_value(v).map_err(|e| ClientError::Protocol(e.to_string()))
}

/// `reload`, typed. `None`: the daemon predates `reload` (it answered that the method is
/// unknown), so only a restart makes it read its config again.
pub async fn reload(socket: &Path) -> Result<Option<wire::Reloaded>, ClientError> {
    match control(socket, "reload", Value::Null).await {
        Ok(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| ClientError::Protocol(e.to_string())),
        Err(ClientError::Remote(e))
            if e.code == wire::ErrorCode::InvalidRequest
                && e.message.starts_with("unknown control method") =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// What a reload did, a line each for the CLI and `share`: the added servers are served now,
/// the changed and removed ones only from the daemon's next start.
pub fn reload_lines(r: &wire::Reloaded) -> Vec<String> {
    let later = "(takes effect at the daemon's next start: `coogle stop`, or restart the service; sessions reconnect by themselves)";
    let mut lines = Vec::new();
    if !r.added.is_empty() {
        lines.push(format!("added: {} (served now)", r.added.join(", ")));
    }
    if !r.changed.is_empty() {
        lines.push(format!("changed: {} {later}", r.changed.join(", ")));
    }
    if !r.removed.is_empty() {
        lines.push(format!("removed: {} {later}", r.removed.join(", ")));
    }
    if lines.is_empty() {
        lines.push("no upstream was added, changed or removed".to_string());
    }
    lines
}

/// One control request on its own connection.
pub async fn control(socket: &Path, method: &str, params: Value) -> Result<Value, ClientError> {
    let stream = connect(socket).await?;
    control_on(stream, method, params).await
}

pub async fn control_on(
    stream: UnixStream,
    method: &str,
    params: Value,
) -> Result<Value, ClientError> {
    let (r, mut w) = stream.into_split();
    let req = ControlRequest {
        id: Value::String("1".into()),
        method: method.to_string(),
        params,
    };
    w.write_all(&wire::to_line(&req)).await?;
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    match wire::read_line_capped(&mut r, &mut buf, REPLY_LINE_CAP).await? {
        Line::Complete => {}
        Line::Eof if !buf.is_empty() => {}
        Line::Eof => return Err(ClientError::Closed),
        Line::TooLong => return Err(ClientError::Protocol("answer too long".into())),
    }
    let resp: ControlResponse =
        serde_json::from_slice(&buf).map_err(|e| ClientError::Protocol(e.to_string()))?;
    Ok(resp.into_result()?)
}

/// Ask the daemon to shut down, and return its pid once its process has exited, so that
/// whatever comes next (`coogle serve`, a new binary) does not find it still holding its lock
/// while it drains calls. The socket file goes first, so it says nothing about that.
pub async fn shutdown(socket: &Path, limit: Duration) -> Result<u32, ClientError> {
    let answer = control(socket, "shutdown", Value::Null).await?;
    let pid = answer["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| {
            ClientError::Protocol(format!("shutdown answered without a pid: {answer}"))
        })?;
    let deadline = Instant::now() + limit;
    while !has_exited(pid) {
        if Instant::now() >= deadline {
            return Err(ClientError::StopTimeout {
                pid,
                secs: limit.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(pid)
}

/// Whether process `pid` has exited: gone, or a zombie its parent has not reaped yet (a daemon
/// started by a test or a supervisor that waits later).
fn has_exited(pid: u32) -> bool {
    // 0 and values past pid_t would make kill(2) address a group or fail: never ours.
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        // EPERM: it exists (under another uid, so not ours, but not gone either).
        return io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    is_zombie(pid)
}

#[cfg(target_os = "linux")]
fn is_zombie(pid: libc::pid_t) -> bool {
    // The state follows the command name, which is in parentheses and may hold anything.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            == Some('Z')
    })
}

#[cfg(target_os = "macos")]
fn is_zombie(pid: libc::pid_t) -> bool {
    /// `SZOMB` from <sys/proc.h>.
    const SZOMB: u32 = 5;
    // SAFETY: proc_bsdinfo is plain data; all-zero is valid and proc_pidinfo overwrites it.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: `info` is a live local of exactly `size` bytes.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast(),
            size,
        )
    };
    n == size && info.pbi_status == SZOMB
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn is_zombie(_pid: libc::pid_t) -> bool {
    false
}

/// An mcp-mode connection after a successful hello.
pub struct McpConnection {
    pub reader: BufReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
}

/// Say hello on a fresh connection; an `ok: false` answer is an error.
pub async fn hello(stream: UnixStream, hello: &Hello) -> Result<McpConnection, ClientError> {
    let (r, mut w) = stream.into_split();
    w.write_all(&wire::to_line(hello)).await?;
    let mut reader = BufReader::new(r);
    let mut buf = Vec::new();
    match wire::read_line_capped(&mut reader, &mut buf, 64 * 1024).await? {
        Line::Complete => {}
        _ => return Err(ClientError::Closed),
    }
    check_hello_reply(&buf)?;
    Ok(McpConnection { reader, writer: w })
}

/// Read the daemon's answer to a hello: `ok: false` is an error, and a daemon of another
/// version is worth a warning (restarting it picks up the new binary).
pub fn check_hello_reply(line: &[u8]) -> Result<HelloReply, ClientError> {
    let reply: HelloReply =
        serde_json::from_slice(line).map_err(|e| ClientError::Protocol(e.to_string()))?;
    if !reply.ok {
        return Err(ClientError::Remote(reply.error.unwrap_or_else(|| {
            WireError::new(wire::ErrorCode::Internal, "hello refused without a reason")
        })));
    }
    if let Some(v) = &reply.version
        && v != wire::VERSION
    {
        tracing::warn!(daemon = %v, client = wire::VERSION, "the daemon runs another coogle version; restart it with `coogle stop` when convenient");
    }
    Ok(reply)
}

/// An rmcp client session through the daemon, as `coogle tools` and `coogle call` use it,
/// and the daemon it started to get one, if it did.
pub async fn rmcp_session(
    socket: &Path,
    starter: Option<&Starter>,
    server: Option<String>,
    client_name: &str,
) -> Result<(RunningService<RoleClient, ClientConfig>, Option<Started>), ClientError> {
    let (stream, started) = match starter {
        Some(s) => connect_or_start(socket, s).await?,
        None => (connect(socket).await?, None),
    };
    let mut h = Hello::mcp(server);
    h.client = Some(client_name.to_string());
    let conn = hello(stream, &h).await?;
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(client_name, wire::VERSION),
    );
    let session = info
        .serve((conn.reader, conn.writer))
        .await
        .map_err(|e| ClientError::Mcp(e.to_string()))?;
    Ok((session, started))
}

/// An rmcp error as the person reads it: a server's JSON-RPC error by its own message (rmcp
/// says `Mcp error: -32602: …`), anything else as rmcp words it.
pub fn mcp_error(e: rmcp::ServiceError) -> ClientError {
    match e {
        rmcp::ServiceError::McpError(d) => ClientError::Mcp(format!(
            "the server answered with an error: {} (JSON-RPC {})",
            d.message, d.code.0
        )),
        other => ClientError::Mcp(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exited_processes_and_zombies_count_as_exited() {
        assert!(!has_exited(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not reaped yet: a zombie, which has exited all the same.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !has_exited(pid) {
            assert!(Instant::now() < deadline, "{pid} never counted as exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.wait().unwrap();
        assert!(has_exited(pid));
        assert!(has_exited(0));
        assert!(has_exited(u32::MAX));
    }
}
