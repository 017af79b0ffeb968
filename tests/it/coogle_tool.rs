//! The `coogle` tool an agent sees beside the server's own: status and info, restart of a
//! wedged child, and the async escape hatch (start a slow call, fetch its result later by
//! operation id).

use crate::support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

#[test]
fn status_info_and_restart_from_the_agent_side() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let status = s.call("coogle", json!({"action": "status"}));
    assert!(
        text(&status).contains("Server `google` is ready"),
        "{status}"
    );
    assert_eq!(status["result"]["structuredContent"]["state"], "ready");
    let info = s.call("coogle", json!({"action": "info"}));
    assert!(text(&info).contains(env!("CARGO_PKG_VERSION")), "{info}");

    let before = text(&s.call("pid", json!({})));
    let restarted = s.call("coogle", json!({"action": "restart"}));
    assert!(
        text(&restarted).starts_with("Restarted the `google` server"),
        "{restarted}"
    );
    assert_ne!(text(&s.call("pid", json!({}))), before);

    let bad = s.call("coogle", json!({"action": "fly"}));
    assert_eq!(bad["result"]["isError"], true);
    assert!(text(&bad).contains("unknown action"), "{bad}");
}

#[test]
fn a_slow_call_runs_in_the_background_and_is_fetched_later() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut a = env.shim_of_claude_session("agent-a");
    a.initialize();
    let t = Instant::now();
    let started = a.call(
        "coogle",
        json!({"action": "start_call", "tool": "sleep", "arguments": {"ms": 800, "text": "finally"}}),
    );
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "start_call answers at once"
    );
    let op = started["result"]["structuredContent"]["operation"]
        .as_str()
        .unwrap()
        .to_string();
    // At once: still running.
    let now = a.call("coogle", json!({"action": "wait", "operation": op}));
    assert_eq!(
        now["result"]["structuredContent"]["status"], "running",
        "{now}"
    );
    // Waiting for it gets the tool's own result (an operation belongs to the shim that
    // started it, not to whoever learns its id: see operation_ownership.rs).
    let done = a.call(
        "coogle",
        json!({"action": "wait", "operation": op, "wait_ms": 10000}),
    );
    assert_eq!(text(&done), "finally", "{done}");
    let list = a.call("coogle", json!({"action": "list_operations"}));
    assert_eq!(
        list["result"]["structuredContent"]["operations"][0]["status"],
        "done"
    );
    // A wait that runs out says so.
    let slow = a.call(
        "coogle",
        json!({"action": "start_call", "tool": "sleep", "arguments": {"ms": 5000}}),
    );
    let slow_op = slow["result"]["structuredContent"]["operation"]
        .as_str()
        .unwrap()
        .to_string();
    let waited = a.call(
        "coogle",
        json!({"action": "wait", "operation": slow_op, "wait_ms": 200}),
    );
    assert_eq!(
        waited["result"]["structuredContent"]["status"], "running",
        "{waited}"
    );
    let cancelled = a.call("coogle", json!({"action": "cancel", "operation": slow_op}));
    assert_eq!(
        cancelled["result"]["structuredContent"]["status"],
        "cancelled"
    );
    let after = a.call("coogle", json!({"action": "wait", "operation": slow_op}));
    assert_eq!(after["result"]["isError"], true);
    // The slot was freed: a normal call is served at once.
    let t = Instant::now();
    assert_eq!(text(&a.call("echo", json!({"text": "free"}))), "free");
    assert!(t.elapsed() < Duration::from_secs(1));
    let unknown = a.call("coogle", json!({"action": "wait", "operation": "op-nope"}));
    assert_eq!(unknown["result"]["isError"], true);
}

/// Regression (hardening review): `list_operations` listed every session's operations, and
/// then `wait` returned another session's result and `cancel` cancelled it; `status` showed
/// other sessions' clients; `restart` failed other sessions' calls without a word.
#[test]
fn operations_status_and_restart_respect_other_sessions() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let _d = env.daemon();
    let mut a = env.shim_of_claude_session("agent-a");
    let mut b = env.shim_of_claude_session("agent-b");
    let mut anonymous = env.shim();
    for s in [&mut a, &mut b, &mut anonymous] {
        s.initialize();
    }
    let started = a.call(
        "coogle",
        json!({"action": "start_call", "tool": "sleep", "arguments": {"ms": 1500, "text": "a's"}}),
    );
    let op = started["result"]["structuredContent"]["operation"]
        .as_str()
        .unwrap()
        .to_string();
    for s in [&mut b, &mut anonymous] {
        let list = s.call("coogle", json!({"action": "list_operations"}));
        assert_eq!(
            list["result"]["structuredContent"]["operations"],
            json!([]),
            "{list}"
        );
        let wait = s.call("coogle", json!({"action": "wait", "operation": op}));
        assert_eq!(wait["result"]["isError"], true, "{wait}");
        let cancel = s.call("coogle", json!({"action": "cancel", "operation": op}));
        assert_eq!(cancel["result"]["isError"], true, "{cancel}");
    }
    // B's status shows B, and the others only as counts.
    let status = b.call("coogle", json!({"action": "status"}));
    let structured = &status["result"]["structuredContent"];
    assert_eq!(
        structured["sessions"].as_array().unwrap().len(),
        1,
        "{status}"
    );
    assert_eq!(structured["otherSessions"], 2);
    assert!(!status.to_string().contains("agent-a"), "{status}");
    // A restart while A's operation runs is refused, and says why.
    let refused = b.call("coogle", json!({"action": "restart"}));
    assert_eq!(refused["result"]["isError"], true);
    assert!(text(&refused).contains("force"), "{refused}");
    let done = a.call(
        "coogle",
        json!({"action": "wait", "operation": op, "wait_ms": 10000}),
    );
    assert_eq!(text(&done), "a's", "A's call was not disturbed: {done}");
    // Forced, it restarts.
    let pid = text(&a.call("pid", json!({})));
    a.send(&json!({"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"sleep","arguments":{"ms":5000}}}));
    std::thread::sleep(Duration::from_millis(200));
    let forced = b.call("coogle", json!({"action": "restart", "force": true}));
    assert_ne!(forced["result"]["isError"], true, "{forced}");
    assert_ne!(text(&a.call("pid", json!({}))), pid);
}
