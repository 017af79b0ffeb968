//! The fake server's own wire in both protocol eras, driven directly (no coogle in between):
//! the era lock on the first request, the 2026-07-28 envelope checks and answers (discover,
//! cache hints, input_required rounds, request-scoped logging, listen streams), and the
//! legacy-only and modern-only modes. coogle's tests trust these shapes, so they are pinned here.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

const QUIET: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(10);
const LEGACY_LOCKED: &str = "this connection serves the handshake protocol era; requests carrying the 2026-07-28 envelope are not accepted on it";

/// The fake with these variables, as a client with no coogle in between would start it.
fn fake(env: &Env, vars: &[(&str, &str)]) -> Shim {
    let mut cmd = Command::new(fake_mcp());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    env.stdio_server(cmd, &[])
}

fn envelope(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "era test", "version": "1"},
    })
}

/// A 2026-07-28 request with this envelope merged into `params._meta`.
fn modern(s: &mut Shim, method: &str, mut params: Value, capabilities: Value) -> Value {
    let meta = params.get("_meta").cloned().unwrap_or_else(|| json!({}));
    let mut env = envelope(capabilities);
    for (k, v) in meta.as_object().unwrap() {
        env[k] = v.clone();
    }
    params["_meta"] = env;
    s.request(method, params)
}

fn legacy_init(s: &mut Shim, capabilities: Value) -> Value {
    let r = s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    r
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Nothing at all arrives for a while.
fn silent(s: &mut Shim) {
    if let Some(m) = s.recv(QUIET) {
        panic!("unexpected message: {m}");
    }
}

fn decode_base64(text: &str) -> Vec<u8> {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = alphabet.iter().position(|&a| a == c).expect("base64") as u32;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}

#[test]
fn dual_started_with_initialize_is_the_legacy_server_and_refuses_envelopes() {
    let env = Env::new();
    let mut s = fake(&env, &[]);
    let init = legacy_init(&mut s, json!({"roots": {}, "elicitation": {}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(init["result"].get("resultType").is_none(), "{init}");
    let list = s.request("tools/list", json!({}));
    assert!(list["result"].get("resultType").is_none(), "{list}");
    assert!(!tool_names(&list).contains(&"sample".to_string()));
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));

    let discover = s.request("server/discover", json!({}));
    assert_eq!(
        discover["error"],
        json!({"code": -32601, "message": "Method not found"})
    );
    for method in ["server/discover", "tools/list"] {
        let r = modern(&mut s, method, json!({}), json!({}));
        assert_eq!(
            r["error"],
            json!({"code": -32600, "message": LEGACY_LOCKED}),
            "{method}"
        );
    }
    // A bare `_meta` (a progress token) is no envelope.
    let r = s.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 5}}),
    );
    assert_eq!(text(&r), "hi");
}

