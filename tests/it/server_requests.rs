//! Requests from the server to the client (roots, sampling, elicitation) reach the session whose
//! call caused them, with the daemon's own id, and its answer goes back to the child under the
//! child's id; when no session can take one, the child gets an error at once, never silence.
//! Such requests exist only in the handshake era, so the child here is a handshake-era one
//! (`FAKE_MCP_ERA=legacy`); `eras.rs` checks the 2026-07-28 form (`input_required`).

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

fn init(s: &mut Shim, capabilities: Value) {
    s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s.request("ping", json!({}));
}

#[test]
fn a_server_request_reaches_the_calling_session_and_its_answer_the_child() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut other = env.shim();
    init(&mut a, json!({"roots": {}}));
    init(&mut other, json!({"roots": {}}));
    a.send(&json!({"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask","arguments":{"method":"roots/list"}}}));
    let req = a.notification("roots/list", Duration::from_secs(10));
    let id = req["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("coogle-s"), "{req}");
    a.send(
        &json!({"jsonrpc":"2.0","id": id,"result":{"roots":[{"uri":"file:///work/a","name":"a"}]}}),
    );
    let answer = text(&a.response(&json!("ask"), Duration::from_secs(10)));
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        answer["id"], "fake-ask-1",
        "the child sees its own id again"
    );
    assert_eq!(answer["result"]["roots"][0]["uri"], "file:///work/a");
    assert!(
        other.recv(Duration::from_millis(200)).is_none(),
        "the other session saw nothing"
    );
}

#[test]
fn a_request_no_session_can_take_is_refused_at_once() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let _d = env.daemon();
    let mut s = env.shim();
    init(&mut s, json!({"roots": {}}));
    let t = Instant::now();
    let r = s.call(
        "ask",
        json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}),
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let answer: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sampling"),
        "{answer}"
    );
    assert!(
        s.recv(Duration::from_millis(200)).is_none(),
        "the client was not asked"
    );
}

/// Regression (hardening review): B's call timed out (or B cancelled it) while the child went
/// on with it; the elicitation the child then sent for it ("secret of caller B") went to A, the
/// one session still busy, and A's answer went back as B's. It must reach no other session.
#[test]
fn a_timed_out_or_cancelled_calls_request_never_reaches_another_session() {
    for cancel in [false, true] {
        let env = Env::with_fake(
            json!({"env": {"FAKE_MCP_ERA": "legacy"}, "maxConcurrent": 2, "callTimeoutMs": 1000}),
        );
        let _d = env.daemon();
        let mut a = env.shim();
        let mut b = env.shim();
        init(&mut a, json!({"elicitation": {}}));
        init(&mut b, json!({"elicitation": {}}));
        b.send(&json!({"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"ask",
            "arguments":{"method":"elicitation/create","delayMs":1300,
                         "params":{"message":"secret of caller B","requestedSchema":{"type":"object"}}}}}));
        if cancel {
            std::thread::sleep(Duration::from_millis(300));
            b.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b"}}));
        } else {
            let timed_out = b.response(&json!("b"), Duration::from_secs(5));
            assert!(text(&timed_out).contains("timed out"), "{timed_out}");
        }
        // A is busy when the child, still on B's call, asks for B's secret.
        a.send(&json!({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sleep","arguments":{"ms":900}}}));
        let until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < until {
            if let Some(m) = a.recv(Duration::from_millis(100)) {
                assert_ne!(
                    m["method"], "elicitation/create",
                    "A was asked for B's secret: {m}"
                );
            }
        }
        let leaked = |s: &Shim| {
            s.stray
                .iter()
                .any(|m| m.to_string().contains("secret of caller B"))
        };
        assert!(!leaked(&a), "cancel: {cancel}");
    }
}
