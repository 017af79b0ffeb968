//! The era probe is right the next time: a `server/discover` answer that comes after the probe
//! timeout still decides (and is written down), and "dies when probed" is remembered on disk.
//!
//! Regressions (third adversarial review): a dual-era child whose discover answer arrived just
//! after the probe timeout was recorded as handshake-era for good, across restarts, and modern
//! sessions were told it does not speak 2026-07-28; a child that dies when probed was probed
//! again after every daemon restart (only its era was saved), and the first session's call
//! failed each time.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// Claude Code's first line to every stdio server.
const PROBE: &str = r#"{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.328"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#;

fn era(env: &Env) -> Value {
    control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0]["era"].clone()
}

/// What the child received, one line per message (`FAKE_MCP_EVENT_LOG`).
fn methods(events: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').next().map(String::from))
        .collect()
}

#[test]
fn a_late_discover_answer_corrects_the_era_and_is_remembered() {
    // Both eras on one connection, and a discover answer a second past the probe timeout
    // (the call timeout, 2 s here, caps it).
    let (env, events) = Env::with_fake_events(json!({
        "callTimeoutMs": 2000,
        "env": {"FAKE_MCP_ERA": "unlocked", "FAKE_MCP_DISCOVER_DELAY_MS": "3000"},
    }));
    {
        let _d = env.daemon();
        let mut s = env.shim();
        s.initialize();
        assert_eq!(text(&s.call("echo", json!({"text": "a"}))), "a");
        assert_eq!(era(&env), "legacy", "initialize answered first");
        // The late answer arrives: the child speaks 2026-07-28 after all, and the sessions
        // hear that its tools may have changed.
        wait_for("the era to be corrected", Duration::from_secs(20), || {
            era(&env) == "modern"
        });
        s.notification("notifications/tools/list_changed", Duration::from_secs(10));
        assert_eq!(text(&s.call("echo", json!({"text": "b"}))), "b");
        // A 2026-07-28 session is now told the child's own DiscoverResult.
        let mut m = env.shim();
        m.send_raw(format!("{PROBE}\n").as_bytes());
        let d = m.response(&json!("probe"), Duration::from_secs(10));
        assert_eq!(
            d["result"]["supportedVersions"],
            json!(["2026-07-28"]),
            "{d}"
        );
        // Closed first: a shim still connected would start another daemon once this one stops.
        drop((s, m));
        let out = env.run(&["stop"]);
        assert_eq!(out.status, Some(0), "{out}");
    }
    // The next daemon knows: a new session's probe is answered at once from the disk, and the
    // child's slow answer is waited for, not taken over by `initialize`.
    std::fs::write(&events, "").unwrap();
    let _d = env.daemon();
    let mut m = env.shim();
    m.send_raw(format!("{PROBE}\n").as_bytes());
    let d = m.response(&json!("probe"), Duration::from_secs(5));
    assert_eq!(
        d["result"]["supportedVersions"],
        json!(["2026-07-28"]),
        "{d}"
    );
    env.wait_upstream_ready();
    assert_eq!(era(&env), "modern");
    let got = methods(&events);
    assert!(
        !got.iter().any(|m| m == "initialize"),
        "the child was taken for a handshake-era one again: {got:?}"
    );
}

#[test]
fn dies_when_probed_is_remembered_across_daemon_restarts() {
    let (env, events) = Env::with_fake_events(json!({"env": {"FAKE_MCP_EXIT_ON_DISCOVER": "1"}}));
    let pids = env.path("pids");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    cfg["servers"]["google"]["env"]["FAKE_MCP_PID_FILE"] = json!(pids);
    env.write_config(&cfg);
    let count = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    {
        let _d = env.daemon();
        // The first session's first call is answered: the child that died of the probe is
        // started again with `initialize` while the call waits.
        let mut s = env.shim();
        s.initialize();
        assert_eq!(text(&s.call("echo", json!({"text": "first"}))), "first");
        assert_eq!(count(&pids), 2, "one probe, one start with initialize");
        drop(s);
        let out = env.run(&["stop"]);
        assert_eq!(out.status, Some(0), "{out}");
    }
    // A new daemon: one start, no probe, and the first call works.
    std::fs::write(&pids, "").unwrap();
    std::fs::write(&events, "").unwrap();
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "again"}))), "again");
    assert_eq!(count(&pids), 1, "started once");
    let got = methods(&events);
    assert!(
        !got.iter().any(|m| m == "server/discover"),
        "probed again: {got:?}"
    );
}