#[test]
fn an_enveloped_first_request_locks_modern_and_discover_answers_in_full() {
    let env = Env::new();
    let mut s = fake(&env, &[("FAKE_MCP_TTL_MS", "1234")]);
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let d = modern(&mut s, "server/discover", json!({}), json!({}));
    assert_eq!(
        d["result"],
        json!({
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {
                "tools": {"listChanged": true},
                "logging": {},
                "resources": {"subscribe": true, "listChanged": true},
                "prompts": {"listChanged": true},
            },
            "instructions": "A fake MCP server for coogle's tests.",
            "ttlMs": 1234,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo":
                {"name": "fake-mcp", "version": "1.0.0", "title": "Fake MCP"}},
        })
    );

    let init = s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(init["error"]["code"], -32022, "{init}");
    assert_eq!(
        init["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
    );
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    silent(&mut s);

    let bare = s.request("tools/list", json!({"_meta": {"progressToken": 1}}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    let message = bare["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("io.modelcontextprotocol/protocolVersion")
            && message.contains("io.modelcontextprotocol/clientCapabilities"),
        "{message}"
    );
    let mut old = envelope(json!({}));
    old["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let r = s.request("tools/list", json!({"_meta": old}));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
    );
    for method in [
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ] {
        let r = modern(
            &mut s,
            method,
            json!({"level": "info", "uri": "fake://hello"}),
            json!({}),
        );
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }

    for method in [
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let r = modern(&mut s, method, json!({}), json!({}));
        assert_eq!(r["result"]["resultType"], "complete", "{r}");
        assert_eq!(r["result"]["ttlMs"], 1234, "{r}");
        assert_eq!(r["result"]["cacheScope"], "private", "{r}");
    }
    let read = modern(
        &mut s,
        "resources/read",
        json!({"uri": "fake://hello"}),
        json!({}),
    );
    assert_eq!(read["result"]["contents"][0]["text"], "hello");
    assert_eq!(read["result"]["ttlMs"], 1234);
    let missing = modern(
        &mut s,
        "resources/read",
        json!({"uri": "fake://nope"}),
        json!({}),
    );
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let prompt = modern(
        &mut s,
        "prompts/get",
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
        json!({}),
    );
    assert_eq!(prompt["result"]["resultType"], "complete");
    assert!(prompt["result"].get("ttlMs").is_none(), "{prompt}");
    let echo = modern(
        &mut s,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
        json!({}),
    );
    assert_eq!(echo["result"]["resultType"], "complete");
    assert_eq!(echo["result"]["structuredContent"]["echo"], "hi");
}

#[test]
fn the_tool_list_follows_each_requests_own_capabilities() {
    let env = Env::new();
    let mut m = fake(&env, &[]);
    let without = modern(&mut m, "tools/list", json!({}), json!({}));
    let with = modern(&mut m, "tools/list", json!({}), json!({"sampling": {}}));
    let mut names = tool_names(&without);
    assert!(!names.contains(&"sample".to_string()));
    names.push("sample".into());
    assert_eq!(tool_names(&with), names);

    // The legacy era decides by initialize, and without sampling its list is the modern one
    // without the result's own fields.
    let mut l = fake(&env, &[]);
    legacy_init(&mut l, json!({"sampling": {}}));
    assert_eq!(
        l.request("tools/list", json!({}))["result"]["tools"],
        with["result"]["tools"]
    );
    let mut plain = fake(&env, &[]);
    legacy_init(&mut plain, json!({"roots": {}}));
    assert_eq!(
        plain.request("tools/list", json!({}))["result"],
        json!({"tools": without["result"]["tools"]})
    );
    let r = plain.call("sample", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[test]
fn modern_mode_refuses_a_first_initialize_naming_its_versions() {
    let env = Env::new();
    let mut s = fake(&env, &[("FAKE_MCP_ERA", "modern")]);
    let r = legacy_init(&mut s, json!({}));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2025-11-25"})
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-07-28"),
        "{r}"
    );
    let d = modern(&mut s, "server/discover", json!({}), json!({}));
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
}

#[test]
fn legacy_mode_answers_discover_method_not_found_and_serves_envelopes() {
    let env = Env::new();
    let mut s = fake(&env, &[("FAKE_MCP_ERA", "legacy")]);
    let d = modern(&mut s, "server/discover", json!({}), json!({}));
    assert_eq!(
        d["error"],
        json!({"code": -32601, "message": "Method not found"})
    );
    // Not locked modern: an enveloped request is served with legacy shapes.
    let list = modern(&mut s, "tools/list", json!({}), json!({}));
    assert!(list["result"].get("resultType").is_none(), "{list}");
    assert!(legacy_init(&mut s, json!({}))["result"]["serverInfo"].is_object());
    let d = s.request("server/discover", json!({}));
    assert_eq!(d["error"]["code"], -32601);
}

#[test]
fn ask_is_one_input_required_round_whose_answer_matches_the_legacy_text() {
    let env = Env::new();
    let mut s = fake(&env, &[]);
    let caps = json!({"roots": {}});
    let args = json!({"method": "roots/list", "params": {"x": 1}});
    let first = modern(
        &mut s,
        "tools/call",
        json!({"name": "ask", "arguments": args}),
        caps.clone(),
    );
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    assert_eq!(
        r["inputRequests"],
        json!({"q": {"method": "roots/list", "params": {"x": 1}}})
    );
    let state = r["requestState"].as_str().unwrap().to_string();
    let decoded: Value = serde_json::from_slice(&decode_base64(&state)).unwrap();
    assert_eq!(decoded["tool"], "ask");
    assert_eq!(decoded["round"], 1);
    assert_eq!(decoded["args"], args);

    let roots = json!({"roots": [{"uri": "file:///work/a", "name": "a"}]});
    let retry = modern(
        &mut s,
        "tools/call",
        json!({"name": "ask", "arguments": args, "inputResponses": {"q": roots},
               "requestState": state}),
        caps.clone(),
    );
    assert_eq!(retry["result"]["resultType"], "complete", "{retry}");
    let modern_answer: Value = serde_json::from_str(&text(&retry)).unwrap();
    assert_eq!(modern_answer, roots);

    // The same question in the legacy era: the text is the client's whole JSON-RPC answer,
    // whose `result` is the modern text.
    let mut l = fake(&env, &[]);
    legacy_init(&mut l, caps.clone());
    l.send(&json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                   "params": {"name": "ask", "arguments": args}}));
    let req = l.notification("roots/list", WAIT);
    l.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": roots}));
    let legacy_answer: Value = serde_json::from_str(&text(&l.response(&json!("c"), WAIT))).unwrap();
    assert_eq!(legacy_answer["result"], modern_answer);

    // A state for other arguments, a forged one, or none at all does not verify.
    let other_args = json!({"method": "roots/list"});
    for (arguments, state) in [
        (other_args, json!(state)),
        (args.clone(), json!(format!("x{}", &state[1..]))),
        (args.clone(), Value::Null),
    ] {
        let mut params = json!({"name": "ask", "arguments": arguments,
                                "inputResponses": {"q": roots}});
        if !state.is_null() {
            params["requestState"] = state;
        }
        let r = modern(&mut s, "tools/call", params, caps.clone());
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }

    // An input kind the request did not declare.
    let r = modern(
        &mut s,
        "tools/call",
        json!({"name": "ask", "arguments": {"method": "elicitation/create", "params": {}}}),
        caps,
    );
    assert_eq!(r["error"]["code"], -32021, "{r}");
    assert_eq!(
        r["error"]["data"],
        json!({"requiredCapabilities": {"elicitation": {}}})
    );
}

#[test]
fn sample_asks_for_a_message_in_either_era() {
    let env = Env::new();
    let answer = json!({"role": "assistant", "model": "m",
                        "content": {"type": "text", "text": "hi there"}});
    let mut m = fake(&env, &[]);
    let caps = json!({"sampling": {}});
    let args = json!({"prompt": "greet me"});
    let first = modern(
        &mut m,
        "tools/call",
        json!({"name": "sample", "arguments": args}),
        caps.clone(),
    );
    let q = &first["result"]["inputRequests"]["q"];
    assert_eq!(q["method"], "sampling/createMessage", "{first}");
    assert_eq!(q["params"]["messages"][0]["content"]["text"], "greet me");
    let retry = modern(
        &mut m,
        "tools/call",
        json!({"name": "sample", "arguments": args, "inputResponses": {"q": answer},
               "requestState": first["result"]["requestState"]}),
        caps.clone(),
    );
    assert_eq!(text(&retry), "hi there");
    let r = modern(
        &mut m,
        "tools/call",
        json!({"name": "sample", "arguments": args}),
        json!({}),
    );
    assert_eq!(
        r["error"]["data"],
        json!({"requiredCapabilities": {"sampling": {}}})
    );

    let mut l = fake(&env, &[]);
    legacy_init(&mut l, caps);
    l.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": "sample", "arguments": args}}));
    let req = l.notification("sampling/createMessage", WAIT);
    assert_eq!(req["params"]["messages"][0]["content"]["text"], "greet me");
    l.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": answer}));
    assert_eq!(text(&l.response(&json!(9), WAIT)), "hi there");
}

#[test]
fn modern_log_messages_are_request_scoped_and_leveled() {
    let env = Env::new();
    let mut s = fake(&env, &[]);
    let log = |level: &str| json!({"name": "notify", "arguments": {"kind": "log", "level": level}});
    let cases = [
        (None, "info", false),
        (Some("warning"), "info", false),
        (Some("warning"), "warning", true),
        (Some("debug"), "error", true),
    ];
    for (wanted, level, sent) in cases {
        let mut params = log(level);
        if let Some(w) = wanted {
            params["_meta"] = json!({"io.modelcontextprotocol/logLevel": w});
        }
        let r = modern(&mut s, "tools/call", params, json!({}));
        assert_eq!(text(&r), "notified");
        let got: Vec<Value> = s.stray.drain(..).collect();
        if sent {
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!(got[0]["method"], "notifications/message");
            assert_eq!(got[0]["params"]["level"], level);
        } else {
            assert!(got.is_empty(), "{wanted:?} {level}: {got:?}");
        }
    }
    let mut bad = log("info");
    bad["_meta"] = json!({"io.modelcontextprotocol/logLevel": "loud"});
    assert_eq!(
        modern(&mut s, "tools/call", bad, json!({}))["error"]["code"],
        -32602
    );

    // Legacy: every message, level as asked (info by default), as always.
    let mut l = fake(&env, &[]);
    legacy_init(&mut l, json!({}));
    l.call("notify", json!({"kind": "log"}));
    let m = l.notification("notifications/message", WAIT);
    assert_eq!(
        m["params"],
        json!({"level": "info", "logger": "fake", "data": "hello from fake"})
    );
}

#[test]
fn listen_acks_tags_filters_and_ends_on_cancel() {
    let env = Env::new();
    let events = env.path("events.log");
    let mut s = fake(&env, &[("FAKE_MCP_EVENT_LOG", events.to_str().unwrap())]);
    let meta = envelope(json!({}));
    s.send(
        &json!({"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"toolsListChanged": true,
            "promptsListChanged": false, "resourceSubscriptions": ["fake://hello"],
            "taskIds": ["t"]}}}),
    );
    let ack = s.notification("notifications/subscriptions/acknowledged", WAIT);
    assert_eq!(
        ack["params"],
        json!({"_meta": {"io.modelcontextprotocol/subscriptionId": "L1"},
               "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["fake://hello"]}})
    );
    s.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"promptsListChanged": true}}}),
    );
    let ack = s.notification("notifications/subscriptions/acknowledged", WAIT);
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );

    let notify = |s: &mut Shim, kind: &str| {
        let r = modern(
            s,
            "tools/call",
            json!({"name": "notify", "arguments": {"kind": kind}}),
            json!({}),
        );
        assert_eq!(text(&r), "notified");
        s.stray.drain(..).collect::<Vec<Value>>()
    };
    let tagged = |m: &Value| m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
    let got = notify(&mut s, "tools");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["method"], "notifications/tools/list_changed");
    assert_eq!(tagged(&got[0]), "L1");
    let got = notify(&mut s, "resource");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["method"], "notifications/resources/updated");
    assert_eq!(got[0]["params"]["uri"], "fake://hello");
    assert_eq!(tagged(&got[0]), "L1");
    let got = notify(&mut s, "prompts");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(tagged(&got[0]), 7);
    assert!(notify(&mut s, "resources").is_empty());

    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "L1"}}),
    );
    assert!(notify(&mut s, "tools").is_empty());
    assert_eq!(notify(&mut s, "prompts").len(), 1);
    // Neither listen was ever answered.
    silent(&mut s);

    let lines = read_lines(&events);
    assert!(
        lines.contains(&r#"subscriptions/listen "L1" - era=modern client=era_test"#.to_string()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&r#"notifications/cancelled "L1""#.to_string()),
        "{lines:?}"
    );
}

