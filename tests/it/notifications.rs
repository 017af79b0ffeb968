//! Notifications from the child reach the right sessions: `list_changed` everyone, log
//! messages by each session's own level (and the child is asked for the most verbose level any
//! session wants), `resources/updated` only the subscribers; the child is subscribed once per
//! URI and unsubscribed when the last subscriber leaves. These are the handshake era's rules,
//! checked against a handshake-era child (`FAKE_MCP_ERA=legacy`); `eras.rs` checks what the
//! same sessions get from a 2026-07-28 child.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const QUIET: Duration = Duration::from_millis(300);

fn no_notification(s: &mut Shim, method: &str) {
    while let Some(m) = s.recv(QUIET) {
        assert_ne!(m["method"], method, "unexpected {method}: {m}");
    }
    assert!(
        !s.stray.iter().any(|m| m["method"] == method),
        "unexpected {method}: {:?}",
        s.stray
    );
}

#[test]
fn list_changed_reaches_every_session_and_log_levels_are_per_session() {
    let (env, events) = Env::with_fake_events(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();

    b.call("notify", json!({"kind": "tools"}));
    a.notification("notifications/tools/list_changed", Duration::from_secs(5));
    b.notification("notifications/tools/list_changed", Duration::from_secs(5));

    // A only wants errors; B has not said. An info message reaches B only.
    let r = a.request("logging/setLevel", json!({"level": "error"}));
    assert_eq!(r["result"], json!({}));
    b.call("notify", json!({"kind": "log"}));
    let m = b.notification("notifications/message", Duration::from_secs(5));
    assert_eq!(m["params"]["data"], "hello from fake");
    no_notification(&mut a, "notifications/message");

    // B asks for debug: the child is asked for debug (the most verbose wanted), A stays quiet.
    b.request("logging/setLevel", json!({"level": "debug"}));
    let set_levels = || count_events(&events, "logging/setLevel");
    wait_file(
        "the child to get setLevel error, then debug",
        &events,
        Duration::from_secs(5),
        |t| count_prefixed(t, "logging/setLevel") == 2,
    );
    // Setting a less verbose level than the child already has changes nothing upstream.
    a.request("logging/setLevel", json!({"level": "warning"}));
    b.call("echo", json!({"text": "sync"}));
    assert_eq!(set_levels(), 2);
    let bad = a.request("logging/setLevel", json!({"level": "loud"}));
    assert_eq!(bad["error"]["code"], -32602);
}

#[test]
fn resource_updates_reach_subscribers_only_and_the_child_is_subscribed_once() {
    let (env, events) = Env::with_fake_events(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    let mut c = env.shim();
    for s in [&mut a, &mut b, &mut c] {
        s.initialize();
    }
    for s in [&mut a, &mut b] {
        let r = s.request("resources/subscribe", json!({"uri": "fake://hello"}));
        assert_eq!(r["result"], json!({}), "{r}");
    }
    let count = |what: &str| count_events(&events, what);
    assert_eq!(
        count("resources/subscribe"),
        1,
        "the child hears the first subscribe only"
    );

    c.call("notify", json!({"kind": "resource"}));
    for s in [&mut a, &mut b] {
        let u = s.notification("notifications/resources/updated", Duration::from_secs(5));
        assert_eq!(u["params"]["uri"], "fake://hello");
    }
    no_notification(&mut c, "notifications/resources/updated");

    // A unsubscribes: B still subscribed, so the child is not told.
    a.request("resources/unsubscribe", json!({"uri": "fake://hello"}));
    assert_eq!(count("resources/unsubscribe"), 0);
    c.call("notify", json!({"kind": "resource"}));
    b.notification("notifications/resources/updated", Duration::from_secs(5));
    no_notification(&mut a, "notifications/resources/updated");

    // B, the last subscriber, disconnects: now the child is unsubscribed.
    drop(b);
    wait_file(
        "the child to be unsubscribed",
        &events,
        Duration::from_secs(5),
        |t| count_prefixed(t, "resources/unsubscribe") == 1,
    );
}

/// Regression (hardening review): about 1,500 log lines caused by another session's call, while
/// an agent paused reading for 3 s, disconnected that agent; its healthy call was cancelled
/// upstream and it was told "the daemon went away". Notifications are dropped for a session
/// that is not reading; its own answers are not, and it stays connected.
#[test]
fn a_paused_reader_keeps_its_call_while_a_noisy_child_logs() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}, "maxConcurrent": 2}));
    let _d = env.daemon();
    env.wait_upstream_ready();
    // A: a raw session that will stop reading.
    let stream = connect_patiently(&env.socket).unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    w.write_all(b"{\"coogle\":1,\"mode\":\"mcp\",\"version\":\"0.1.0\"}\n")
        .unwrap();
    r.read_line(&mut line).unwrap();
    let send = |w: &mut std::os::unix::net::UnixStream, v: Value| {
        w.write_all(format!("{v}\n").as_bytes()).unwrap()
    };
    send(
        &mut w,
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"a","version":"1"}}}),
    );
    line.clear();
    r.read_line(&mut line).unwrap();
    send(
        &mut w,
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    );
    send(
        &mut w,
        json!({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}),
    );
    // B makes the child log a burst while A reads nothing for 3 s.
    let mut b = env.shim();
    b.initialize();
    b.call("notify", json!({"kind": "log", "count": 3000}));
    std::thread::sleep(Duration::from_secs(3));
    // A reads again: its answer is there, after whatever logs it was sent.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut answer = None;
    while answer.is_none() && std::time::Instant::now() < deadline {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "A was disconnected");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_ne!(v["method"], "notifications/coogle/disconnected", "{v}");
        if v["id"] == "a" {
            answer = Some(v);
        }
    }
    assert_eq!(text(&answer.expect("A's answer")), "slept 1500 ms");
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let sessions = status["upstreams"][0]["sessions"].as_array().unwrap();
    let a = sessions
        .iter()
        .find(|s| s["clientInfo"]["name"] == "a")
        .expect("A is still connected");
    assert!(a["droppedNotifications"].as_u64().unwrap() > 0, "{a}");
    assert_eq!(status["upstreams"][0]["stats"]["cancelled"], 0);
}
