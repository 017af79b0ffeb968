//! `coogle serve`: the daemon that owns the upstream children and multiplexes every session
//! onto them over a per-user Unix socket.
//!
//! [`run`] is the whole daemon as a library function, so tests start it in-process on a
//! temporary socket (with `handle_signals: false`). It owns the socket, the single-instance lock
//! and the accept loop; each upstream's routing lives in [`upstream`]. It must never unlink a
//! socket that a live daemon serves, never accept a peer of another uid, and never leave a
//! child running when it stops.

pub mod child;
pub mod coogle_tool;
pub mod outbox;
pub mod scheduler;
pub mod stats;
pub mod upstream;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use crate::config::Config;
use crate::paths::{self, RuntimePaths};
use crate::wire::{
    self, ControlMethod, ControlRequest, ControlResponse, ErrorCode, FirstLine, Hello, HelloReply,
    Line, WireError,
};
use upstream::{Event, UpstreamHandle};

/// How often the daemon checks that its socket is still there and still its own.
const SOCKET_CHECK: Duration = Duration::from_secs(2);

/// How long a new connection may take to send its first line.
const FIRST_LINE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Options {
    /// The socket to serve (already resolved from flags, config and defaults).
    pub socket: PathBuf,
    /// Install SIGTERM/SIGINT handlers (off in tests that run the daemon in-process).
    pub handle_signals: bool,
    /// Where the log goes, for `info`.
    pub log_file: Option<PathBuf>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Served until asked to stop.
    Stopped,
    /// Another daemon holds the lock for this socket; nothing was touched.
    AlreadyRunning,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Path(#[from] paths::PathError),
    #[error("could not open the lock file {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is answering connections but no coogle daemon holds its lock; stop whatever serves it or choose another socketPath"
    )]
    SocketInUse { path: PathBuf },
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("could not remove the stale socket {path}: {source}")]
    RemoveStale {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not install signal handlers: {0}")]
    Signals(std::io::Error),
}

struct Shared {
    config: Config,
    options: Options,
    upstreams: IndexMap<String, UpstreamHandle>,
    started: Instant,
    next_session: AtomicU64,
    stop: watch::Sender<bool>,
    /// A newer coogle said hello: hand over to it once no call is queued or in flight.
    replace_when_idle: std::sync::atomic::AtomicBool,
}

/// Take the single-instance lock for `rt`; `None` when another daemon holds it.
fn take_lock(rt: &RuntimePaths) -> Result<Option<File>, DaemonError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&rt.lock)
        .map_err(|source| DaemonError::Lock {
            path: rt.lock.clone(),
            source,
        })?;
    // SAFETY: flock on a file descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        return Err(DaemonError::Lock {
            path: rt.lock.clone(),
            source: err,
        });
    }
    let _ = file.set_len(0);
    let _ = writeln!(file, "{}", std::process::id());
    Ok(Some(file))
}

/// With the lock held, clear a socket file left by a daemon that died.
fn clear_stale_socket(path: &Path) -> Result<(), DaemonError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if !meta.file_type().is_socket() {
        return Err(DaemonError::NotASocket {
            path: path.to_path_buf(),
        });
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(DaemonError::SocketInUse {
            path: path.to_path_buf(),
        });
    }
    tracing::info!(socket = %path.display(), "removing a stale socket");
    std::fs::remove_file(path).map_err(|source| DaemonError::RemoveStale {
        path: path.to_path_buf(),
        source,
    })
}

