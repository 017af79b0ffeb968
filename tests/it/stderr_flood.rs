//! A child that floods stderr without a newline costs the daemon log text, never memory.
//!
//! Regression (third adversarial review): 300 MB of stderr without a newline took the daemon
//! from 7 MB to 307 MB RSS, and 2.5 GB aborted it (with every upstream and session). A line is
//! now kept up to its cap and the rest read and dropped.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::*;

/// The daemon's peak resident memory so far, in KiB (Linux `VmHWM`); elsewhere its current one.
fn peak_rss_kib(pid: u32) -> u64 {
    if cfg!(target_os = "linux") {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap()
    } else {
        rss_kib(pid)
    }
}

#[test]
fn a_stderr_flood_without_newlines_keeps_the_daemon_small_and_serving() {
    const FLOOD: u64 = 200 * 1024 * 1024;
    let env = Env::new();
    // The child serves MCP at once while a helper in its process group writes the flood to the
    // same stderr pipe: one line of 200 MiB, then a marker line.
    let script = format!(
        "(head -c {FLOOD} /dev/zero | tr '\\0' x; printf '\\nflood-%s\\n' done) >&2 & exec '{}'",
        fake_mcp().display()
    );
    env.write_config(&json!({"servers": {"google": {
        "command": "sh",
        "args": ["-c", script],
        "credentials": {"source": "none"},
    }}}));
    let d = env.daemon();
    let pid = d.pid();
    let before = rss_kib(pid);
    let mut s = env.shim();
    s.initialize();
    wait_for("the flood to be read", Duration::from_secs(120), || {
        std::fs::read_to_string(&env.log).is_ok_and(|l| l.contains("flood-done"))
    });
    let peak = peak_rss_kib(pid);
    assert!(
        peak < before + 64 * 1024,
        "the daemon grew from {before} KiB to a peak of {peak} KiB while a child wrote {FLOOD} bytes without a newline"
    );
    assert_eq!(
        text(&s.call("echo", json!({"text": "still here"}))),
        "still here"
    );
    let log = std::fs::read_to_string(&env.log).unwrap();
    // The flood's line ends where the child's own stderr lines (the fake's) cut into it.
    let dropped: u64 = log
        .split("… (")
        .skip(1)
        .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(
        dropped > FLOOD - 64 * 1024,
        "the log says what was dropped ({dropped} bytes)"
    );
    assert!(log.len() < 1024 * 1024, "the log kept {} bytes", log.len());
}
