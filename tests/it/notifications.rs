//! Notifications from the child reach the right sessions: `list_changed` everyone, log
//! messages by each session's own level (and the child is asked for the most verbose level any
//! session wants), `resources/updated` only the subscribers; the child is subscribed once per
//! URI and unsubscribed when the last subscriber leaves. These are the handshake era's rules,
//! checked against a handshake-era child (`FAKE_MCP_ERA=legacy`); `eras.rs` checks what the
//! same sessions get from a 2026-07-28 child.

use crate::support;

use std::time::Duration;

use serde_json::json;
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
    wait_for(
        "the child to get setLevel error, then debug",
        Duration::from_secs(5),
        || set_levels() == 2,
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
    wait_for(
        "the child to be unsubscribed",
        Duration::from_secs(5),
        || count("resources/unsubscribe") == 1,
    );
}
