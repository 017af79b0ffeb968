//! A stuck call times out: the caller gets a readable error, the child is told to cancel (with
//! its own id for the call), and the queue moves on. A client's own cancel works the same way.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

#[test]
fn a_stuck_call_times_out_and_is_cancelled_upstream() {
    let (env, events) = Env::with_fake_events(json!({"callTimeoutMs": 500}));
    let _daemon = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let t = Instant::now();
    let r = s.call("sleep", json!({"ms": 20_000}));
    let waited = t.elapsed();
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("timed out after 0.5 s"), "{r}");

    // The child received a cancel naming the id it saw for the call.
    wait_file(
        "the cancel to reach the child",
        &events,
        Duration::from_secs(5),
        |t| count_prefixed(t, "notifications/cancelled") > 0,
    );
    let lines = read_lines(&events);
    let call_id = lines
        .iter()
        .find(|l| l.starts_with("tools/call "))
        .map(|l| l.split(' ').nth(1).unwrap().to_string())
        .unwrap();
    let cancelled = lines
        .iter()
        .find(|l| l.starts_with("notifications/cancelled"))
        .unwrap();
    assert_eq!(cancelled, &format!("notifications/cancelled {call_id}"));

    // The slot is free: the next call is served at once.
    let t = Instant::now();
    assert_eq!(text(&s.call("echo", json!({"text": "next"}))), "next");
    assert!(t.elapsed() < Duration::from_secs(1));
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["stats"]["timeouts"], 1);
}

#[test]
fn client_cancel_frees_the_slot_and_reaches_the_child() {
    let (env, events) = Env::with_fake_events(json!({}));
    let _daemon = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    a.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":20000}}}));
    // B's call waits behind A's (maxConcurrent 1) ...
    std::thread::sleep(Duration::from_millis(100));
    b.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}));
    std::thread::sleep(Duration::from_millis(100));
    // ... until A cancels.
    let t = Instant::now();
    a.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}));
    let rb = b.response(&json!(1), Duration::from_secs(5));
    assert_eq!(text(&rb), "b");
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "B's call is served within 100 ms of the cancel: {:?}",
        t.elapsed()
    );
    wait_file(
        "the cancel to reach the child",
        &events,
        Duration::from_secs(5),
        |t| count_prefixed(t, "notifications/cancelled") > 0,
    );
    // A gets no answer for the cancelled request.
    assert!(a.recv(Duration::from_millis(300)).is_none());
}

#[test]
fn a_disconnecting_session_has_its_calls_cancelled() {
    let (env, events) = Env::with_fake_events(json!({}));
    let _daemon = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    a.send(&json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":20000}}}));
    std::thread::sleep(Duration::from_millis(100));
    drop(a);
    let t = Instant::now();
    assert_eq!(text(&b.call("echo", json!({"text": "b"}))), "b");
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(count_events(&events, "notifications/cancelled") > 0);
}
