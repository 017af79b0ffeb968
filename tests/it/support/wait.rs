//! Bounded waits that say, when they time out, what they last saw: the daemon's status, the
//! process still running, the file's last lines. Each polls with a backoff capped at 100 ms and
//! never asserts on timing: the timeouts are generous, for a loaded machine.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{control, report};

/// Poll `f` until it gives `Ok`, for at most `timeout`, and return what it gave. `f`'s `Err` is
/// the state it saw; at the timeout the panic names `what` and the last one.
#[track_caller]
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    let mut delay = Duration::from_millis(5);
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}\nlast seen: {}",
                report::cut(&last)
            );
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(100));
    }
}

/// [`wait_until`] for a condition that has no state worth showing.
#[track_caller]
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    wait_until(what, timeout, || {
        if f() {
            Ok(())
        } else {
            Err("the condition was still false (a wait_until would say more)".into())
        }
    });
}

/// Poll the control method `method` (`status`, `info`, `ping`) on `socket` until `accept` takes
/// its result, and return that result. Times out showing the last answer or error.
#[track_caller]
pub fn wait_control(
    socket: &Path,
    method: &str,
    what: &str,
    timeout: Duration,
    mut accept: impl FnMut(&Value) -> bool,
) -> Value {
    wait_until(what, timeout, || {
        match control(socket, method, Value::Null) {
            Ok(v) if accept(&v) => Ok(v),
            Ok(v) if method == "status" => Err(format!("status:{}", status_summary(&v))),
            Ok(v) => Err(format!("{method}: {v}")),
            Err(e) => Err(format!("{method} failed: {e}")),
        }
    })
}

/// [`wait_control`] on `status`, whose timeout shows each upstream's state.
#[track_caller]
pub fn wait_status(
    socket: &Path,
    what: &str,
    timeout: Duration,
    accept: impl FnMut(&Value) -> bool,
) -> Value {
    wait_control(socket, "status", what, timeout, accept)
}

/// Wait until every one of `pids` has exited (a zombie counts as gone). Times out showing those
/// still running.
#[track_caller]
pub fn wait_gone(what: &str, pids: &[u32], timeout: Duration) {
    wait_until(what, timeout, || {
        let alive: Vec<String> = pids
            .iter()
            .filter(|&&p| super::pid_alive(p))
            .map(|&p| describe_process(p))
            .collect();
        if alive.is_empty() {
            Ok(())
        } else {
            Err(alive.join("; "))
        }
    });
}

/// Wait until `accept` takes the text of the file at `path` (missing counts as empty), and
/// return that text. Times out showing the file's last lines.
#[track_caller]
pub fn wait_file(
    what: &str,
    path: &Path,
    timeout: Duration,
    mut accept: impl FnMut(&str) -> bool,
) -> String {
    wait_until(what, timeout, || {
        let text = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("could not read {}: {e}", path.display())),
        };
        if accept(&text) {
            return Ok(text);
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(20)..];
        Err(format!(
            "{} ({} lines), ending:\n  {}",
            path.display(),
            lines.len(),
            tail.iter()
                .map(|l| report::cut(l))
                .collect::<Vec<_>>()
                .join("\n  ")
        ))
    })
}

/// How many lines of `text` start with `prefix` (a method name in the fake server's event log).
pub fn count_prefixed(text: &str, prefix: &str) -> usize {
    text.lines().filter(|l| l.starts_with(prefix)).count()
}

/// A `status` answer in a line per upstream: state, child, queue, in flight, last error and
/// sessions, what a wait on it usually waits for.
pub fn status_summary(status: &Value) -> String {
    let Some(upstreams) = status["upstreams"].as_array() else {
        return report::cut(&status.to_string());
    };
    if upstreams.is_empty() {
        return "no upstreams".into();
    }
    let mut out = String::new();
    for u in upstreams {
        out.push_str(&format!("\n  upstream {}", u["name"]));
        if !u["instance"].is_null() {
            out.push_str(&format!(" (instance {})", u["instance"]));
        }
        let field = |k: &str| format!("{k} {}", u[k]);
        let fields = [
            "state",
            "pid",
            "era",
            "queue",
            "inFlight",
            "tools",
            "restarts",
            "consecutiveFailures",
        ];
        out.push_str(": ");
        out.push_str(&fields.map(field).join(", "));
        if !u["lastError"].is_null() {
            out.push_str(&format!(", lastError {}", u["lastError"]));
        }
        let sessions = u["sessions"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        out.push_str(&format!(", {} sessions", sessions.len()));
        for s in sessions.iter().take(8) {
            out.push_str(&format!(
                "\n    session {}: queued {}, inFlight {}",
                s["id"], s["queued"], s["inFlight"]
            ));
        }
        if sessions.len() > 8 {
            out.push_str(&format!("\n    … {} more", sessions.len() - 8));
        }
    }
    out
}

/// What the process table says of a running `pid`: its state and command line.
pub fn describe_process(pid: u32) -> String {
    #[cfg(target_os = "linux")]
    {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let (_, rest) = s.rsplit_once(')')?;
                rest.split_whitespace().next().map(String::from)
            })
            .unwrap_or_else(|| "?".into());
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default();
        format!("pid {pid} still running (state {state}): {cmd}")
    }
    #[cfg(not(target_os = "linux"))]
    {
        let out = std::process::Command::new("ps")
            .args(["-o", "stat=,command=", "-p", &pid.to_string()])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        format!("pid {pid} still running: {out}")
    }
}
