//! When the upstream asks for a Google sign-in (workspace-mcp answers with an authorization
//! URL), `status` shows it, every session is told once, and the calls that were already waiting
//! get the same URL instead of each starting a new sign-in flow. A later call goes through, and
//! its success clears the state.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// The OAuth client id the server is configured with (a configured value, kept out of the log)
/// is in the URL: the URL still reaches sessions whole (regression: the waiting calls got it
/// with the id redacted, a link that signs nobody in).
const CLIENT_ID: &str = "123456789012-abcdefghij.apps.googleusercontent.com";
const URL: &str = "https://accounts.google.com/o/oauth2/auth?client_id=123456789012-abcdefghij.apps.googleusercontent.com&state=abc123";

#[test]
fn a_sign_in_request_is_shown_announced_and_not_repeated() {
    let (env, events) =
        Env::with_fake_events(json!({"env": {"GOOGLE_OAUTH_CLIENT_ID": CLIENT_ID}}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    let auth_text = format!(
        "**ACTION REQUIRED: Google Authentication Needed for Google Calendar**\n\n1. Open this URL:\n   Authorization URL: {URL}\n2. Retry."
    );
    a.send(&json!({"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"sleep","arguments":{"ms":400,"text":auth_text}}}));
    std::thread::sleep(Duration::from_millis(100));
    // Two calls wait behind it.
    b.send(&json!({"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"echo","arguments":{"text":"b1"}}}));
    b.send(&json!({"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"echo","arguments":{"text":"b2"}}}));

    let first = a.response(&json!("first"), Duration::from_secs(10));
    assert!(text(&first).contains(URL));
    for id in ["b1", "b2"] {
        let r = b.response(&json!(id), Duration::from_secs(10));
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(text(&r).contains(URL), "{r}");
    }
    let forwarded = || count_events(&events, "tools/call");
    assert_eq!(forwarded(), 1, "the waiting calls must not reach the child");

    // Every session is told, once.
    for s in [&mut a, &mut b] {
        let m = s.notification("notifications/message", Duration::from_secs(5));
        assert_eq!(m["params"]["level"], "warning");
        assert!(m["params"]["data"].as_str().unwrap().contains(URL));
    }
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["signIn"][0]["url"], URL);
    let out = env.run(&["status"]);
    assert!(
        out.stdout.contains(&format!("sign-in required: {URL}")),
        "{out}"
    );

    // A call made afterwards goes through (the user may have signed in), and clears it.
    assert_eq!(
        text(&b.call("echo", json!({"text": "signed in"}))),
        "signed in"
    );
    assert_eq!(forwarded(), 2);
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["signIn"], json!([]));
}
