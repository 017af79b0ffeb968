//! What waits for a child is counted whatever it waits for: `status` shows, per session and for
//! the upstream, the requests not with the child yet (waiting for its era on a first start, for
//! the child to be ready, for a free slot), and they all go once answered.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// The upstream's waiting count, and each given shim's, found by its pid: the daemon numbers
/// sessions in the order their hellos land, which two shims started together do not fix.
fn waiting(status: &Value, shims: &[u32]) -> (u64, Vec<u64>) {
    let u = &status["upstreams"][0];
    let sessions = u["sessions"].as_array().unwrap();
    let of = |pid: u32| {
        sessions
            .iter()
            .find(|s| s["pid"].as_u64() == Some(u64::from(pid)))
            .map_or(u64::MAX, |s| s["waiting"].as_u64().unwrap())
    };
    (
        u["waiting"].as_u64().unwrap(),
        shims.iter().map(|p| of(*p)).collect(),
    )
}

/// Regression: `status` counted only calls queued for a slot, so requests held for a starting
/// child (and the hand-over's "nothing in flight" check, which read the same count) missed
/// them.
#[test]
fn status_counts_every_waiting_request_per_session_and_upstream() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_START_DELAY_MS": "3000"}}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    let pids = [a.child.id(), b.child.id()];
    // Nothing is cached: everything waits for the child's era.
    a.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "a", "version": "1"}}}));
    a.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "x"}}}));
    b.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {}}));
    let mut last = Value::Null;
    wait_for("three waiting requests", Duration::from_secs(20), || {
        last = control(&env.socket, "status", Value::Null).unwrap();
        waiting(&last, &pids) == (3, vec![2, 1])
    });
    assert_eq!(last["upstreams"][0]["requestsInFlight"], 0, "{last:#}");
    for id in [1, 2] {
        let r = a.response(&json!(id), Duration::from_secs(30));
        assert!(r.get("result").is_some(), "{r}");
    }
    let r = b.response(&json!(1), Duration::from_secs(30));
    assert!(r.get("result").is_some(), "{r}");
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(waiting(&status, &pids), (0, vec![0, 0]), "{status:#}");
    let text = env.run(&["status"]);
    assert!(text.stdout.contains("waiting 0"), "{text}");
}
