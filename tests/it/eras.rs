//! Both protocol eras through one daemon: 2026-07-28 sessions (Claude Code's own
//! `server/discover` probe first) and handshake-era sessions (`initialize`) share one child of
//! either era, and each sees what it would see talking to that child directly.
//!
//! The child is the fake server in each era (`FAKE_MCP_ERA`), plus real ones where they are
//! installed: mcp-server-time (dual-era, Python SDK), server-everything (handshake-era only) and
//! workspace-mcp (dual-era, FastMCP). The clients are raw lines (Claude Code's exact probe), the
//! shim's own handshake, the official Python SDK in each of its modes, and Claude Code itself.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// The first line Claude Code 2.1.328 writes to every stdio server, byte for byte.
const CLAUDE_PROBE: &str = r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.328"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}}"#;

fn claude_meta() -> Value {
    let probe: Value = serde_json::from_str(CLAUDE_PROBE).unwrap();
    probe["params"]["_meta"].clone()
}

/// A 2026-07-28 envelope for `client` with `caps`.
fn meta(client: &str, caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

/// A 2026-07-28 session: no handshake, every request with its envelope.
struct Modern {
    shim: Shim,
    meta: Value,
}

impl Modern {
    fn new(env: &Env, client: &str, caps: Value) -> Modern {
        Modern {
            shim: env.shim(),
            meta: meta(client, caps),
        }
    }

    fn send(&mut self, id: Value, method: &str, mut params: Value) {
        let mut m = self.meta.clone();
        if let Some(extra) = params.get("_meta").and_then(|e| e.as_object()) {
            for (k, v) in extra {
                m[k] = v.clone();
            }
        }
        params["_meta"] = m;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.shim.send(&msg);
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(id.clone(), method, params);
        self.shim.response(&id, Duration::from_secs(20))
    }

    fn call(&mut self, id: Value, tool: &str, args: Value, extra_meta: Value) -> Value {
        let params = json!({"name": tool, "arguments": args, "_meta": extra_meta});
        self.request(id, "tools/call", params)
    }
}

fn tool_names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

fn upstream_state(env: &Env) -> Value {
    control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0].clone()
}

#[test]
fn claude_codes_probe_and_tool_list_are_answered_while_a_slow_child_starts() {
    let env = Env::new();
    // A server whose list is the same for everyone (`cacheScope: "public"`): a private one is
    // never kept (see `cache_files.rs`).
    let slow = |ms: &str| json!({"env": {"FAKE_MCP_START_DELAY_MS": ms, "FAKE_MCP_CACHE_SCOPE": "public"}});
    // A first run teaches the daemon the child's answers (kept on disk).
    env.write_fake_config(slow("0"));
    let mut first = env.shim();
    first.send_raw(format!("{CLAUDE_PROBE}\n").as_bytes());
    let d1 = first.response(&json!("server-discover-probe-1"), Duration::from_secs(20));
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": claude_meta()}});
    first.send(&list);
    let tools1 = first.response(&json!(1), Duration::from_secs(20));
    drop(first);
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");

    // Now the child takes seconds to start: a cold daemon answers from what it learned.
    env.write_fake_config(slow("4000"));
    let mut s = env.shim();
    let started = Instant::now();
    s.send_raw(format!("{CLAUDE_PROBE}\n").as_bytes());
    let d2 = s.response(&json!("server-discover-probe-1"), Duration::from_secs(20));
    s.send(&list);
    let tools2 = s.response(&json!(1), Duration::from_secs(20));
    let answered = started.elapsed();
    let state = upstream_state(&env);
    assert_ne!(
        state["state"], "ready",
        "answered without the child: {state}"
    );
    assert!(answered < Duration::from_secs(4), "{answered:?}");
    assert_eq!(d2["result"], d1["result"], "the child's own DiscoverResult");
    assert_eq!(d2["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(tool_names(&tools2["result"]), tool_names(&tools1["result"]));
    // Once the child is up, the list it gives is the one served: no list_changed.
    env.wait_upstream_ready();
    assert!(s.recv(Duration::from_millis(500)).is_none());
}

#[test]
fn a_handshake_only_child_turns_a_probe_back_at_once() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let _d = env.daemon();
    let ready = env.wait_upstream_ready();
    assert_eq!(ready["upstreams"][0]["era"], "legacy", "{ready}");
    assert_eq!(ready["upstreams"][0]["capabilitiesFrom"], "config");
    let mut s = env.shim();
    s.send_raw(format!("{CLAUDE_PROBE}\n").as_bytes());
    let probe = s.response(&json!("server-discover-probe-1"), Duration::from_secs(5));
    assert_eq!(
        probe["error"],
        json!({"code": -32601, "message": "Method not found"}),
        "the child's own answer: {probe}"
    );
    // A client that insists on 2026-07-28 is told which versions the child speaks.
    let mut m = Modern::new(&env, "modern-only", json!({}));
    let e = m.request(json!(2), "tools/list", json!({}));
    assert_eq!(e["error"]["code"], -32022, "{e}");
    assert_eq!(e["error"]["data"]["supported"], json!(["2025-11-25"]));
    // The dual-era client falls back, as Claude Code does.
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "legacy"}))), "legacy");
}