#[test]
fn progress_and_cancel_work_as_before_in_the_modern_era() {
    let env = Env::new();
    let events = env.path("events.log");
    let mut s = fake(&env, &[("FAKE_MCP_EVENT_LOG", events.to_str().unwrap())]);
    let r = modern(
        &mut s,
        "tools/call",
        json!({"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}}),
        json!({}),
    );
    assert_eq!(r["result"]["resultType"], "complete");
    let steps: Vec<Value> = s.stray.drain(..).collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[1]["params"]["progressToken"], "p");

    let mut params = json!({"name": "sleep", "arguments": {"ms": 10_000}});
    params["_meta"] = envelope(json!({}));
    s.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": params}));
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": "slow"}}),
    );
    silent(&mut s);

    let lines = read_lines(&events);
    assert_eq!(lines[0], r#"tools/call 1 "p" era=modern client=era_test"#);
    assert!(lines.contains(&r#"notifications/cancelled "slow""#.to_string()));
}

#[test]
fn a_slow_discover_locks_modern_before_its_answer_goes_out() {
    // The failure of a client whose probe timed out: its `initialize` meets a modern lock.
    let env = Env::new();
    let mut s = fake(&env, &[("FAKE_MCP_DISCOVER_DELAY_MS", "400")]);
    let t = Instant::now();
    s.send(
        &json!({"jsonrpc": "2.0", "id": "probe", "method": "server/discover",
                   "params": {"_meta": envelope(json!({}))}}),
    );
    let init = legacy_init(&mut s, json!({}));
    assert_eq!(init["error"]["code"], -32022, "{init}");
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    let d = s.response(&json!("probe"), WAIT);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(d["result"]["resultType"], "complete");
}

#[test]
fn exit_on_discover_exits_on_a_first_discover_only() {
    let env = Env::new();
    let mut s = fake(&env, &[("FAKE_MCP_EXIT_ON_DISCOVER", "1")]);
    s.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                   "params": {"_meta": envelope(json!({}))}}),
    );
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the fake did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(1));

    let mut s = fake(&env, &[("FAKE_MCP_EXIT_ON_DISCOVER", "1")]);
    legacy_init(&mut s, json!({}));
    let d = s.request("server/discover", json!({}));
    assert_eq!(d["error"]["code"], -32601);
}
