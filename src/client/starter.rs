//! Starting a daemon when none answers: `coogle serve` detached from the client (its own
//! session, its output to the log), then waiting for it with backoff while watching it, so a
//! daemon that cannot start (a broken config.json, a socket path too long) is reported with
//! its own words at once, not after a timeout.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::net::UnixStream;

use super::ClientError;
use super::trust::try_connect_blocking;

/// How long a client waits for a daemon it started to answer.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Set by `coogle` when it hands a session to the `coogle-mcp` executable: the version that one
/// must have (see `cli::shim_exe`). Never passed on to a daemon a client starts.
pub const HANDOFF_VAR: &str = "COOGLE_SHIM";

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
            .env_remove(HANDOFF_VAR)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // A session of its own: the terminal's hang-up or Ctrl-C never reaches the daemon.
        crate::os::start_new_session(&mut cmd);
        // Nothing the client leaked to this shim lives on in the daemon (it outlives them both).
        crate::os::only_stdio_across_exec(&mut cmd);
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

    fn timed_out(&self) -> ClientError {
        ClientError::StartTimeout {
            socket: self.socket.clone(),
            secs: START_TIMEOUT.as_secs(),
            log: self.log_file.clone(),
        }
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
    /// The daemon's process, for a caller that reaps it itself: no thread is left waiting for
    /// it (the shim keeps to one thread and reaps it when it settles).
    pub fn into_child(mut self) -> Option<std::process::Child> {
        self.child.take()
    }

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