#[test]
fn both_eras_share_one_child_each_getting_only_its_own() {
    let (env, events) = Env::with_fake_events(json!({"maxConcurrent": 4}));
    let pids = env.path("pids");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    cfg["servers"]["google"]["env"]["FAKE_MCP_PID_FILE"] = json!(pids);
    env.write_config(&cfg);
    let _d = env.daemon();
    let mut legacy = env.shim();
    legacy.initialize();
    let mut modern = Modern::new(&env, "m", json!({}));

    // The same id and the same progress token from both, at once.
    let token = json!({"progressToken": "tok"});
    modern.send(
        json!(7),
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 3, "delayMs": 20}, "_meta": token}),
    );
    legacy.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "progress", "arguments": {"steps": 3, "delayMs": 20}, "_meta": token}}));
    for s in [&mut modern.shim, &mut legacy] {
        let done = s.response(&json!(7), Duration::from_secs(20));
        assert!(done.get("result").is_some(), "{done}");
        let progress: Vec<&Value> = s
            .stray
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(
            progress.len(),
            3,
            "each session its own three: {:?}",
            s.stray
        );
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == "tok")
        );
    }
    assert_eq!(read_lines(&pids).len(), 1, "one child for both eras");

    // A cancel from each era reaches the child under the daemon's ids; nobody gets an answer.
    modern.send(
        json!("s"),
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 10000}}),
    );
    legacy.send(&json!({"jsonrpc": "2.0", "id": "s", "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 10000}}}));
    wait_file(
        "both sleeps at the child",
        &events,
        Duration::from_secs(10),
        |t| count_prefixed(t, "tools/call") >= 4,
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}});
    modern.shim.send(&cancel);
    legacy.send(&cancel);
    wait_file(
        "both cancels at the child",
        &events,
        Duration::from_secs(10),
        |t| count_prefixed(t, "notifications/cancelled") == 2,
    );
    let cancelled: Vec<String> = read_lines(&events)
        .into_iter()
        .filter(|l| l.starts_with("notifications/cancelled"))
        .collect();
    assert_ne!(cancelled[0], cancelled[1], "distinct ids upstream");
    assert!(modern.shim.recv(Duration::from_millis(300)).is_none());
    assert!(legacy.recv(Duration::from_millis(300)).is_none());
}

