//! `coogle serve`: the daemon that owns the upstream children and multiplexes every session
//! onto them over a per-user Unix socket.
//!
//! [`run`] is the whole daemon, called by `coogle serve`; it owns its process (the signal
//! handlers, the child subreaper), so the tests run the binary, never the daemon in-process. It
//! owns the socket, the single-instance lock and the accept loop; each upstream's routing lives
//! in [`upstream`]. It must never unlink a socket that a live daemon serves, never accept a
//! peer of another uid, and never leave a child running when it stops.

mod child;
mod connection;
mod control;
mod coogle_tool;
mod handover;
mod operations;
mod outbox;
mod reaper;
mod registry;
mod scheduler;
mod session_socket;
mod socket_watch;
mod stats;
mod upstream;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::paths::{self, RuntimePaths};
use crate::wire;

/// A session's number, unique for the daemon's life.
pub(crate) type SessionId = u64;

/// Open connections at the most: what `maxConnections` says, else what the file limit leaves
/// room for (each child takes a few descriptors, and the log, lock and listener some), up to
/// 4096. The soft file limit is raised to the hard one first, as far as that goes.
fn connection_limit(configured: Option<usize>, upstreams: usize) -> usize {
    if let Some(n) = configured {
        return n;
    }
    // Raised to the hard limit first, as far as 10240 (macOS reports an infinite hard limit it
    // does not honour).
    let files = crate::os::raise_open_files(10_240)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(1024);
    (files.saturating_sub(64 + 8 * upstreams) / FDS_PER_CONNECTION).clamp(16, 4096)
}

/// Descriptors one connection may hold at once: its socket, and a second one registered for
/// writing while its buffer is full (see `session_socket`).
const FDS_PER_CONNECTION: usize = 2;

/// How often the daemon looks at the process table for what lives below its children.
const REAPER_SCAN: Duration = Duration::from_secs(3);

/// How long a new connection may take to send its first line.
const FIRST_LINE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Options {
    /// The socket to serve (already resolved from flags, config and defaults).
    pub socket: PathBuf,
    /// Where the log goes, for `info`.
    pub log_file: Option<PathBuf>,
}

#[derive(Debug)]
pub enum Outcome {
    /// Served until asked to stop.
    Stopped,
    /// Another daemon holds the lock for this socket; nothing was touched.
    AlreadyRunning,
    /// A newer coogle proved it can serve: exec it (see `handover`), its children stopped and
    /// the socket and lock still held.
    Replace(Replacement),
}