fn recorded_children(rt: &RuntimePaths) -> Vec<PathBuf> {
    let prefix = format!(
        "{}.",
        rt.socket
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    std::fs::read_dir(&rt.dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".child"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Run the daemon until `shutdown` (control method or signal).
pub async fn run(config: Config, options: Options) -> Result<Outcome, DaemonError> {
    let rt = RuntimePaths::for_socket(&options.socket);
    rt.check_length()?;
    paths::ensure_private_dir(&rt.dir)?;
    let Some(lock) = take_lock(&rt)? else {
        return Ok(Outcome::AlreadyRunning);
    };
    let reaped = child::reap_recorded(&recorded_children(&rt));
    if !reaped.is_empty() {
        tracing::warn!(
            count = reaped.len(),
            "killed upstream processes left by a previous daemon"
        );
    }
    clear_stale_socket(&rt.socket)?;
    let listener = UnixListener::bind(&rt.socket).map_err(|source| DaemonError::Bind {
        path: rt.socket.clone(),
        source,
    })?;
    std::fs::set_permissions(&rt.socket, std::fs::Permissions::from_mode(0o600)).map_err(
        |source| DaemonError::Bind {
            path: rt.socket.clone(),
            source,
        },
    )?;

    let mut upstreams = IndexMap::new();
    for (name, server) in &config.servers {
        let handle = upstream::start(
            server.clone(),
            rt.child_record(name),
            config.max_line_bytes.saturating_mul(4),
            config.coogle_tool,
        );
        upstreams.insert(name.clone(), handle);
    }
    let (stop, mut stop_rx) = watch::channel(false);
    let shared = Arc::new(Shared {
        config,
        options,
        upstreams,
        started: Instant::now(),
        next_session: AtomicU64::new(1),
        stop,
        replace_when_idle: std::sync::atomic::AtomicBool::new(false),
    });
    tracing::info!(socket = %rt.socket.display(), pid = std::process::id(), version = wire::VERSION, "coogle daemon listening");

    let (mut sigterm, mut sigint) = if shared.options.handle_signals {
        use tokio::signal::unix::{SignalKind, signal};
        (
            Some(signal(SignalKind::terminate()).map_err(DaemonError::Signals)?),
            Some(signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?),
        )
    } else {
        (None, None)
    };

    let mut idle_check = tokio::time::interval(Duration::from_millis(250));
    // A daemon whose socket was removed or replaced can never be reached again: stop it rather
    // than leave it (and its child) running forever.
    let our_socket = socket_identity(&rt.socket);
    let mut socket_check = tokio::time::interval(SOCKET_CHECK);
    socket_check.tick().await;
    loop {
        tokio::select! {
            _ = socket_check.tick() => {
                if socket_lost(our_socket, socket_identity(&rt.socket)) {
                    tracing::warn!(socket = %rt.socket.display(), "the socket was removed or replaced; shutting down");
                    break;
                }
            }
            _ = idle_check.tick(), if shared.replace_when_idle.load(Ordering::Relaxed) => {
                if all_idle(&shared).await {
                    tracing::info!("handing over to the newer coogle: stopping while idle");
                    break;
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    tokio::spawn(async move { handle_connection(shared, stream).await });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop_rx.changed() => break,
            _ = recv_signal(&mut sigterm) => { tracing::info!("SIGTERM: shutting down"); break }
            _ = recv_signal(&mut sigint) => { tracing::info!("SIGINT: shutting down"); break }
        }
    }

    // Stop accepting first, so no new session lands on a daemon that is going away.
    drop(listener);
    if socket_identity(&rt.socket) == our_socket {
        let _ = std::fs::remove_file(&rt.socket);
    }
    let grace = Duration::from_millis(shared.config.shutdown_grace_ms);
    let stops = shared.upstreams.values().map(|u| u.shutdown(grace));
    futures_join_all(stops).await;
    tracing::info!("coogle daemon stopped");
    drop(lock);
    Ok(Outcome::Stopped)
}

/// True when the socket file is gone or is not ours any more. Ours being unknown (`None`: the
/// file vanished between bind and the first look, its directory deleted under a starting
/// daemon) counts as gone, or such a daemon would run unreachable forever.
fn socket_lost(ours: Option<(u64, u64)>, now: Option<(u64, u64)>) -> bool {
    now.is_none() || now != ours
}

/// The (device, inode) of the socket file, to tell ours from a replacement.
fn socket_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// No call queued or in flight on any upstream.
async fn all_idle(shared: &Shared) -> bool {
    for u in shared.upstreams.values() {
        let s = u.status().await;
        if s["queue"].as_u64().unwrap_or(0) > 0 || s["inFlight"].as_u64().unwrap_or(0) > 0 {
            return false;
        }
    }
    true
}

async fn futures_join_all<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
    let mut set = Vec::new();
    for f in futs {
        set.push(f);
    }
    for f in set {
        f.await;
    }
}

async fn recv_signal(sig: &mut Option<tokio::signal::unix::Signal>) {
    match sig {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

async fn handle_connection(shared: Arc<Shared>, stream: UnixStream) {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == paths::uid() => {}
        Ok(cred) => {
            tracing::warn!(
                peer_uid = cred.uid(),
                "refused a connection from another user"
            );
            return;
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer could not be identified: {e}");
            return;
        }
    }
    let cap = shared.config.max_line_bytes;
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    let first = tokio::time::timeout(
        FIRST_LINE_TIMEOUT,
        wire::read_line_capped(&mut r, &mut buf, cap),
    )
    .await;
    match first {
        Ok(Ok(Line::Complete)) => {}
        Ok(Ok(Line::Eof)) if !wire::is_blank(&buf) => {}
        Ok(Ok(Line::TooLong)) => {
            let e = too_long(cap);
            let _ = w
                .write_all(&wire::to_line(&ControlResponse::err(Value::Null, e)))
                .await;
            return;
        }
        _ => return,
    }
    match wire::parse_first_line(&buf) {
        Ok(FirstLine::Hello(hello)) => mcp_session(shared, hello, r, w).await,
        Ok(FirstLine::Control(req)) => control_connection(shared, Ok(req), r, w).await,
        Err(e) => control_connection(shared, Err(e), r, w).await,
    }
}

fn too_long(cap: usize) -> WireError {
    WireError::new(
        ErrorCode::InvalidRequest,
        format!("line exceeds the {cap}-byte limit; closing the connection"),
    )
}

async fn control_connection(
    shared: Arc<Shared>,
    first: Result<ControlRequest, WireError>,
    mut r: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut w: tokio::net::unix::OwnedWriteHalf,
) {
    let cap = shared.config.max_line_bytes;
    let mut next = Some(first);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let req = match next.take() {
            Some(req) => req,
            None => match wire::read_line_capped(&mut r, &mut buf, cap).await {
                Ok(Line::Complete) if wire::is_blank(&buf) => continue,
                Ok(Line::Complete) => wire::parse_control(&buf),
                Ok(Line::Eof) if !wire::is_blank(&buf) => wire::parse_control(&buf),
                Ok(Line::TooLong) => {
                    let resp = ControlResponse::err(Value::Null, too_long(cap));
                    let _ = w.write_all(&wire::to_line(&resp)).await;
                    return;
                }
                Ok(Line::Eof) | Err(_) => return,
            },
        };
        let resp = match req {
            Ok(req) => {
                let id = req.id.clone();
                match control(&shared, req).await {
                    Ok(result) => ControlResponse::ok(id, result),
                    Err(e) => ControlResponse::err(id, e),
                }
            }
            Err(e) => ControlResponse::err(Value::Null, e),
        };
        if w.write_all(&wire::to_line(&resp)).await.is_err() {
            return;
        }
    }
}

fn upstream<'a>(shared: &'a Shared, params: &Value) -> Result<&'a UpstreamHandle, WireError> {
    let name = params.get("server").and_then(|s| s.as_str());
    let server = shared
        .config
        .server(name)
        .map_err(|e| WireError::new(ErrorCode::NotFound, e.to_string()))?;
    shared.upstreams.get(&server.name).ok_or_else(|| {
        WireError::new(
            ErrorCode::NotFound,
            format!("no upstream named {:?}", server.name),
        )
    })
}

fn info(shared: &Shared) -> Value {
    json!({
        "pid": std::process::id(),
        "version": wire::VERSION,
        "uptimeMs": shared.started.elapsed().as_millis() as u64,
        "socket": shared.options.socket,
        "configFile": shared.config.file,
        "logFile": shared.options.log_file,
        "upstreams": shared.upstreams.keys().collect::<Vec<_>>(),
        "replacePending": shared.replace_when_idle.load(Ordering::Relaxed),
    })
}

async fn control(shared: &Shared, req: ControlRequest) -> Result<Value, WireError> {
    let Some(method) = ControlMethod::parse(&req.method) else {
        let known: Vec<&str> = ControlMethod::ALL.iter().map(|m| m.as_str()).collect();
        return Err(WireError::new(
            ErrorCode::InvalidRequest,
            format!(
                "unknown control method {:?}; the methods are {} (tool calls go through \"call\")",
                req.method,
                known.join(", ")
            ),
        ));
    };
    let params = &req.params;
    match method {
        ControlMethod::Ping => Ok(json!({"pong": true, "version": wire::VERSION})),
        ControlMethod::Info => Ok(info(shared)),
        ControlMethod::Status => {
            let mut ups = Vec::new();
            for u in shared.upstreams.values() {
                ups.push(u.status().await);
            }
            Ok(json!({"daemon": info(shared), "upstreams": ups}))
        }
        ControlMethod::ListTools => {
            let u = upstream(shared, params)?;
            let mut tools = Vec::new();
            let mut cursor: Option<String> = None;
            // Follow pagination, bounded so a server that loops cannot hold us forever.
            for _ in 0..100 {
                let p = match &cursor {
                    Some(c) => json!({"cursor": c}),
                    None => json!({}),
                };
                let page: Value = serde_json::from_str(u.request("tools/list", p).await?.get())
                    .map_err(|e| WireError::new(ErrorCode::UpstreamError, e.to_string()))?;
                if let Some(t) = page.get("tools").and_then(|t| t.as_array()) {
                    tools.extend(t.iter().cloned());
                }
                cursor = page
                    .get("nextCursor")
                    .and_then(|c| c.as_str())
                    .map(String::from);
                if cursor.is_none() {
                    break;
                }
            }
            Ok(json!({"server": u.name, "tools": tools}))
        }
        ControlMethod::Call => {
            let u = upstream(shared, params)?;
            let tool = params.get("tool").and_then(|t| t.as_str()).ok_or_else(|| {
                WireError::new(
                    ErrorCode::InvalidRequest,
                    "call needs params.tool (the tool's name) and optional params.arguments (an object)",
                )
            })?;
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(a @ Value::Object(_)) => a.clone(),
                Some(_) => {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        "params.arguments must be a JSON object",
                    ));
                }
            };
            let result = u
                .request("tools/call", json!({"name": tool, "arguments": arguments}))
                .await?;
            serde_json::from_str(result.get())
                .map_err(|e| WireError::new(ErrorCode::UpstreamError, e.to_string()))
        }
        ControlMethod::RestartChild => upstream(shared, params)?.restart().await,
        ControlMethod::Shutdown => {
            let _ = shared.stop.send(true);
            Ok(json!({"stopping": true, "pid": std::process::id()}))
        }
    }
}

