//! Calls are served round-robin across sessions: one session's burst cannot starve another's
//! single call, and `status` shows the queue per session.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;

#[test]
fn a_burst_from_one_session_does_not_delay_another_sessions_call() {
    let env = Env::with_fake(json!({"maxConcurrent": 1}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    const BURST: u64 = 60;
    const EACH_MS: u64 = 25;
    for i in 0..BURST {
        a.send(&json!({"jsonrpc":"2.0","id":1000 + i,"method":"tools/call","params":{"name":"sleep","arguments":{"ms": EACH_MS}}}));
    }
    // Let the burst reach the queue, and see it there.
    let mut queued = 0;
    wait_status(
        &env.socket,
        "A's burst to be queued",
        Duration::from_secs(5),
        |s| {
            let sessions = s["upstreams"][0]["sessions"].as_array().unwrap().clone();
            queued = sessions
                .iter()
                .map(|s| s["queued"].as_u64().unwrap())
                .max()
                .unwrap();
            queued >= BURST / 2
        },
    );
    let t = Instant::now();
    let r = b.call("echo", json!({"text": "my turn"}));
    let waited = t.elapsed();
    assert_eq!(text(&r), "my turn");
    // Served after at most a couple of A's calls, not after the ~half burst still queued
    // (which would take over a second).
    assert!(
        waited < Duration::from_millis(EACH_MS * 12),
        "B waited {waited:?} behind a queue of {queued}"
    );
    for i in 0..BURST {
        let r = a.response(&json!(1000 + i), Duration::from_secs(30));
        assert!(text(&r).starts_with("slept"), "{r}");
    }
}

#[test]
fn max_concurrent_runs_calls_in_parallel_on_one_child() {
    let env = Env::with_fake(json!({"maxConcurrent": 4}));
    let _d = env.daemon();
    let mut shims: Vec<Shim> = (0..4).map(|_| env.shim()).collect();
    for s in &mut shims {
        s.initialize();
    }
    let t = Instant::now();
    for s in &mut shims {
        s.send(&json!({"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"sleep","arguments":{"ms":600}}}));
    }
    let mut pids = std::collections::HashSet::new();
    for s in &mut shims {
        let r = s.response(&json!("p"), Duration::from_secs(10));
        assert_eq!(text(&r), "slept 600 ms");
        pids.insert(text(&s.call("pid", json!({}))));
    }
    // Four 600 ms calls at once on one child: about 600 ms, not 2.4 s.
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(pids.len(), 1, "one child");
}
