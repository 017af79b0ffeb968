//! `coogle serve --standby <path>`: the candidate's side of the proof. Started by a running
//! daemon of an older version, it has already loaded the config as a daemon would (the CLI did,
//! and a config it cannot read ends it here with the reason on stderr); it checks the socket
//! directory, listens on `path` beside the daemon's socket, answers the daemon's hello with its
//! own version and the ways it can take over, and exits when the daemon hangs up.
//!
//! It never touches the daemon's socket, lock, children or log, answers only the process that
//! started it (its parent, of this uid), and gives up after a while if nobody comes.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{CARRY, StandbyHello, StandbyReply, TAKEOVER};
use crate::paths::{self, RuntimePaths};
use crate::wire;

/// How long the candidate waits for the daemon that started it.
const WAIT: Duration = Duration::from_secs(30);
/// The longest hello read.
const HELLO_CAP: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum StandbyError {
    #[error(transparent)]
    Path(#[from] paths::PathError),
    #[error("the standby socket {path} must be beside the daemon's socket, in {dir}")]
    NotBeside { path: PathBuf, dir: PathBuf },
    #[error("could not listen on {path}")]
    Listen {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no daemon came to check this candidate within {} s", WAIT.as_secs())]
    NobodyCame,
}

/// Serve the standby socket `path` for the daemon on `socket`, until that daemon hangs up.
pub(crate) fn standby(socket: &Path, path: &Path) -> Result<(), StandbyError> {
    let rt = RuntimePaths::for_socket(socket);
    rt.check_length()?;
    paths::check_private_dir(&rt.dir)?;
    if path.parent() != Some(rt.dir.as_path()) {
        return Err(StandbyError::NotBeside {
            path: path.to_path_buf(),
            dir: rt.dir.clone(),
        });
    }
    let listen = |source| StandbyError::Listen {
        path: path.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(path).map_err(listen)?;
    let _gone = RemoveOnDrop(path.to_path_buf());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(listen)?;
    // Nobody coming is not worth waiting for forever: the daemon gave up, or died.
    let (done, waited) = std::sync::mpsc::channel::<()>();
    let stray = path.to_path_buf();
    std::thread::spawn(move || {
        if waited.recv_timeout(WAIT).is_err() {
            let _ = std::fs::remove_file(&stray);
            tracing::error!("{}", StandbyError::NobodyCame);
            std::process::exit(3);
        }
    });
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if answer(&conn) {
            let _ = done.send(());
            // Hold the line until the daemon hangs up: it decides when the check is over.
            let _ = conn.set_read_timeout(Some(WAIT));
            let _ = (&conn).read(&mut [0u8; 1]);
            return Ok(());
        }
    }
    Ok(())
}

/// Answer one connection if it is the daemon that started this process; true when it was.
fn answer(conn: &std::os::unix::net::UnixStream) -> bool {
    let ours = crate::os::peer_uid(conn).is_ok_and(|u| u == crate::os::uid());
    let parent = crate::os::peer_pid(conn).is_ok_and(|p| p == std::os::unix::process::parent_id());
    if !ours || !parent {
        tracing::warn!(
            "refused a connection to the standby socket that is not from the daemon that started it"
        );
        return false;
    }
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut line = String::new();
    if BufReader::new(conn.take(HELLO_CAP))
        .read_line(&mut line)
        .is_err()
    {
        return false;
    }
    let Ok(hello) = serde_json::from_str::<StandbyHello>(line.trim_end()) else {
        return false;
    };
    if hello.coogle != 1 || hello.mode != "standby" {
        return false;
    }
    tracing::info!(daemon_version = %hello.version, daemon_pid = hello.pid, "a daemon checks this candidate");
    let reply = StandbyReply {
        coogle: 1,
        ok: true,
        version: wire::VERSION.to_string(),
        takeover: vec![TAKEOVER.to_string(), CARRY.to_string()],
    };
    let mut w = conn;
    w.write_all(&wire::to_line(&reply)).is_ok()
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