#[test]
fn an_elicitation_reaches_only_the_session_that_caused_it_in_either_era() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let _d = env.daemon();
    let mut legacy = env.shim();
    legacy.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "legacy", "version": "1"}}),
    );
    legacy.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut modern = Modern::new(&env, "m", json!({"elicitation": {}}));

    // Handshake era: the session is asked with a request, and its answer becomes the retry.
    legacy.send(&json!({"jsonrpc": "2.0", "id": "L", "method": "tools/call", "params": {"name": "ask",
        "arguments": {"method": "elicitation/create", "params": {"message": "secret of L", "requestedSchema": {"type": "object"}}}}}));
    let asked = legacy.notification("elicitation/create", Duration::from_secs(10));
    assert_eq!(asked["params"]["message"], "secret of L");
    legacy.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"who": "L"}}}));
    let done = legacy.response(&json!("L"), Duration::from_secs(10));
    assert!(text(&done).contains("\"who\":\"L\""), "{done}");

    // 2026-07-28: the session gets input_required and retries itself.
    let first = modern.call(
        json!("M"),
        "ask",
        json!({"method": "elicitation/create", "params": {"message": "secret of M"}}),
        json!({}),
    );
    let ir = &first["result"];
    assert_eq!(ir["resultType"], "input_required", "{first}");
    assert_eq!(ir["inputRequests"]["q"]["params"]["message"], "secret of M");
    let retry = modern.call(
        json!("M2"),
        "ask",
        json!({"method": "elicitation/create", "params": {"message": "secret of M"}}),
        json!({}),
    );
    assert_eq!(
        retry["result"]["resultType"], "input_required",
        "a retry without answers asks again"
    );
    let answered = modern.request(
        json!("M3"),
        "tools/call",
        json!({"name": "ask", "arguments": {"method": "elicitation/create", "params": {"message": "secret of M"}},
               "inputResponses": {"q": {"action": "accept", "content": {"who": "M"}}},
               "requestState": ir["requestState"]}),
    );
    assert!(text(&answered).contains("\"who\":\"M\""), "{answered}");
    assert!(
        !legacy
            .stray
            .iter()
            .any(|m| m.to_string().contains("secret of M"))
    );
    assert!(
        !modern
            .shim
            .stray
            .iter()
            .any(|m| m.to_string().contains("secret of L"))
    );
}

#[test]
fn a_log_level_asked_by_one_session_does_not_reach_another() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let _d = env.daemon();
    let mut legacy = env.shim();
    legacy.initialize();
    assert_eq!(
        legacy.request("logging/setLevel", json!({"level": "error"}))["result"],
        json!({})
    );
    let mut modern = Modern::new(&env, "m", json!({}));
    let debug = json!({"io.modelcontextprotocol/logLevel": "debug"});
    modern.call(
        json!(1),
        "notify",
        json!({"kind": "log", "level": "info"}),
        debug,
    );
    let log = modern
        .shim
        .stray
        .iter()
        .find(|m| m["method"] == "notifications/message")
        .cloned()
        .expect("the modern session's own log");
    assert_eq!(log["params"]["level"], "info");
    // The handshake session asked for errors only: an info log of its own call does not come.
    legacy.call("notify", json!({"kind": "log", "level": "info"}));
    assert!(legacy.recv(Duration::from_millis(300)).is_none());
    assert!(
        !legacy
            .stray
            .iter()
            .any(|m| m["method"] == "notifications/message")
    );
    assert!(modern.shim.recv(Duration::from_millis(300)).is_none());
}

