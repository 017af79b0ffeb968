//! The `coogle` tool's background operations stay with the shim that started them: not with
//! its `CLAUDE_CODE_SESSION_ID`, which any local process can read from the shim's environment
//! (and which control `status` used to show), but with a secret the shim sends in every hello,
//! its reconnect's included. An older client without one owns its operations by connection.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// A connection that speaks the wire by hand, as an old shim or an impostor would.
struct Raw {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next: u64,
}

impl Raw {
    fn open(env: &Env, hello: Value) -> Raw {
        let stream = connect_patiently(&env.socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut raw = Raw {
            w: stream.try_clone().unwrap(),
            r: BufReader::new(stream),
            next: 1,
        };
        raw.send(&hello);
        let reply = raw.line();
        assert_eq!(reply["ok"], true, "{reply}");
        let init = raw.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(init["result"].is_object(), "{init}");
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send(&mut self, v: &Value) {
        self.w.write_all(format!("{v}\n").as_bytes()).unwrap();
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.r.read_line(&mut line).unwrap() > 0,
            "connection closed"
        );
        serde_json::from_str(&line).unwrap()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let v = self.line();
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    fn coogle(&mut self, args: Value) -> Value {
        self.request("tools/call", json!({"name": "coogle", "arguments": args}))
    }
}

fn hello(extra: Value) -> Value {
    let mut h = json!({"coogle": 1, "mode": "mcp", "version": env!("CARGO_PKG_VERSION")});
    for (k, v) in extra.as_object().unwrap() {
        h[k] = v.clone();
    }
    h
}

fn operation(started: &Value) -> String {
    started["result"]["structuredContent"]["operation"]
        .as_str()
        .unwrap_or_else(|| panic!("no operation in {started}"))
        .to_string()
}

/// Regression (issue 18): any local client could claim a session's operations by sending
/// that session's `CLAUDE_CODE_SESSION_ID`, which control `status` showed: another shim of the
/// same Claude Code session, or a hand-made hello, listed, fetched and cancelled them.
#[test]
fn a_claude_session_id_grants_nothing_and_status_shows_none() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let _d = env.daemon();
    let mut a = env.shim_of_claude_session("agent-a-7f3c");
    a.initialize();
    let op = operation(&a.call(
        "coogle",
        json!({"action": "start_call", "tool": "sleep", "arguments": {"ms": 1500, "text": "a's"}}),
    ));
    // What an onlooker sees: nothing to present as A.
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(
        status["upstreams"][0]["sessions"].as_array().unwrap().len(),
        1
    );
    assert!(!status.to_string().contains("agent-a-7f3c"), "{status}");
    let cli = env.run(&["status"]);
    assert!(!cli.stdout.contains("agent-a-7f3c"), "{cli}");

    // Another shim of the same Claude Code session, and a hello that claims it.
    let mut b = env.shim_of_claude_session("agent-a-7f3c");
    b.initialize();
    let mut forged = Raw::open(&env, hello(json!({"claudeSessionId": "agent-a-7f3c"})));
    for (who, list, wait, cancel) in [
        (
            "another shim",
            b.call("coogle", json!({"action": "list_operations"})),
            b.call("coogle", json!({"action": "wait", "operation": op})),
            b.call("coogle", json!({"action": "cancel", "operation": op})),
        ),
        (
            "a forged hello",
            forged.coogle(json!({"action": "list_operations"})),
            forged.coogle(json!({"action": "wait", "operation": op})),
            forged.coogle(json!({"action": "cancel", "operation": op})),
        ),
    ] {
        assert_eq!(
            list["result"]["structuredContent"]["operations"],
            json!([]),
            "{who}: {list}"
        );
        assert_eq!(wait["result"]["isError"], true, "{who}: {wait}");
        assert_eq!(cancel["result"]["isError"], true, "{who}: {cancel}");
    }
    // A's own shim still has it, undisturbed.
    let done = a.call(
        "coogle",
        json!({"action": "wait", "operation": op, "wait_ms": 10000}),
    );
    assert_eq!(text(&done), "a's", "{done}");
}

/// The shim's own reconnect keeps its operations: the daemon drops the connection (here, a
/// line over the daemon's `maxLineBytes`, which a shim that read a larger limit lets through),
/// the real shim reconnects and replays its hello, and `wait` still finds the operation it
/// started before.
#[test]
fn ownership_survives_the_shims_own_reconnect() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let mut config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    config["maxLineBytes"] = json!(65536);
    env.write_config(&config);
    let _d = env.daemon();
    config["maxLineBytes"] = json!(1 << 20);
    env.write_config(&config);
    let mut a = env.shim_of_claude_session("agent-a");
    a.initialize();
    let op = operation(&a.call(
        "coogle",
        json!({"action": "start_call", "tool": "sleep", "arguments": {"ms": 1500, "text": "kept"}}),
    ));
    let before = control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0]["sessions"]
        [0]["id"]
        .clone();
    let big = "x".repeat(100_000);
    let cut = a.request("ping", json!({"padding": big}));
    assert!(cut.get("error").is_some(), "{cut}");
    wait_for("the shim to reconnect", Duration::from_secs(20), || {
        let s = control(&env.socket, "status", Value::Null).unwrap();
        let sessions = s["upstreams"][0]["sessions"].as_array().unwrap().clone();
        sessions.len() == 1 && sessions[0]["id"] != before
    });
    let done = a.call(
        "coogle",
        json!({"action": "wait", "operation": op, "wait_ms": 10000}),
    );
    assert_eq!(text(&done), "kept", "{done}");
}

/// A client that sends no token (a shim of an older coogle) owns its operations by
/// connection: its next connection does not get them, and when it goes, they go, the running
/// one cancelled upstream. A token that is malformed is refused in the hello, saying why.
#[test]
fn without_a_token_operations_belong_to_the_connection() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let _d = env.daemon();
    let old = hello(json!({"claudeSessionId": "old-shim"}));
    let mut first = Raw::open(&env, old.clone());
    let op = operation(
        &first.coogle(json!({"action": "start_call", "tool": "sleep", "arguments": {"ms": 30000}})),
    );
    let listed = first.coogle(json!({"action": "list_operations"}));
    assert_eq!(
        listed["result"]["structuredContent"]["operations"][0]["operation"],
        op.as_str()
    );
    let mut second = Raw::open(&env, old);
    let wait = second.coogle(json!({"action": "wait", "operation": op}));
    assert_eq!(wait["result"]["isError"], true, "{wait}");
    drop(first);
    wait_for(
        "the gone connection's operation to be cancelled upstream",
        Duration::from_secs(10),
        || control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0]["inFlight"] == 0,
    );

    let bad = hello(json!({"sessionToken": "guessable"}));
    let line = raw_exchange(&env.socket, bad.to_string().as_bytes()).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["ok"], false, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessionToken must be"),
        "{reply}"
    );
}
