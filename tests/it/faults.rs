//! Faults: a child that cannot stay up backs off and `status` says so; a child that hangs is
//! restarted after consecutive timeouts.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

#[test]
fn a_crash_loop_backs_off_and_status_says_so() {
    let env = Env::new();
    let spawns = env.path("spawns.txt");
    env.write_fake_config(
        json!({"env": {"FAKE_MCP_EXIT_AT_START": "3", "FAKE_MCP_PID_FILE": spawns}}),
    );
    let _d = env.daemon();
    env.demand_start();
    let last = wait_status(
        &env.socket,
        "two failed starts",
        Duration::from_secs(20),
        |s| {
            s["upstreams"][0]["consecutiveFailures"]
                .as_u64()
                .unwrap_or(0)
                >= 2
        },
    )["upstreams"][0]
        .clone();
    assert_eq!(last["state"], "failed", "{last}");
    assert!(
        last["lastError"]
            .as_str()
            .unwrap()
            .contains("exit status: 3"),
        "{last}"
    );
    // Backoff: 3 s after the first failure, 6 s after the second.
    let next = last["nextRestartInMs"].as_u64().unwrap();
    assert!(
        next > 3_000 && next <= 6_000,
        "next start in {next} ms: {last}"
    );
    let out = env.run(&["status"]);
    assert_eq!(
        out.status,
        Some(1),
        "an unhealthy upstream makes status exit 1: {out}"
    );
    assert!(out.stdout.contains("failures in a row: 2"), "{out}");
    // Spawns are bounded by the backoff, not a tight loop.
    assert!(read_lines(&spawns).len() <= 3, "{:?}", read_lines(&spawns));
}

#[test]
fn a_hung_child_is_restarted_after_consecutive_timeouts() {
    let env = Env::with_fake(json!({"callTimeoutMs": 300}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let before = text(&s.call("pid", json!({})));
    for _ in 0..3 {
        let r = s.call("sleep", json!({"ms": 60_000}));
        assert!(text(&r).contains("timed out"), "{r}");
    }
    // The third timeout in a row restarts the child; the next call is served by a new one.
    let after = text(&s.call("pid", json!({})));
    assert_ne!(before, after);
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert!(
        status["upstreams"][0]["lastError"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    assert_eq!(status["upstreams"][0]["stats"]["timeouts"], 3);
}

/// Regression (hardening review): a child that closed its stdout but kept running was noticed
/// only after three call timeouts. Its EOF is noticed at once: the call fails saying why and
/// the next call gets a fresh child.
#[test]
fn a_child_that_closes_its_stdout_is_replaced_at_once() {
    let env = Env::with_fake(json!({"callTimeoutMs": 60000}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let before = text(&s.call("pid", json!({})));
    let t = std::time::Instant::now();
    let r = s.call("close_stdout", json!({}));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(text(&r).contains("closed its stdout"), "{r}");
    let after = s.call("pid", json!({}));
    assert_ne!(text(&after), before, "a new child");
}

/// Regression (hardening review): a child's stderr went into the daemon's log verbatim, secrets
/// and all. What looks like a credential is taken out: the child's own secret environment, and
/// tokens and fields of well-known shapes.
#[test]
fn credentials_in_a_childs_stderr_are_not_logged() {
    let secret = "tok-live-0123456789abcdef";
    let env = Env::with_fake(json!({"env": {"MY_SERVICE_TOKEN": secret}}));
    let d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let line = format!(
        "leaking {secret} and ya29.a0AfB_longaccesstoken123 plus password=correcthorsebattery"
    );
    s.call("stderr", json!({"lines": 1, "text": line}));
    s.call("echo", json!({"text": "sync"}));
    drop(s);
    let mut d = d;
    let (_, log) = d.signal_and_wait(libc::SIGTERM);
    assert!(
        log.contains("leaking [redacted] and [redacted] plus password=[redacted]"),
        "{log}"
    );
    for leaked in [secret, "ya29.a0AfB", "correcthorsebattery"] {
        assert!(!log.contains(leaked), "{leaked} in the log");
    }
}
