//! The search server end to end: with a Gemini API key configured, the daemon adds the `search`
//! upstream (`coogle search-server`, started by the daemon like any child) and a Claude Code
//! style session (`coogle mcp --server search`, the real binary) gets a grounded answer from the
//! mock Gemini; two sessions share the one child. Without a key there is no `search` upstream.

use crate::support;

use serde_json::{Value, json};
use support::gemini_mock::{GeminiMock, Reply};
use support::{Env, fake_mcp};

const KEY: &str = "AIzaSyD-end-to-end-test-0123456789abcd";

fn config(env: &Env, search: Value) {
    env.write_config(&json!({
        "servers": {"google": {"command": fake_mcp(), "credentials": {"source": "none"}}},
        "search": search
    }));
}

#[test]
fn ask_google_through_the_daemon_and_the_shim() {
    let mock = GeminiMock::start(vec![Reply::answer(
        "coogle shares one MCP server among sessions.",
        Some(json!({
            "groundingChunks": [{"web": {"uri": "https://coogle.example/", "title": "coogle"}}],
            "webSearchQueries": ["what is coogle"]
        })),
    )]);
    let env = Env::new();
    config(
        &env,
        json!({"apiKey": KEY, "apiBaseUrl": mock.base, "retryBaseMs": 10}),
    );

    let mut a = env.shim_with(&["--server", "search"]);
    let init = a.initialize();
    assert_eq!(init["serverInfo"]["name"], "coogle-search", "{init}");
    let tools = a.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"ask_google"), "{names:?}");

    let r = a.call("ask_google", json!({"question": "What is coogle?"}));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(
        support::text(&r),
        "coogle shares one MCP server among sessions.\n\n---\n\n**Sources:**\n1. [coogle](https://coogle.example/)\n\n**Search queries performed:**\n1. what is coogle"
    );
    assert_eq!(mock.seen()[0].api_key.as_deref(), Some(KEY));

    // A second session shares the same search-server child.
    let mut b = env.shim_with(&["--server", "search"]);
    b.initialize();
    let r = b.call("ask_google", json!({"question": "again"}));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let status = env.run(&["status", "--json"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let search = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "search")
        .unwrap_or_else(|| panic!("no search upstream: {status}"));
    assert_eq!(search["restarts"], 0, "{search}");
    assert_eq!(mock.seen().len(), 2);

    // The google upstream is there too, untouched.
    let mut g = env.shim();
    g.initialize();
    let r = g.call("echo", json!({"text": "hi"}));
    assert_eq!(support::text(&r), "hi");
    drop((a, b, g));
    let log = std::fs::read_to_string(&env.log).unwrap_or_default();
    assert!(!log.contains(KEY), "the key reached the daemon log");
}

#[test]
fn without_a_key_there_is_no_search_upstream() {
    let env = Env::new();
    config(&env, json!({"apiBaseUrl": "http://127.0.0.1:9/v1beta"}));
    let _d = env.daemon();
    env.wait_ready();
    let status = env.run(&["status", "--json"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    let names: Vec<&str> = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(names, ["google"]);
    // A session that asks for it is told clearly.
    let out = env.run(&["tools", "--server", "search"]);
    assert_ne!(out.status, Some(0), "{out}");
    assert!(out.stderr.contains("no upstream named \"search\""), "{out}");
}
