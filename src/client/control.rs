//! Control-mode requests to a running daemon, typed: one function per method a client asks,
//! each returning that method's answer (see [`crate::wire::control`]), so no caller builds a
//! request or reads an answer by key. None of these starts a daemon.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::{ClientError, REPLY_LINE_CAP, connect};
use crate::wire::{
    self, ChildReady, ControlRequest, ControlResponse, ErrorCode, HandingOver, Info, Line, Pong,
    Reloaded, Request, Status, Stopping, Target, ToolList,
};

/// `ping`: whether a daemon answers, and its version.
pub async fn ping(socket: &Path) -> Result<Pong, ClientError> {
    ask(socket, Request::Ping).await
}

/// `info`: the daemon itself.
pub async fn info(socket: &Path) -> Result<Info, ClientError> {
    ask(socket, Request::Info).await
}

/// `status`: the daemon, each upstream, each session.
pub async fn status(socket: &Path) -> Result<Status, ClientError> {
    ask(socket, Request::Status).await
}

/// `list_tools`: every page of a server's tool list (its child starts if it must).
pub async fn list_tools(socket: &Path, target: Target) -> Result<ToolList, ClientError> {
    ask(socket, Request::ListTools(target)).await
}

/// `restart_child`: answered once the new child is ready.
pub async fn restart_child(socket: &Path, target: Target) -> Result<ChildReady, ClientError> {
    ask(socket, Request::RestartChild(target)).await
}

/// `restart_daemon`: answered once the binary on disk proved it can serve (the exec follows
/// once no call is in flight), or with why it cannot take over.
pub async fn restart_daemon(socket: &Path) -> Result<HandingOver, ClientError> {
    ask(socket, Request::RestartDaemon).await
}

/// An upgrade in place that happened: the daemon and its children before and after.
pub struct Restarted {
    pub before: Status,
    pub after: Status,
}

/// `restart --daemon` end to end: ask the daemon to become the binary on disk, tell
/// `proved` once that binary proved it can serve, and wait (up to `wait`) until the daemon
/// runs it. `None`: no daemon runs (the next session starts the binary on disk).
pub async fn restart_daemon_in_place(
    socket: &Path,
    wait: Duration,
    proved: impl FnOnce(&HandingOver),
) -> Result<Option<Restarted>, ClientError> {
    let before = match status(socket).await {
        Err(ClientError::NotRunning { .. }) => return Ok(None),
        other => other?,
    };
    let answer = restart_daemon(socket).await?;
    proved(&answer);
    let deadline = Instant::now() + wait;
    let after = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        // The exec takes a moment, and the socket's backlog holds this connection meanwhile;
        // an error now is that moment, not an answer.
        if let Ok(now) = status(socket).await
            && now.daemon.started_at_ms != before.daemon.started_at_ms
        {
            break now;
        }
        if Instant::now() >= deadline {
            return Err(ClientError::HandOverPending {
                secs: wait.as_secs(),
            });
        }
    };
    // A daemon that became the new binary starts with no failure on record; one whose exec
    // failed serves on, saying why.
    if after.daemon.hand_over_failed.is_some() || after.daemon.version != answer.version {
        return Err(ClientError::HandOverFailed(
            after
                .daemon
                .hand_over_failed
                .unwrap_or_else(|| "the daemon did not say why".into()),
        ));
    }
    Ok(Some(Restarted { before, after }))
}

impl Restarted {
    /// What an upgrade in place kept, in a line: the pid, and each child that runs on (same
    /// pid, same start).
    pub fn summary(&self) -> String {
        let running = |s: &Status| -> Vec<(u32, Option<u64>)> {
            s.upstreams
                .iter()
                .filter_map(|u| u.pid.map(|p| (p, u.started_at_ms)))
                .collect()
        };
        let (was, now) = (running(&self.before), running(&self.after));
        let kept = was.iter().filter(|c| now.contains(c)).count();
        let (b, a) = (&self.before.daemon, &self.after.daemon);
        let pid = if b.pid == a.pid {
            format!("pid {} kept", a.pid)
        } else {
            format!("pid {} (was {})", a.pid, b.pid)
        };
        let children = match (was.len(), kept) {
            (0, _) => "no server was running".to_string(),
            (1, 1) => "1 running server kept".to_string(),
            (n, k) if n == k => format!("{k} running servers kept"),
            (n, k) => {
                format!("{k} of {n} running servers kept (the others start again on demand)")
            }
        };
        format!(
            "restarted the coogle daemon in place: coogle {} → {}, {pid}, {children}",
            b.version, a.version
        )
    }
}

/// `reload`, typed. `None`: the daemon predates `reload` (it answered that the method is
/// unknown), so only a restart makes it read its config again.
pub async fn reload(socket: &Path) -> Result<Option<Reloaded>, ClientError> {
    match ask(socket, Request::Reload).await {
        Ok(r) => Ok(Some(r)),
        Err(ClientError::Remote(e))
            if e.code == ErrorCode::InvalidRequest
                && e.message.starts_with("unknown control method") =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// What a reload did, a line each for the CLI and `share`: the added servers are served now,
/// the changed and removed ones only from the daemon's next start.
pub fn reload_lines(r: &Reloaded) -> Vec<String> {
    let later = "(takes effect at the daemon's next start: `coogle restart --daemon` restarts only the servers that changed, and sessions stay connected)";
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

/// `shutdown`, without waiting: the daemon's answer, sent before it goes.
pub async fn ask_shutdown(socket: &Path) -> Result<Stopping, ClientError> {
    ask(socket, Request::Shutdown).await
}

/// Ask the daemon to shut down, and return its pid once its process has exited, so that
/// whatever comes next (`coogle serve`, a new binary) does not find it still holding its lock
/// while it drains calls. The socket file goes first, so it says nothing about that.
pub async fn shutdown(socket: &Path, limit: Duration) -> Result<u32, ClientError> {
    let pid = ask_shutdown(socket).await?.pid;
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
/// started by a test or a supervisor that waits later). Pid 0 is never a daemon.
fn has_exited(pid: u32) -> bool {
    pid == 0 || !crate::os::still_running(pid, None)
}

/// One request on its own connection, its answer read as `A` (what the method answers).
async fn ask<A: DeserializeOwned>(socket: &Path, request: Request) -> Result<A, ClientError> {
    let stream = connect(socket).await?;
    ask_on(stream, request).await
}

async fn ask_on<A: DeserializeOwned>(
    stream: UnixStream,
    request: Request,
) -> Result<A, ClientError> {
    let (r, mut w) = stream.into_split();
    let req = ControlRequest {
        id: "1".into(),
        request,
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
    let resp: ControlResponse<A> =
        serde_json::from_slice(&buf).map_err(|e| ClientError::Protocol(e.to_string()))?;
    Ok(resp.into_result()?)
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
