//! Clients of the daemon, one file per job:
//! - [`trust`]: connecting only to a socket this user owns and a daemon that runs as this user
//!   (DESIGN.md, "both ends check"), checked before a byte is sent;
//! - [`starter`]: starting a daemon when none answers, and watching it until it does;
//! - [`control`]: control-mode requests, typed (`status`, `info`, `reload`, `shutdown`, ...);
//! - [`mcp`]: an mcp-mode connection: the hello, and the rmcp session the CLI's `tools` and
//!   `call` use over it (the same path Claude Code takes through the shim).
//!
//! This file holds what they share: the errors, with their hints, and how a failed connect is
//! told apart from a daemon that is not running. No client ever prints; callers decide what the
//! user sees.

mod control;
mod mcp;
mod starter;
mod trust;

use std::io;
use std::path::{Path, PathBuf};

pub use control::*;
pub use mcp::*;
pub use starter::*;
pub use trust::{Untrusted, connect};

use crate::paths::PathError;
use crate::wire::{self, WireError};

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
    /// `restart --daemon`: the new binary proved itself, but the daemon has not become it yet.
    #[error("the daemon has not handed over after {secs} s: calls are still in flight")]
    HandOverPending { secs: u64 },
    /// The daemon tried to become the new binary and could not; it serves on as it was.
    #[error("the hand-over did not happen: {0}")]
    HandOverFailed(String),
}

impl From<WireError> for ClientError {
    fn from(e: WireError) -> Self {
        ClientError::Remote(e)
    }
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
            ClientError::Untrusted { socket, problem } => Some(trust::untrusted_hint(socket, problem)),
            ClientError::HandOverPending { .. } => Some(
                "it hands over at the next moment none is; `coogle status` shows when (the daemon's start time changes)"
                    .into(),
            ),
            ClientError::HandOverFailed(_) => {
                Some("the daemon serves on as it was; `coogle logs` has the details".into())
            }
            // Its message already says the daemon serves on.
            ClientError::Remote(e) if e.code == wire::ErrorCode::HandOverRefused => {
                Some("`coogle logs` has the details".into())
            }
            ClientError::StopTimeout { pid, .. } => Some(format!(
                "it may still be finishing calls in flight; `coogle status` shows them, `kill {pid}` stops it now"
            )),
            _ => None,
        }
    }
}

/// The fix for a socket path too long for a Unix socket.
pub const SHORTER_SOCKET: &str = "choose a shorter socket path: `socketPath` in config.json, --socket, or COOGLE_SOCKET (a shorter XDG_RUNTIME_DIR shortens the default)";

/// Nothing listens at the socket (yet): worth starting a daemon and waiting for it.
pub fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
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
