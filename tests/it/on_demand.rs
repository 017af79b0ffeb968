//! Children start on demand and stop when idle: a daemon with many servers configured and
//! nobody using them runs no child at all. A new session is answered from the cache without
//! waking the child; the first request the cache cannot answer starts it; after `idleStopMs`
//! with nothing to do it is parked, sessions connected or not, and it starts again on the next
//! demand.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn state(env: &Env) -> Value {
    control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0].clone()
}

#[test]
fn no_child_runs_until_a_request_needs_it_and_it_is_parked_when_quiet() {
    let env = Env::new();
    let pids = env.path("pids");
    // A list the same for everyone (`cacheScope: "public"`): a private one is never served
    // from the cache (see `cache_files.rs`).
    env.write_fake_config(json!({"idleStopMs": 1500, "env": {
        "FAKE_MCP_PID_FILE": pids,
        "FAKE_MCP_CACHE_SCOPE": "public",
    }}));
    // A first run teaches the daemon the child's answers.
    {
        let mut d = env.daemon();
        env.wait_upstream_ready();
        wait_status(&env.socket, "the cache", Duration::from_secs(10), |s| {
            s["upstreams"][0]["tools"].is_u64()
        });
        d.signal_and_wait(libc::SIGTERM);
    }
    assert_eq!(read_lines(&pids).len(), 1);
    let _d = env.daemon();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(state(&env)["state"], "idle");
    // A new session starts without the child.
    let mut s = env.shim();
    s.initialize();
    s.request("tools/list", json!({}));
    assert_eq!(state(&env)["state"], "idle", "the cache answered");
    assert_eq!(read_lines(&pids).len(), 1, "no child was started");
    // A call needs it.
    assert_eq!(text(&s.call("echo", json!({"text": "woken"}))), "woken");
    assert_eq!(read_lines(&pids).len(), 2);
    // A session that stays connected but quiet does not keep it: after idleStopMs it is
    // parked, and the session, still connected, wakes it with its next call.
    let child = state(&env)["pid"].as_u64().unwrap() as u32;
    wait_status(
        &env.socket,
        "the quiet child to be parked",
        Duration::from_secs(10),
        |s| s["upstreams"][0]["state"] == "idle",
    );
    wait_gone("its process to be gone", &[child], Duration::from_secs(5));
    assert_eq!(state(&env)["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(text(&s.call("echo", json!({"text": "again"}))), "again");
    assert_eq!(read_lines(&pids).len(), 3);
    // Without sessions, the same.
    drop(s);
    wait_status(
        &env.socket,
        "the idle child to stop",
        Duration::from_secs(10),
        |s| s["upstreams"][0]["state"] == "idle",
    );
    let mut s = env.shim();
    s.initialize();
    assert_eq!(
        text(&s.call("echo", json!({"text": "once more"}))),
        "once more"
    );
    assert_eq!(read_lines(&pids).len(), 4);
}

#[test]
fn idle_stop_zero_means_never() {
    let env = Env::with_fake(json!({"idleStopMs": 0}));
    let _d = env.daemon();
    let ready = env.wait_upstream_ready();
    let pid = ready["upstreams"][0]["pid"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let now = state(&env);
    assert_eq!(
        (now["state"].clone(), now["pid"].as_u64()),
        (json!("ready"), Some(pid))
    );
}

/// Regression: the idle clock ran while the child was still starting, so a child slower to
/// start than `idleStopMs` was stopped half-way and whoever asked for it never heard back.
#[test]
fn a_child_slower_to_start_than_idle_stop_is_not_stopped_while_someone_waits() {
    let env =
        Env::with_fake(json!({"idleStopMs": 300, "env": {"FAKE_MCP_START_DELAY_MS": "1200"}}));
    let _d = env.daemon();
    let started = control(&env.socket, "start_child", Value::Null);
    let pid = started.expect("start_child answers once the child is ready")["pid"].as_u64();
    assert!(pid.is_some_and(|p| pid_alive(p as u32)), "{pid:?}");
    // Nobody needs it afterwards: it stops as usual.
    wait_status(
        &env.socket,
        "the idle child to stop",
        Duration::from_secs(10),
        |s| s["upstreams"][0]["state"] == "idle",
    );
    // A call made from a cold start is answered too, not cut off by the idle clock.
    let mut s = env.shim();
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "slow"}))), "slow");
}

/// Regression (review): the idle stop left the child `ready` while it was being killed, so a
/// call that came in the last moments went to the dying child and failed with "stopped while
/// idle; retry". Now what arrives while it stops waits and starts it again.
#[test]
fn a_call_during_an_idle_stop_waits_for_the_next_child() {
    let env = Env::new();
    let pids = env.path("pids");
    // Deaf to SIGTERM, so the stop takes the whole grace before SIGKILL.
    let script = format!("trap '' TERM; exec {}", fake_mcp().display());
    env.write_config(&json!({"servers": {"google": {
        "command": "/bin/sh", "args": ["-c", script], "credentials": {"source": "none"},
        "idleStopMs": 300, "env": {"FAKE_MCP_PID_FILE": pids}}}}));
    let _d = env.daemon();
    {
        let mut s = env.shim();
        s.initialize();
        assert_eq!(text(&s.call("echo", json!({"text": "first"}))), "first");
    }
    wait_status(
        &env.socket,
        "the idle stop to begin",
        Duration::from_secs(10),
        |s| s["upstreams"][0]["state"] == "stopping",
    );
    let mut s = env.shim();
    s.initialize();
    let r = s.call("sleep", json!({"ms": 300}));
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert_eq!(read_lines(&pids).len(), 2, "a new child served it");
}

/// Regression (review): a session that hung up before its hello was answered left its
/// per-session instance (an actor, its channel, its cache) in the daemon for good.
#[test]
fn sessions_that_hang_up_at_once_leave_no_per_session_instance() {
    use std::io::Write;
    let env = Env::with_fake(json!({"sharing": "per-session"}));
    let _d = env.daemon();
    let version = control(&env.socket, "info", Value::Null).unwrap()["version"].clone();
    let hello = format!(
        "{}\n",
        json!({"coogle": 1, "mode": "mcp", "version": version})
    );
    for _ in 0..100 {
        let mut c = connect_patiently(&env.socket).unwrap();
        let _ = c.write_all(hello.as_bytes());
    }
    wait_status(
        &env.socket,
        "the sessions' instances to go",
        Duration::from_secs(20),
        |s| s["upstreams"].as_array().unwrap().len() <= 1,
    );
}