async fn mcp_session(
    shared: Arc<Shared>,
    hello: Hello,
    mut r: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut w: tokio::net::unix::OwnedWriteHalf,
) {
    let handle = match upstream(&shared, &json!({"server": hello.server})) {
        Ok(h) => h.clone(),
        Err(e) => {
            let _ = w.write_all(&wire::to_line(&HelloReply::err(e))).await;
            return;
        }
    };
    if w.write_all(&wire::to_line(&HelloReply::ok(&handle.name)))
        .await
        .is_err()
    {
        return;
    }
    if wire::version_newer(&hello.version, wire::VERSION)
        && !shared.replace_when_idle.swap(true, Ordering::Relaxed)
    {
        tracing::info!(
            client_version = %hello.version,
            "a newer coogle connected; this daemon ({}) will stop once idle so the new version serves",
            wire::VERSION
        );
    } else if hello.version != wire::VERSION {
        tracing::info!(client_version = %hello.version, "a client of another version connected");
    }
    let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
    // The writer task ends when the actor drops the session (and its queue is written) or the
    // peer goes away; dropping the write half then shuts it down, so the client sees EOF.
    let (out, mut writer) = outbox::Outbox::new(w);
    if !handle.send(Event::SessionOpen { id, hello, out }).await {
        return;
    }
    let cap = shared.config.max_line_bytes;
    let reader = async {
        let mut buf = Vec::new();
        loop {
            match wire::read_line_capped(&mut r, &mut buf, cap).await {
                Ok(Line::Complete) => {
                    if wire::is_blank(&buf) {
                        buf.clear();
                        continue;
                    }
                    let line = std::mem::take(&mut buf);
                    if !handle.send(Event::SessionLine { id, line }).await {
                        return;
                    }
                }
                Ok(Line::TooLong) => {
                    tracing::warn!(
                        session = id,
                        "a session sent a line over {cap} bytes; closing it"
                    );
                    let line = wire::error_line(
                        None,
                        wire::rpc_code::INVALID_REQUEST,
                        &format!("line exceeds the {cap}-byte limit; closing the connection"),
                    );
                    let _ = handle.send(Event::SessionReply { id, line }).await;
                    return;
                }
                Ok(Line::Eof) | Err(_) => return,
            }
        }
    };
    // A finished JoinHandle must not be polled again (tokio panics): wait for the writer
    // afterwards only when the reader ended first.
    let writer_done = tokio::select! {
        _ = reader => false,
        _ = &mut writer => true,
    };
    handle.send(Event::SessionClosed { id }).await;
    if !writer_done {
        let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a daemon whose socket directory was deleted right after it bound (a test
    /// ending just as a shim started it) compared `None` with `None` and never stopped.
    #[test]
    fn a_socket_never_seen_counts_as_lost() {
        assert!(socket_lost(None, None));
        assert!(socket_lost(Some((1, 2)), None));
        assert!(socket_lost(Some((1, 2)), Some((1, 3))));
        assert!(!socket_lost(Some((1, 2)), Some((1, 2))));
    }
}
