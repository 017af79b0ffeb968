//! The daemon as `uninstall` sees it: who is using it (the agent sessions `status` lists), and
//! stopping it last, waiting until its process has exited and checking that no session's shim
//! started another one meanwhile. Asking is bounded; nothing here starts a daemon.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::client::{self, ClientError};
use crate::config::GlobalPaths;
use crate::wire::{SessionStatus, Status};

/// How long the daemon may take to finish its calls and exit.
const STOP_LIMIT: Duration = Duration::from_secs(20);
/// How long an ended session's shim may take to exit.
const SHIM_LIMIT: Duration = Duration::from_secs(5);

/// An agent session connected to the daemon.
#[derive(Debug, Clone)]
pub(super) struct Session {
    pub upstream: String,
    pub status: SessionStatus,
}

impl Session {
    /// `claude-code 2.1.328 (pid 4242, Claude Code session 5f1c…) on upstream google`.
    pub fn describe(&self) -> String {
        let s = &self.status;
        let client = match (&s.client_info, s.client_name(), s.client_version()) {
            (None, ..) => "a client that has not said who it is".to_owned(),
            (Some(_), name, Some(v)) => format!("{} {v}", name.unwrap_or("a client")),
            (Some(_), name, None) => name.unwrap_or("a client").to_owned(),
        };
        let mut about = Vec::new();
        if let Some(pid) = s.pid {
            about.push(format!("pid {pid}"));
        }
        let about = if about.is_empty() {
            String::new()
        } else {
            format!(" ({})", about.join(", "))
        };
        format!("{client}{about} on upstream {}", self.upstream)
    }
}

/// The daemon on this invocation's socket, when one answers.
#[derive(Debug, Clone)]
pub(super) struct Running {
    pub socket: PathBuf,
    pub pid: u32,
    /// Agent sessions (shims), each once; the CLI's own connections are not counted.
    pub sessions: Vec<Session>,
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
}

/// Ask the daemon on `socket` for its status (bounded).
fn status(socket: &Path) -> Option<Status> {
    runtime()?.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), client::status(socket))
            .await
            .ok()?
            .ok()
    })
}

/// The daemon on this invocation's socket and its agent sessions; `None` when none answers.
pub(super) fn running(paths: &GlobalPaths) -> Option<Running> {
    let socket = paths.socket_loading_config();
    let status = status(&socket)?;
    let mut sessions: Vec<Session> = Vec::new();
    for u in &status.upstreams {
        for s in &u.sessions {
            if s.client.is_some() || sessions.iter().any(|k| k.status.id == s.id) {
                continue;
            }
            // A shim that has already exited (the daemon has not read its hang-up yet) is no
            // session that could start another daemon.
            if s.pid
                .is_some_and(|pid| !crate::os::still_running(pid, None))
            {
                continue;
            }
            sessions.push(Session {
                upstream: u.name.clone(),
                status: s.clone(),
            });
        }
    }
    Some(Running {
        socket,
        pid: status.daemon.pid,
        sessions,
    })
}

/// End the sessions' shims (SIGTERM), so none of them starts a new daemon once this one stops,
/// and wait for them to exit. Returns the pids still running after the wait.
pub(super) fn end_sessions(sessions: &[Session]) -> Vec<u32> {
    let pids: Vec<u32> = sessions.iter().filter_map(|s| s.status.pid).collect();
    for &pid in &pids {
        // One process, which the daemon reported as a shim of this user (it refuses peers of
        // other uids).
        let _ = crate::os::signal(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + SHIM_LIMIT;
    loop {
        let left: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| crate::os::still_running(p, None))
            .collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stop the daemon on `socket` and wait until its process has exited; `Ok(None)` when none was
/// running.
pub(super) fn stop(socket: &Path) -> Result<Option<u32>, ClientError> {
    let Some(rt) = runtime() else {
        return Err(ClientError::Io(std::io::Error::other(
            "could not start an async runtime",
        )));
    };
    match rt.block_on(client::shutdown(socket, STOP_LIMIT)) {
        Ok(pid) => Ok(Some(pid)),
        Err(ClientError::NotRunning { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Ask the daemon on this invocation's socket to shut down; returns the socket when one did.
/// (`share` uses it for a daemon that predates `reload`.)
pub(in crate::setup) fn shutdown_daemon(paths: &GlobalPaths) -> Option<PathBuf> {
    let socket = paths.socket_loading_config();
    let rt = runtime()?;
    rt.block_on(client::ask_shutdown(&socket))
        .is_ok()
        .then_some(socket)
}
