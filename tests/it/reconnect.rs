//! Claude Code never restarts a stdio server, so the shim must outlive the daemon: it fails
//! only the calls in flight, reconnects (starting a daemon), replays the handshake, and says
//! `list_changed` only when the tools really changed.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::*;

fn kill_daemon(env: &Env, d: &mut Daemon) {
    d.signal_and_wait(libc::SIGKILL);
    // A stale socket is left behind, as after a crash.
    assert!(env.socket.exists());
}

#[test]
fn after_a_daemon_crash_the_session_goes_on_without_a_spurious_list_changed() {
    let env = Env::with_fake(json!({}));
    let mut d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    s.request("tools/list", json!({}));
    kill_daemon(&env, &mut d);
    assert_eq!(
        text(&s.call("echo", json!({"text": "still here"}))),
        "still here"
    );
    // Same tools: nothing to announce.
    while let Some(m) = s.recv(Duration::from_millis(500)) {
        assert_ne!(m["method"], "notifications/tools/list_changed", "{m}");
    }
    assert!(
        s.stray
            .iter()
            .all(|m| m["method"] != "notifications/tools/list_changed")
    );
    // The replayed initialize was answered to the shim, not to the client.
    assert!(
        s.stray.iter().all(|m| m.get("result").is_none()),
        "{:?}",
        s.stray
    );
    // Closed first: a shim still connected would start a new daemon once this one is gone.
    drop(s);
    let _ = env.run(&["stop"]);
}

#[test]
fn when_the_tools_changed_across_the_restart_the_client_is_told() {
    let env = Env::with_fake(json!({}));
    let mut d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    s.request("tools/list", json!({}));
    env.write_fake_config(json!({"env": {"FAKE_MCP_EXTRA_TOOL": "brand_new"}}));
    kill_daemon(&env, &mut d);
    s.notification("notifications/tools/list_changed", Duration::from_secs(20));
    let listed = s.request("tools/list", json!({}));
    assert!(listed.to_string().contains("brand_new"), "{listed}");
    // Closed first: a shim still connected would start a new daemon once this one is gone.
    drop(s);
    let _ = env.run(&["stop"]);
}

#[test]
fn requests_sent_while_the_daemon_is_away_are_delivered_after_the_reconnect() {
    let env = Env::with_fake(json!({}));
    let mut d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    kill_daemon(&env, &mut d);
    // Sent at once, while the shim is still reconnecting.
    for i in 0..5 {
        s.send(&json!({"jsonrpc":"2.0","id":format!("q{i}"),"method":"tools/call","params":{"name":"echo","arguments":{"text": format!("queued {i}")}}}));
    }
    for i in 0..5 {
        let r = s.response(&json!(format!("q{i}")), Duration::from_secs(20));
        assert_eq!(text(&r), format!("queued {i}"));
    }
    // Closed first: a shim still connected would start a new daemon once this one is gone.
    drop(s);
    let _ = env.run(&["stop"]);
}
