//! Each session is known by its client and pid (never by an id someone could present as its
//! own), with its own call counts and latency; several upstreams each run with their own child
//! and queue.

use crate::support;

use serde_json::{Value, json};
use support::*;

/// Each session's calls and errors, a result with `isError: true` among them, whatever era the
/// child speaks (a 2026-07-28 child's results are read for the handshake-era view anyway; a
/// handshake-era child's only when they may hold `isError`).
#[test]
fn status_knows_each_session() {
    for era in ["dual", "legacy"] {
        let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": era}}));
        let _d = env.daemon();
        let mut a = env.shim_with(&[]);
        a.initialize();
        a.call("echo", json!({"text": "x"}));
        a.call("fail", json!({}));
        a.call("echo", json!({"text": "isError"}));
        let status = control(&env.socket, "status", Value::Null).unwrap();
        let s = &status["upstreams"][0]["sessions"][0];
        assert_eq!(s["clientInfo"]["name"], "test-client");
        assert_eq!(s["clientInfo"]["version"], "9.9.9");
        assert_eq!(s["pid"].as_u64().unwrap(), a.child.id() as u64);
        assert_eq!(s["stats"]["calls"], 3, "{era}");
        assert_eq!(s["stats"]["errors"], 1, "{era}");
        assert!(s["stats"]["p50Ms"].as_f64().is_some());
        assert!(s["connectedAtMs"].as_u64().unwrap() > 1_700_000_000_000);
    }
}

/// The Claude Code session id travels in the hello (the daemon logs it) but `status` does not
/// show it: it used to be what a session's background operations belonged to, so showing it
/// let anyone claim them (see operation_ownership.rs).
#[test]
fn the_claude_code_session_id_is_not_shown_in_status() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut child = env
        .cmd()
        .arg("mcp")
        .env("CLAUDE_CODE_SESSION_ID", "claude-session-42")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let status = wait_status(
        &env.socket,
        "the session to appear",
        std::time::Duration::from_secs(10),
        |status| status["upstreams"][0]["sessions"][0]["pid"] == pid,
    );
    assert!(
        !status.to_string().contains("claude-session-42"),
        "{status}"
    );
    assert!(
        status["upstreams"][0]["sessions"][0]
            .get("claudeSessionId")
            .is_none(),
        "{status}"
    );
    drop(child.stdin.take());
    let _ = child.wait();
}

#[test]
fn several_upstreams_each_with_their_own_child() {
    let env = Env::new();
    let fake = fake_mcp();
    env.write_config(&json!({"servers": {
        "google": {"command": fake, "credentials": {"source": "none"}},
        "other": {"command": fake, "env": {"FAKE_MCP_EXTRA_TOOL": "special"}},
    }}));
    let _d = env.daemon();
    let mut g = env.shim();
    let mut o = env.shim_with(&["--server", "other"]);
    g.initialize();
    o.initialize();
    let names = |s: &mut Shim| -> Vec<String> {
        s.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!names(&mut g).contains(&"special".to_string()));
    assert!(names(&mut o).contains(&"special".to_string()));
    assert_ne!(
        text(&g.call("pid", json!({}))),
        text(&o.call("pid", json!({})))
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let ups = status["upstreams"].as_array().unwrap();
    assert_eq!(ups.len(), 2);
    assert_eq!(ups[0]["name"], "google");
    assert_eq!(ups[1]["name"], "other");
    let out = env.run(&["tools", "--server", "other"]);
    assert!(out.stdout.contains("special"), "{out}");
    // An upstream name the daemon does not have is a bad argument: exit 2.
    let bad = env.run(&["tools", "--server", "nope"]);
    assert_eq!(bad.status, Some(2), "{bad}");
    assert!(bad.stderr.contains("nope"), "{bad}");
}
