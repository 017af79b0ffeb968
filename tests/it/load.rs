//! Load, bounded in count and time: 16 concurrent sessions × 500 calls each, mixed fast and slow
//! tools, at maxConcurrent 1 and 4: every answer reaches its own caller, none is lost, none
//! arrives twice.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn run_load(max_concurrent: u64) {
    let env = Env::with_fake(json!({"maxConcurrent": max_concurrent}));
    let _d = env.daemon();
    const SESSIONS: usize = 16;
    const CALLS: usize = 500;
    const WINDOW: usize = 8;
    let handles: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let mut shim = env.shim();
            std::thread::spawn(move || {
                shim.initialize();
                let mut sent = 0;
                let mut answered = HashSet::new();
                let mut mismatches = 0;
                // Keep up to WINDOW calls in flight per session, pipelined.
                let send = |shim: &mut Shim, c: usize| {
                    let token = format!("s{s}c{c}");
                    let (tool, args) = if c.is_multiple_of(50) {
                        ("sleep", json!({"ms": 2, "text": token}))
                    } else {
                        ("echo", json!({"text": token}))
                    };
                    shim.send(&json!({"jsonrpc":"2.0","id":c,"method":"tools/call","params":{"name":tool,"arguments":args}}));
                };
                while sent < WINDOW.min(CALLS) {
                    send(&mut shim, sent);
                    sent += 1;
                }
                while answered.len() < CALLS {
                    let m = shim
                        .recv(Duration::from_secs(60))
                        .unwrap_or_else(|| panic!("session {s}: lost answers after {}", answered.len()));
                    let Some(id) = m["id"].as_u64() else { continue };
                    let id = id as usize;
                    assert!(answered.insert(id), "session {s}: answer {id} arrived twice");
                    if m["result"]["content"][0]["text"] != format!("s{s}c{id}") {
                        mismatches += 1;
                    }
                    if sent < CALLS {
                        send(&mut shim, sent);
                        sent += 1;
                    }
                }
                mismatches
            })
        })
        .collect();
    let mismatches: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(mismatches, 0);
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let stats = &status["upstreams"][0]["stats"];
    assert_eq!(stats["calls"], json!(SESSIONS * CALLS));
    assert_eq!(stats["errors"], 0);
    assert_eq!(status["upstreams"][0]["restarts"], 0);
}

#[test]
fn sixteen_sessions_by_500_calls_at_max_concurrent_1() {
    run_load(1);
}

#[test]
fn sixteen_sessions_by_500_calls_at_max_concurrent_4() {
    run_load(4);
}
