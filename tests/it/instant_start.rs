//! A new session gets `initialize` and `tools/list` at once from what the daemon remembered of
//! the upstream, without waking the child at all; the first request the cache cannot answer
//! starts it, and when the live list differs, the session is told `list_changed`. (Lists the
//! child marks `cacheScope: "private"` are never kept: see `cache_files.rs`.)

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

fn tool_names(r: &Value) -> Vec<String> {
    r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn sessions_are_answered_from_the_cache_while_a_slow_child_starts() {
    let env = Env::new();
    // First run: the daemon learns the upstream's answers.
    env.write_fake_config(json!({"env": {
        "FAKE_MCP_EXTRA_TOOL": "first",
        "FAKE_MCP_START_DELAY_MS": "0",
        "FAKE_MCP_CACHE_SCOPE": "public",
    }}));
    {
        let mut d = env.daemon();
        env.wait_upstream_ready();
        // The tool list (and with it the cache) arrives just after the child is ready.
        wait_status(&env.socket, "the tool list", Duration::from_secs(10), |s| {
            s["upstreams"][0]["tools"].is_u64()
        });
        let (code, _) = d.signal_and_wait(libc::SIGTERM);
        assert_eq!(code, Some(0));
    }
    // Second run: the child now takes 3 s to start and offers a different extra tool.
    env.write_fake_config(json!({"env": {
        "FAKE_MCP_EXTRA_TOOL": "second",
        "FAKE_MCP_START_DELAY_MS": "3000",
        "FAKE_MCP_CACHE_SCOPE": "public",
    }}));
    let _d = env.daemon();
    let mut s = env.shim();
    let t = Instant::now();
    let init = s.initialize();
    let listed = s.request("tools/list", json!({}));
    let took = t.elapsed();
    assert_eq!(init["serverInfo"]["name"], "fake-mcp");
    assert!(
        tool_names(&listed).contains(&"first".to_string()),
        "{listed}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?} with a 3 s child start"
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(
        status["upstreams"][0]["state"], "idle",
        "the child was not woken"
    );

    // A call wakes it (3 s); the live list differs: the session is told, and the next list is
    // the live one.
    s.send(&json!({"jsonrpc":"2.0","id":"wake","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}));
    s.notification("notifications/tools/list_changed", Duration::from_secs(15));
    let live = s.request("tools/list", json!({}));
    assert!(tool_names(&live).contains(&"second".to_string()), "{live}");
    assert!(!tool_names(&live).contains(&"first".to_string()), "{live}");
}
