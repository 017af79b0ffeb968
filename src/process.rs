//! Running short-lived helper programs with a time limit: a service manager (`systemctl`,
//! `launchctl`), `claude mcp …`, a tool's `--version`, a downloaded coogle binary.
//!
//! Every wait here is bounded and a child past its limit is killed and reaped, so a hung
//! program can never hang coogle or leave a zombie. Nothing here runs in `coogle mcp` or the
//! daemon's request path.

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
pub(crate) fn run_bounded(
    program: &Path,
    args: &[&str],
    limit: Duration,
) -> Result<String, RunError> {
    let start = |error| RunError::Start {
        program: program.to_path_buf(),
        error,
    };
    let command = || format!("{} {}", program.display(), args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(start)?;
    if wait_or_kill(&mut child, limit).is_none() {
        return Err(RunError::TimedOut {
            command: command(),
            limit,
        });
    }
    let out = child.wait_with_output().map_err(start)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .trim()
    .to_owned();
    match (out.status.success(), text.is_empty()) {
        (true, _) => Ok(text),
        (false, true) => Err(RunError::Failed {
            command: command(),
            status: out.status,
        }),
        (false, false) => Err(RunError::Said(text)),
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
