//! Running short-lived helper programs with a time limit: a service manager (`systemctl`,
//! `launchctl`), `claude mcp …`, a tool's `--version`, a downloaded coogle binary; and which
//! file starts this binary once it was replaced on disk.
//!
//! Every wait here is bounded and a child past its limit is killed and reaped, so a hung
//! program can never hang coogle or leave a zombie. Nothing here runs in `coogle mcp` or the
//! daemon's request path.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why [`run_bounded`] did not get a successful answer. The message is whole on one line (it
/// is shown inside ✓/✗ lines), so the I/O error is part of it rather than a separate cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("could not run {}: {error}", program.display())]
    Start {
        program: PathBuf,
        error: std::io::Error,
    },
    #[error("{command} did not finish within {} s", limit.as_secs())]
    TimedOut { command: String, limit: Duration },
    /// It failed without saying anything.
    #[error("{command} failed ({status})")]
    Failed { command: String, status: ExitStatus },
    /// It failed and said why (its stdout and stderr, trimmed).
    #[error("{0}")]
    Said(String),
}

/// Wait up to `limit` for `child` to exit; past it, kill and reap it and return `None`.
pub(crate) fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Run `program args` with a time limit and return what it printed (stdout then stderr,
/// trimmed); a failure carries what it said.
///
/// The output is read while the program runs: one that prints more than a pipe holds
/// (`launchctl print gui/<uid>` lists a whole session) would otherwise block on its write and
/// never exit.
pub(crate) fn run_bounded(
    program: &Path,
    args: &[&str],
    limit: Duration,
) -> Result<String, RunError> {
    run_bounded_spawned_by(program, args, limit, Command::spawn)
}

/// [`run_bounded`], with the spawn done by `spawn` (the daemon's registers the process with its
/// reaper as it starts, so it is never taken for an orphan).
pub(crate) fn run_bounded_spawned_by(
    program: &Path,
    args: &[&str],
    limit: Duration,
    spawn: impl FnOnce(&mut Command) -> std::io::Result<std::process::Child>,
) -> Result<String, RunError> {
    let start = |error| RunError::Start {
        program: program.to_path_buf(),
        error,
    };
    let command = || format!("{} {}", program.display(), args.join(" "));
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn(&mut cmd).map_err(start)?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let Some(status) = wait_or_kill(&mut child, limit) else {
        return Err(RunError::TimedOut {
            command: command(),
            limit,
        });
    };
    let text = format!("{}{}", stdout.collect(), stderr.collect())
        .trim()
        .to_owned();
    match (status.success(), text.is_empty()) {
        (true, _) => Ok(text),
        (false, true) => Err(RunError::Failed {
            command: command(),
            status,
        }),
        (false, false) => Err(RunError::Said(text)),
    }
}

/// The most of a helper's output kept; the rest is read and dropped.
const OUTPUT_CAP: usize = 1 << 20;

/// A pipe read to its end on a thread of its own.
struct Drained(Option<std::sync::mpsc::Receiver<Vec<u8>>>);

fn drain(pipe: Option<impl Read + Send + 'static>) -> Drained {
    Drained(pipe.map(|mut pipe| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            let _ = tx.send(kept);
        });
        rx
    }))
}

impl Drained {
    /// What was read. A grandchild that inherited the pipe can keep it open after the program
    /// exits: past a short wait, that output is given up rather than waited for.
    fn collect(self) -> String {
        self.0
            .and_then(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

/// The binary to start. After `coogle self-update` replaced the file, Linux reports an older
/// process's own executable (`current_exe`) as `/path/coogle (deleted)`; the file now at
/// `/path/coogle` is the new version, which is the one to start.
pub(crate) fn live_exe(exe: &Path) -> PathBuf {
    if !exe.exists()
        && let Some(s) = exe.to_str()
        && let Some(stripped) = s.strip_suffix(" (deleted)")
    {
        return PathBuf::from(stripped);
    }
    exe.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More output than a pipe holds: read while it runs, so the program exits at once.
    #[test]
    fn a_chatty_program_does_not_stall() {
        let started = Instant::now();
        let out = run_bounded(
            Path::new("/bin/sh"),
            &[
                "-c",
                "head -c 300000 /dev/zero | tr '\\0' x; echo; echo said >&2",
            ],
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.len(), 300_000 + 1 + 4, "{}", &out[out.len() - 10..]);
        assert!(out.ends_with("\nsaid"));
        match run_bounded(
            Path::new("/bin/sh"),
            &["-c", "echo nope >&2; exit 3"],
            Duration::from_secs(10),
        ) {
            Err(RunError::Said(s)) => assert_eq!(s, "nope"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run_bounded(
                Path::new("/bin/sh"),
                &["-c", "sleep 5"],
                Duration::from_millis(200)
            ),
            Err(RunError::TimedOut { .. })
        ));
    }

    /// Regression: a shim that outlived a self-update started `/path/coogle (deleted)`.
    #[test]
    fn a_replaced_binary_is_started_from_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("coogle");
        std::fs::write(&exe, b"").unwrap();
        let deleted = PathBuf::from(format!("{} (deleted)", exe.display()));
        assert_eq!(live_exe(&deleted), exe);
        assert_eq!(live_exe(&exe), exe);
        // A file really named that way is left alone.
        let odd = dir.path().join("odd (deleted)");
        std::fs::write(&odd, b"").unwrap();
        assert_eq!(live_exe(&odd), odd);
    }
}