#[test]
fn calls_are_served_fairly_across_eras() {
    let env = Env::with_fake(json!({"maxConcurrent": 1}));
    let _d = env.daemon();
    let mut legacy = env.shim();
    legacy.initialize();
    let mut modern = Modern::new(&env, "m", json!({}));
    for i in 0..4 {
        modern.send(
            json!(format!("m{i}")),
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 300}}),
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    legacy.send(
        &json!({"jsonrpc": "2.0", "id": "l0", "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 300}}}),
    );
    legacy.response(&json!("l0"), Duration::from_secs(10));
    let l_done = Instant::now();
    modern.shim.response(&json!("m2"), Duration::from_secs(10));
    let m2_done = Instant::now();
    assert!(
        l_done < m2_done,
        "the one handshake call went before the batch's third"
    );
}

#[test]
fn each_session_sees_the_tools_its_own_capabilities_allow() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut sampler = env.shim();
    sampler.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
               "clientInfo": {"name": "s", "version": "1"}}),
    );
    let with = sampler.request("tools/list", json!({}));
    assert!(
        tool_names(&with["result"]).contains(&"sample".to_string()),
        "{with}"
    );
    let mut plain = Modern::new(&env, "p", json!({}));
    let without = plain.request(json!(1), "tools/list", json!({}));
    assert!(!tool_names(&without["result"]).contains(&"sample".to_string()));
    let mut modern_sampler = Modern::new(&env, "ms", json!({"sampling": {}}));
    let with = modern_sampler.request(json!(1), "tools/list", json!({}));
    assert!(tool_names(&with["result"]).contains(&"sample".to_string()));
    let status = upstream_state(&env);
    assert_eq!(status["era"], "modern");
    assert_eq!(status["capabilitiesFrom"], "session");
    let sessions = status["sessions"].as_array().unwrap();
    assert!(sessions.iter().any(|s| s["era"] == "legacy"));
    assert!(sessions.iter().any(|s| s["era"] == "modern"));

    // A handshake-era child sees the config's capabilities, for everyone.
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}, "clientCapabilities": {}}));
    let _d = env.daemon();
    let mut sampler = env.shim();
    sampler.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
               "clientInfo": {"name": "s", "version": "1"}}),
    );
    let listed = sampler.request("tools/list", json!({}));
    assert!(!tool_names(&listed["result"]).contains(&"sample".to_string()));
}

#[test]
fn a_child_that_dies_of_the_probe_is_started_with_initialize() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_EXIT_ON_DISCOVER": "1"}}));
    let pids = env.path("pids");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    cfg["servers"]["google"]["env"]["FAKE_MCP_PID_FILE"] = json!(pids);
    env.write_config(&cfg);
    let _d = env.daemon();
    let status = env.wait_upstream_ready();
    assert_eq!(status["upstreams"][0]["era"], "legacy", "{status}");
    assert_eq!(
        read_lines(&pids).len(),
        2,
        "one probe, one start with initialize"
    );
    let mut s = env.shim();
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "ok"}))), "ok");
}

