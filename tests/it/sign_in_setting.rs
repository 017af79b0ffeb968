//! Sign-ins are read only where a server's own settings say how it asks (`signIn`; by default
//! workspace-mcp's Google sign-in, for the `google` server and any server running
//! workspace-mcp): any other server's answers pass as they came, even one that happens to say
//! "Authorization URL:", and a server that says how it asks gets its sign-ins read its way.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const URL: &str = "https://accounts.example.org/authorize?state=abc123";

/// A daemon serving the fake server as `name`, configured with `extra`; two sessions of it; the
/// fake server's event log.
fn two_sessions(name: &str, extra: Value) -> (Env, Daemon, std::path::PathBuf, Shim, Shim) {
    let env = Env::new();
    let events = env.path("events.log");
    let mut server = json!({
        "command": fake_mcp(),
        "credentials": {"source": "none"},
        "env": {"FAKE_MCP_EVENT_LOG": events},
    });
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            server[k] = v;
        }
    }
    env.write_config(&json!({"servers": {name: server}}));
    let daemon = env.daemon();
    let mut a = env.shim_with(&["--server", name]);
    let mut b = env.shim_with(&["--server", name]);
    a.initialize();
    b.initialize();
    (env, daemon, events, a, b)
}

/// Regression (issue 19): the router read every server's answers for workspace-mcp's sign-in,
/// so a notes server quoting such a line had its waiting calls answered with the URL, each
/// session told to sign in, and `status` showing a sign-in nobody asked for.
#[test]
fn a_server_that_does_not_sign_in_is_never_taken_for_one() {
    let (env, _d, events, mut a, mut b) = two_sessions("notes", json!({}));
    let quoted = format!("From the setup guide:\n   Authorization URL: {URL}\nthen retry.");
    a.send(&json!({"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"sleep","arguments":{"ms":400,"text":quoted}}}));
    std::thread::sleep(Duration::from_millis(100));
    // Two calls wait behind it: the child answers them, as any call.
    b.send(&json!({"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"echo","arguments":{"text":"b1"}}}));
    b.send(&json!({"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"echo","arguments":{"text":"b2"}}}));

    let first = a.response(&json!("first"), Duration::from_secs(10));
    assert_eq!(
        text(&first),
        quoted,
        "the answer passes as it came: {first}"
    );
    for id in ["b1", "b2"] {
        let r = b.response(&json!(id), Duration::from_secs(10));
        assert_eq!(text(&r), id, "answered by the child: {r}");
        assert_ne!(r["result"]["isError"], true, "{r}");
    }
    assert_eq!(
        count_events(&events, "tools/call"),
        3,
        "every call reached the child"
    );

    // No session was told to sign in: a round trip after the answers, and nothing before it.
    for s in [&mut a, &mut b] {
        s.request("ping", json!({}));
        let told: Vec<&Value> = s
            .stray
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .collect();
        assert!(told.is_empty(), "{told:?}");
    }
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["signIn"], json!([]), "{status}");
    let out = env.run(&["status"]);
    assert!(!out.stdout.contains("sign-in"), "{out}");
}

/// A server that says how it asks (its own marker, its own account argument) gets its sign-ins
/// read that way, whatever its name.
#[test]
fn a_server_that_says_how_it_asks_gets_its_sign_ins_read() {
    let (env, _d, events, mut a, mut b) = two_sessions(
        "crm",
        json!({"signIn": {"urlMarker": "Log in at", "accountArgument": "workspace"}}),
    );
    let ask = format!("Not signed in. Log in at {URL} and retry.");
    a.send(&json!({"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"sleep","arguments":{"ms":400,"text":ask,"workspace":"acme"}}}));
    std::thread::sleep(Duration::from_millis(100));
    // One waits for the same account, one for another.
    b.send(&json!({"jsonrpc":"2.0","id":"same","method":"tools/call","params":{"name":"echo","arguments":{"text":"same","workspace":"acme"}}}));
    b.send(&json!({"jsonrpc":"2.0","id":"other","method":"tools/call","params":{"name":"echo","arguments":{"text":"other","workspace":"globex"}}}));

    a.response(&json!("first"), Duration::from_secs(10));
    let same = b.response(&json!("same"), Duration::from_secs(10));
    assert_eq!(same["result"]["isError"], true, "{same}");
    assert!(text(&same).contains(URL), "{same}");
    let other = b.response(&json!("other"), Duration::from_secs(10));
    assert_eq!(
        text(&other),
        "other",
        "another account goes through: {other}"
    );
    assert_eq!(count_events(&events, "tools/call"), 2);

    for s in [&mut a, &mut b] {
        let m = s.notification("notifications/message", Duration::from_secs(5));
        assert!(m["params"]["data"].as_str().unwrap().contains(URL), "{m}");
    }
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let sign_in = &status["upstreams"][0]["signIn"][0];
    assert_eq!(sign_in["account"], "acme", "{status}");
    assert_eq!(sign_in["url"], URL, "{status}");
}
