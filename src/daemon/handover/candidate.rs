//! The old daemon's side of the proof: start the newer binary as a standby candidate on a
//! private socket beside the daemon's, and check who answers there and what it says.
//!
//! Blocking, on a thread of its own; every wait is bounded, and the candidate is always reaped
//! (killed when it overstays). It never touches the daemon's own socket or lock.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{CARRY, FileId, StandbyHello, StandbyReply, TAKEOVER, own_args};
use crate::paths::{MAX_SOCKET_PATH, RuntimePaths};
use crate::wire;

/// How long the candidate has to listen (it loads the config first).
const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);
/// How long it has to answer the hello.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest answer read from it.
const ANSWER_CAP: u64 = 64 * 1024;
/// What is kept of the candidate's stderr, to say why it failed.
const STDERR_CAP: usize = 16 * 1024;

/// Start `exe` (file `id`, which reported `version`) as a standby candidate for the daemon on
/// `socket`, and check it: whether it takes the running children over too, or `Err` saying
/// why it cannot be handed over to.
pub(super) fn prove(
    socket: &Path,
    reaper: &crate::daemon::reaper::Reaper,
    exe: &Path,
    id: FileId,
    version: &str,
) -> Result<bool, String> {
    let rt = RuntimePaths::for_socket(socket);
    let path = standby_path(&rt)?;
    let _ = std::fs::remove_file(&path);
    use std::os::unix::process::CommandExt;
    // Registered with the reaper as it is spawned: the daemon's own child, not an orphan to
    // stop when an upstream's child exits, nor a zombie for the reaper to collect.
    let spawning = reaper.spawning();
    // In a process group of its own, so whatever it starts goes with it when it is stopped.
    let mut child = Command::new(exe)
        .args(own_args(socket, &["--standby".into(), path.clone().into()]))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("it could not be started: {e}"))?;
    spawning.started("the hand-over's candidate", child.id());
    let stderr = drain(child.stderr.take());
    let result = check(&mut child, &path, id, version);
    // A proven candidate exits once the connection closes (done by `check`); any other is
    // stopped now. Either way it is reaped, and its socket is gone.
    if result.is_err() {
        crate::daemon::child::signal_group(child.id(), libc::SIGKILL);
    }
    let status = crate::process::wait_or_kill(&mut child, Duration::from_secs(10));
    crate::daemon::child::signal_group(child.id(), libc::SIGKILL);
    reaper.release(child.id());
    let _ = std::fs::remove_file(&path);
    // A grandchild may hold the pipe open after the candidate exits: not waited for long.
    let said = stderr
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or_default();
    let carries = result.map_err(|why| match last_words(&said) {
        Some(words) if status.is_some_and(|s| !s.success()) => format!("{why}; it said: {words}"),
        _ => why,
    })?;
    match FileId::of(exe) {
        Ok(now) if now == id => Ok(carries),
        _ => Err("it changed on disk while it was checked".into()),
    }
}

/// Where the candidate listens: beside the daemon's socket, in its private directory.
fn standby_path(rt: &RuntimePaths) -> Result<PathBuf, String> {
    let name = rt
        .socket
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "coogle.sock".into());
    [format!("{name}.standby"), "standby".to_string()]
        .into_iter()
        .map(|n| rt.dir.join(n))
        .find(|p| p.as_os_str().len() <= MAX_SOCKET_PATH)
        .ok_or_else(|| {
            format!(
                "the socket directory {} leaves no room for a candidate's socket",
                rt.dir.display()
            )
        })
}

fn check(child: &mut Child, path: &Path, id: FileId, version: &str) -> Result<bool, String> {
    let stream = connect(child, path)?;
    let me = crate::os::uid();
    match crate::os::peer_uid(&stream) {
        Ok(uid) if uid == me => {}
        Ok(uid) => return Err(format!("its socket is served by uid {uid}, not by you")),
        Err(e) => return Err(format!("could not tell who serves its socket: {e}")),
    }
    match crate::os::peer_pid(&stream) {
        Ok(pid) if pid == child.id() => {}
        Ok(pid) => {
            return Err(format!(
                "its socket is served by pid {pid}, not by the process started (pid {})",
                child.id()
            ));
        }
        Err(e) => {
            return Err(format!(
                "could not tell which process serves its socket: {e}"
            ));
        }
    }
    match crate::os::executable_id(child.id()) {
        Ok(file) if id.same_file(file) => {}
        Ok(_) => return Err("the process that answers runs another executable".into()),
        Err(e) => return Err(format!("could not tell which file it runs: {e}")),
    }
    let reply = exchange(&stream)?;
    if !reply.ok {
        return Err("it refused the hello".into());
    }
    if reply.version != version {
        return Err(format!(
            "it answers as coogle {}, not the {version} its --version printed",
            reply.version
        ));
    }
    if !reply.takeover.iter().any(|t| t == TAKEOVER) {
        return Err("it cannot take the socket over from this version".into());
    }
    Ok(reply.takeover.iter().any(|t| t == CARRY))
}

/// Connect to the candidate's socket as soon as it listens; an error when it exits first or
/// takes too long.
fn connect(child: &mut Child, path: &Path) -> Result<UnixStream, String> {
    let deadline = Instant::now() + LISTEN_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("its `serve` exited ({status}) before it listened"));
        }
        if let Ok(s) = UnixStream::connect(path) {
            return Ok(s);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "it did not listen within {} s",
                LISTEN_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn exchange(stream: &UnixStream) -> Result<StandbyReply, String> {
    let hello = StandbyHello {
        coogle: 1,
        mode: "standby".into(),
        version: wire::VERSION.into(),
        pid: std::process::id(),
    };
    let io = |e: std::io::Error| format!("talking to it failed: {e}");
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
    let mut w = stream;
    w.write_all(&wire::to_line(&hello)).map_err(io)?;
    let mut line = String::new();
    BufReader::new(stream.take(ANSWER_CAP))
        .read_line(&mut line)
        .map_err(|e| format!("it did not answer the hello: {e}"))?;
    serde_json::from_str::<StandbyReply>(line.trim_end()).map_err(|_| {
        format!(
            "it answered the hello with something else: {:?}",
            snippet(&line)
        )
    })
}

/// The candidate's stderr, read on a thread (capped) so it cannot block on a full pipe.
fn drain(pipe: Option<std::process::ChildStderr>) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            let _ = tx.send(String::new());
            return;
        };
        let mut kept = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            let room = STDERR_CAP.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
        let _ = tx.send(String::from_utf8_lossy(&kept).into_owned());
    });
    rx
}

/// The last non-empty lines the candidate wrote, on one line.
fn last_words(said: &str) -> Option<String> {
    let lines: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    (!tail.is_empty()).then(|| snippet(&tail))
}

fn snippet(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}