pub(crate) use handover::{Inherited, Replacement, standby};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Path(#[from] paths::PathError),
    #[error("could not open the lock file {path}")]
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
    #[error("could not remove the stale socket {path}")]
    RemoveStale {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not listen on {path}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("could not write down the children to carry over")]
    Carry(#[source] std::io::Error),
    #[error("could not take over from the daemon this one replaced")]
    Inherit(#[from] handover::InheritError),
    #[error("could not keep the socket for the newer coogle: {0}")]
    KeepListener(std::io::Error),
}

struct Shared {
    /// Connections open now, against `max_connections`.
    connections: AtomicUsize,
    max_connections: usize,
    config: Config,
    options: Options,
    upstreams: registry::Registry,
    started: Instant,
    /// When this binary started serving (an upgrade in place starts it again, same pid).
    started_at: std::time::SystemTime,
    next_session: AtomicU64,
    stop: watch::Sender<bool>,
    /// A newer coogle is installed: hand over to it once no call is queued or in flight.
    handover: Arc<handover::Handover>,
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
    match crate::os::try_lock(&file) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(source) => {
            return Err(DaemonError::Lock {
                path: rt.lock.clone(),
                source,
            });
        }
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

/// Run the daemon until `shutdown` (control method or signal), or until it hands over to a
/// newer coogle; on the listener and lock `inherited` from the daemon this one replaced, when
/// there is one.
pub async fn run(
    config: Config,
    options: Options,
    inherited: Option<Inherited>,
) -> Result<Outcome, DaemonError> {
    let rt = RuntimePaths::for_socket(&options.socket);
    rt.check_length()?;
    paths::ensure_private_dir(&rt.dir)?;
    for (path, why) in paths::check_parents(&rt.dir)? {
        tracing::warn!(
            "{} (above the socket directory) {why}: its group's members could replace the socket directory and cut every client off",
            path.display()
        );
    }
    let (lock, listener, refused, exec_failed, adopted) = match inherited {
        None => {
            let Some(lock) = take_lock(&rt)? else {
                return Ok(Outcome::AlreadyRunning);
            };
            reap_recorded(&rt, &[]);
            (lock, bind(&rt.socket)?, None, None, Vec::new())
        }
        Some(mut inherited) => {
            let adopted = inherited.carried();
            let exec_failed = inherited.exec_failed.take();
            let kept: Vec<u32> = adopted.iter().map(|a| a.pipes.pid).collect();
            let (listener, lock, refused) = inherited.adopt(&rt)?;
            reap_recorded(&rt, &kept);
            tracing::info!(socket = %rt.socket.display(), children = kept.len(), "took over the socket, the lock and the running children from the daemon this one replaced");
            let listener =
                UnixListener::from_std(listener).map_err(|source| DaemonError::Bind {
                    path: rt.socket.clone(),
                    source,
                })?;
            (lock, listener, refused, exec_failed, adopted)
        }
    };
    crate::redact::add_known(secret_values(&config));
    let reaper = reaper::Reaper::new();
    // The carried children are this process's own from its first moment: registered before
    // any actor runs, so no child's exit in between takes one for an orphan (each actor
    // registers its own again as it adopts it).
    for a in &adopted {
        reaper.spawning().started(&a.instance.server, a.pipes.pid);
    }
    let upstreams = registry::Registry::new(&config, &rt, &reaper, adopted);
    let (stop, stop_rx) = watch::channel(false);
    let max_connections = connection_limit(config.max_connections, config.servers.len());
    let shared = Arc::new(Shared {
        connections: AtomicUsize::new(0),
        max_connections,
        config,
        options,
        upstreams,
        started: Instant::now(),
        started_at: std::time::SystemTime::now(),
        next_session: AtomicU64::new(1),
        stop,
        handover: Arc::new(handover::Handover::new(
            &rt.socket,
            refused,
            exec_failed,
            reaper.clone(),
        )),
    });
    tracing::info!(socket = %rt.socket.display(), pid = std::process::id(), version = wire::VERSION, "coogle daemon listening");
    let our_socket = socket_watch::socket_identity(&rt.socket);
    let end = serve(&shared, &listener, &rt.socket, our_socket, stop_rx, &reaper).await?;

    // Stop accepting first, so no new session lands on a daemon that is going away. Handing
    // over, the socket stays open and unaccepted: what connects meanwhile waits in its backlog
    // for the new daemon.
    let kept = match end {
        End::Stop => {
            drop(listener);
            if socket_watch::socket_identity(&rt.socket) == our_socket {
                let _ = std::fs::remove_file(&rt.socket);
            }
            None
        }
        End::HandOver(verified, carried) => Some((verified, carried, listener)),
    };
    // What is not carried over stops here (all of it, unless the new version takes the running
    // children over).
    let grace = Duration::from_millis(shared.config.shutdown_grace_ms);
    let all = shared.upstreams.all();
    futures_join_all(all.iter().map(|u| u.shutdown(grace))).await;
    let carried_pids: Vec<u32> = kept
        .as_ref()
        .map(|(_, c, _)| c.iter().map(|d| d.pipes.pid).collect())
        .unwrap_or_default();
    let sweep = reaper.clone();
    let keep = carried_pids.clone();
    let _ = tokio::task::spawn_blocking(move || sweep.sweep_all_but(&keep)).await;
    let Some((verified, carried, listener)) = kept else {
        tracing::info!("coogle daemon stopped");
        drop(lock);
        return Ok(Outcome::Stopped);
    };
    let listener = listener.into_std().map_err(DaemonError::KeepListener)?;
    let carry = if verified.carries {
        Some(handover::carry(&rt.dir, carried).map_err(DaemonError::Carry)?)
    } else {
        None
    };
    tracing::info!(exe = %verified.exe.display(), children = carried_pids.len(), "handing over to coogle {}: the socket, the lock and the running children kept", verified.version);
    Ok(Outcome::Replace(Replacement {
        exe: verified.exe,
        socket: rt.socket.clone(),
        version: verified.version,
        id: verified.id,
        listener: listener.into(),
        lock,
        carry,
    }))
}

/// Kill what a daemon that was SIGKILLed left running (recorded by pid and start time).
fn reap_recorded(rt: &RuntimePaths, keep: &[u32]) {
    let reaped = child::reap_recorded(&recorded_children(rt), keep);
    if !reaped.is_empty() {
        tracing::warn!(
            count = reaped.len(),
            "killed upstream processes left by a previous daemon"
        );
    }
}

/// Why the accept loop ended.
enum End {
    /// Asked to stop, a signal, or the socket lost.
    Stop,
    /// A newer coogle proved it can serve, and nothing is queued or in flight; the running
    /// children it takes over, let go of.
    HandOver(handover::Verified, Vec<upstream::Detached>),
}

/// What the daemon must never write out or answer: every configured `env` value and resolved
/// credential of every upstream, whatever its name, and the credentials in its own environment
/// (the Gemini key, Google OAuth variables, anything named like a secret).
pub(crate) fn secret_values(config: &Config) -> Vec<String> {
    let mut out: Vec<String> = config
        .servers
        .values()
        .flat_map(|s| s.child_env().unwrap_or_default())
        .map(|(_, v)| v)
        .collect();
    out.extend(
        std::env::vars()
            .filter(|(k, _)| crate::redact::is_secret_name(k) || k.starts_with("GOOGLE_OAUTH_"))
            .map(|(_, v)| v),
    );
    out
}

/// With the lock held: clear a stale socket, listen, and make the socket private.
fn bind(socket: &Path) -> Result<UnixListener, DaemonError> {
    clear_stale_socket(socket)?;
    let bind_error = |source| DaemonError::Bind {
        path: socket.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(socket).map_err(bind_error)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    Ok(listener)
}

/// Accept connections until asked to stop, a signal, a newer coogle taking over once idle, or
/// the socket being lost.
async fn serve(
    shared: &Arc<Shared>,
    listener: &UnixListener,
    socket: &Path,
    our_socket: Option<socket_watch::Identity>,
    mut stop_rx: watch::Receiver<bool>,
    reaper: &Arc<reaper::Reaper>,
) -> Result<End, DaemonError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate()).map_err(DaemonError::Signals)?;
    let mut sigint = signal(SignalKind::interrupt()).map_err(DaemonError::Signals)?;
    // A process of the daemon's own ended: with no child alive (no scan every few seconds), a
    // scan reaps it and stops what was reparented with it (see `reaper`).
    let mut sigchld = signal(SignalKind::child()).map_err(DaemonError::Signals)?;
    let mut idle_check = tokio::time::interval(Duration::from_millis(250));
    // A daemon whose socket was removed or replaced, or whose path leads elsewhere now (a
    // directory above renamed, a symlink on the way re-pointed, a mount over it), can never be
    // reached again: stop it rather than leave it (and its child) running forever. The path is
    // watched, so that is seen at once and a quiet daemon wakes to look only once a minute
    // (issue 22); where the OS cannot tell, it looks every 2 s.
    let mut socket_watch = socket_watch::SocketWatch::new(socket, our_socket);
    // Who lives below each child, seen now and then (see `reaper`), and only while one lives:
    // a child started while the loop waits wakes it (`woken`), and the ticks missed while none
    // lived are not made up in a burst.
    let mut scan = tokio::time::interval(REAPER_SCAN);
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = scan.tick(), if reaper.watching() => {
                let reaper = reaper.clone();
                tokio::task::spawn_blocking(move || reaper.scan());
            }
            () = reaper.woken() => {}
            () = socket_watch.lost() => return Ok(End::Stop),
            _ = sigchld.recv() => {
                if !reaper.watching() {
                    let reaper = reaper.clone();
                    tokio::task::spawn_blocking(move || reaper.scan());
                }
            }
            _ = idle_check.tick(), if shared.handover.pending() => {
                if all_idle(shared).await
                    && let Some(verified) = shared.handover.take_verified()
                {
                    if !verified.carries {
                        return Ok(End::HandOver(verified, Vec::new()));
                    }
                    match carry_children(shared).await {
                        Some(carried) => return Ok(End::HandOver(verified, carried)),
                        None => shared.handover.put_back(verified),
                    }
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let shared = shared.clone();
                    tokio::spawn(async move { connection::accepted(shared, stream).await });
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop_rx.changed() => return Ok(End::Stop),
            _ = sigterm.recv() => { tracing::info!("SIGTERM: shutting down"); return Ok(End::Stop) }
            _ = sigint.recv() => { tracing::info!("SIGINT: shutting down"); return Ok(End::Stop) }
        }
    }
}

/// How long one upstream has to let go of its child once asked.
const DETACH_WAIT: Duration = Duration::from_secs(5);

/// How long a hand-over in place waits for the calls in flight to finish before it gives up
/// (for now: it tries again at the next quiet moment).
const CARRY_DRAIN: Duration = Duration::from_secs(10);

/// Let go of every running child for an upgrade in place: every upstream is frozen (nothing
/// new reaches a child), and once none has anything in flight each lets go of its child.
/// `None` when some upstream was not quiet in time: all serve on, as before.
async fn carry_children(shared: &Shared) -> Option<Vec<upstream::Detached>> {
    let all = shared.upstreams.all();
    let mut idle = Vec::new();
    for u in &all {
        idle.push(u.freeze_start().await);
    }
    let quiet = tokio::time::timeout(CARRY_DRAIN, async {
        for rx in idle.into_iter().flatten() {
            let _ = rx.await;
        }
    })
    .await
    .is_ok();
    if !quiet {
        tracing::info!(
            "an upgrade in place waits: calls were still running after {} s",
            CARRY_DRAIN.as_secs()
        );
        for u in &all {
            u.unfreeze().await;
        }
        return None;
    }
    let mut carried = Vec::new();
    for u in &all {
        // Bounded: an actor that cannot let go in time keeps its child, which then stops
        // with this daemon like any child not carried.
        if let Ok(Some(d)) = tokio::time::timeout(DETACH_WAIT, u.detach()).await {
            carried.push(d);
        }
    }
    Some(carried)
}

/// No request waiting or in flight on any upstream (subscription streams aside).
async fn all_idle(shared: &Shared) -> bool {
    for u in shared.upstreams.all() {
        let s = u.status().await;
        if s.waiting > 0 || s.requests_in_flight > 0 {
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