#[test]
fn the_python_sdk_connects_in_every_mode() {
    if !python_sdk() {
        return;
    }
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let call = ["--call", "echo", r#"{"text":"hi"}"#];
    let mut names = Vec::new();
    for (mode, version) in [
        ("auto", "2026-07-28"),
        ("2026-07-28", "2026-07-28"),
        ("legacy", "2025-11-25"),
    ] {
        let r = py_client(&env, mode, &call, &[]);
        assert_eq!(r["protocolVersion"], version, "{mode}: {r}");
        assert_eq!(r["text"], "hi", "{mode}: {r}");
        names.push(r["tools"].clone());
    }
    assert!(names.iter().all(|n| *n == names[0]), "{names:?}");
    // An elicitation through the SDK's own callback, in each era.
    for mode in ["auto", "legacy"] {
        let r = py_client(
            &env,
            mode,
            &[
                "--elicit",
                r#"{"who":"py"}"#,
                "--call",
                "ask",
                r#"{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{"who":{"type":"string"}}}}}"#,
            ],
            &[],
        );
        assert_eq!(r["asked"], json!(["name?"]), "{mode}: {r}");
        assert!(r["text"].as_str().unwrap().contains("py"), "{mode}: {r}");
    }

    // A handshake-era child: auto falls back, a pinned 2026-07-28 client gets a clear error.
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let _d = env.daemon();
    env.wait_upstream_ready();
    let r = py_client(&env, "auto", &call, &[]);
    assert_eq!(r["protocolVersion"], "2025-11-25", "{r}");
    let r = py_client(&env, "2026-07-28", &call, &[]);
    assert!(r["error"].as_str().is_some(), "{r}");
}

#[test]
fn real_servers_of_each_era_through_coogle() {
    if !python_sdk() {
        return;
    }
    // mcp-server-time: the Python SDK's own server, dual-era.
    if let Some(time) = require_program("mcp-server-time") {
        let env = Env::new();
        env.write_config(
            &json!({"servers": {"time": {"command": time, "credentials": {"source": "none"}}}}),
        );
        let _d = env.daemon();
        let call = ["--call", "get_current_time", r#"{"timezone":"UTC"}"#];
        let modern = py_client(&env, "auto", &call, &[]);
        assert_eq!(modern["protocolVersion"], "2026-07-28", "{modern}");
        assert!(modern["text"].as_str().unwrap().contains("UTC"), "{modern}");
        let legacy = py_client(&env, "legacy", &call, &[]);
        assert_eq!(legacy["tools"], modern["tools"]);
        assert!(legacy["text"].as_str().unwrap().contains("UTC"), "{legacy}");
        assert_eq!(upstream_state(&env)["era"], "modern");
    }
    // server-everything: handshake-era only; a probing client falls back.
    if let Some(everything) = require_program("mcp-server-everything") {
        let env = Env::new();
        env.write_config(&json!({"servers": {"everything": {"command": everything, "args": ["stdio"], "credentials": {"source": "none"}}}}));
        let _d = env.daemon();
        env.wait_upstream_ready();
        let r = py_client(&env, "auto", &["--call", "echo", r#"{"message":"x"}"#], &[]);
        assert_eq!(r["protocolVersion"], "2025-11-25", "{r}");
        assert!(r["text"].as_str().unwrap().contains('x'), "{r}");
        assert_eq!(upstream_state(&env)["era"], "legacy");
    }
}

#[test]
fn claude_code_stays_in_the_2026_era_through_coogle() {
    let Some(claude) = claude_cli() else {
        return;
    };
    let (env, events) = Env::with_fake_events(json!({}));
    let entry = json!({"type": "stdio", "command": COOGLE, "args": ["mcp"],
        "env": {"COOGLE_SOCKET": env.socket, "COOGLE_CONFIG": env.config}});
    let run = |args: &[&str]| env.run_claude(&claude, args);
    let (code, text) = run(&[
        "mcp",
        "add-json",
        "--scope",
        "user",
        "google",
        &entry.to_string(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    // `claude mcp list` starts each server and probes it: a real health check.
    let (code, text) = run(&["mcp", "list"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("google") && text.contains("Connected"),
        "{text}"
    );
    let seen = read_lines(&events);
    // The probe never reached the child: the daemon answered it; Claude Code then listed the
    // tools in the 2026-07-28 era, under its own name.
    assert!(
        seen.iter().any(|l| l.starts_with("tools/list")
            && l.contains("era=modern")
            && l.contains("client=claude-code")),
        "{seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|l| l.starts_with("server/discover") && l.contains("client=claude-code")),
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|l| l.starts_with("initialize")),
        "{seen:?}"
    );
    let (code, text) = run(&["mcp", "remove", "google", "--scope", "user"]);
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn workspace_mcp_serves_2026_sessions_its_own_tools() {
    let Some(uvx) = require_program("uvx") else {
        return;
    };
    let env = Env::new();
    env.write_config(&json!({
        "mcp": {"command": uvx, "args": ["workspace-mcp", "--tool-tier", "core"]},
        "credentials": {"source": "manual", "clientId": "dummy-id.apps.googleusercontent.com", "clientSecret": "dummy-secret"},
    }));
    let _d = env.daemon();
    let mut s = env.shim();
    s.send_raw(format!("{CLAUDE_PROBE}\n").as_bytes());
    let d = s.response(&json!("server-discover-probe-1"), Duration::from_secs(90));
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "google_workspace",
        "{d}"
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": claude_meta()}}));
    let listed = s.response(&json!(1), Duration::from_secs(90));
    let (upstream, _) = split_coogle_tool(&listed["result"]);
    assert_eq!(upstream["tools"].as_array().unwrap().len(), 43, "{listed}");
    assert_eq!(
        listed["result"]["resultType"], "complete",
        "a 2026-07-28 answer, as it came"
    );
    assert_eq!(upstream_state(&env)["era"], "modern");
}
