//! Many sessions share one child: each gets exactly its own answers, the child is spawned once,
//! and what a session reads through coogle is what the child said, field for field.

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

#[test]
fn concurrent_shims_get_their_own_answers_from_one_child() {
    let env = Env::new();
    let pids = env.path("spawns.txt");
    let events = env.path("events.log");
    env.write_fake_config(json!({
        "maxConcurrent": 4,
        "env": {"FAKE_MCP_PID_FILE": pids, "FAKE_MCP_EVENT_LOG": events},
    }));
    let _daemon = env.daemon();
    env.wait_upstream_ready();

    const SHIMS: usize = 8;
    const CALLS: usize = 40;
    let handles: Vec<_> = (0..SHIMS)
        .map(|s| {
            let mut shim = env.shim();
            std::thread::spawn(move || {
                shim.initialize();
                let mut mismatches = 0;
                // Every session uses the same ids (1, 2, ...): the daemon must keep them apart.
                for c in 0..CALLS {
                    let token = format!("shim{s}-call{c}-{}", uuid_like(s, c));
                    let args = if c % 5 == 0 {
                        json!({"ms": 3, "text": token})
                    } else {
                        json!({"text": token})
                    };
                    let tool = if c % 5 == 0 { "sleep" } else { "echo" };
                    let r = shim.call(tool, args);
                    if text(&r) != token {
                        mismatches += 1;
                    }
                }
                let pid = text(&shim.call("pid", json!({})));
                (mismatches, pid)
            })
        })
        .collect();
    let results: Vec<(usize, String)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mismatches: usize = results.iter().map(|r| r.0).sum();
    assert_eq!(mismatches, 0, "answers crossed between sessions");
    let child_pids: std::collections::HashSet<&String> = results.iter().map(|r| &r.1).collect();
    assert_eq!(
        child_pids.len(),
        1,
        "sessions saw different children: {child_pids:?}"
    );
    assert_eq!(
        read_lines(&pids).len(),
        1,
        "the child was spawned more than once"
    );

    // The child saw unique ids only (the daemon rewrote the sessions' overlapping ids).
    let calls: Vec<String> = read_lines(&events)
        .into_iter()
        .filter(|l| l.starts_with("tools/call "))
        .map(|l| l.split(' ').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(calls.len(), SHIMS * (CALLS + 1));
    let unique: std::collections::HashSet<&String> = calls.iter().collect();
    assert_eq!(
        unique.len(),
        calls.len(),
        "the child saw a request id twice"
    );

    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(
        status["upstreams"][0]["stats"]["calls"],
        json!(SHIMS * (CALLS + 1))
    );
    assert_eq!(status["upstreams"][0]["stats"]["errors"], json!(0));
}

fn uuid_like(s: usize, c: usize) -> u64 {
    (s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (c as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// Talk to the fake server directly, as a client with no coogle in between would.
fn direct(lines: &[Value]) -> Vec<Value> {
    let mut child = Command::new(fake_mcp())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        for l in lines {
            writeln!(stdin, "{l}").unwrap();
        }
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn tools_list_and_initialize_are_the_childs_own_field_for_field() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    let mut shim = env.shim();
    let init = shim.initialize();
    let listed = shim.request("tools/list", json!({}));

    let direct = direct(&[
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"elicitation":{}},"clientInfo":{"name":"x","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}),
    ]);
    assert_eq!(init, direct[0]["result"]);
    let (upstream_tools, coogle_tool) = split_coogle_tool(&listed["result"]);
    assert_eq!(upstream_tools, direct[1]["result"]);
    assert_eq!(coogle_tool["inputSchema"]["required"], json!(["action"]));
    let echo = &listed["result"]["tools"][0];
    assert_eq!(echo["_meta"]["x-fake/unicode"], "snowman ☃ and é");
    assert!(echo.get("outputSchema").is_some());

    // Resources and prompts pass through with no code of their own in the daemon.
    let read = shim.request("resources/read", json!({"uri": "fake://hello"}));
    assert_eq!(read["result"]["contents"][0]["text"], "hello");
    let prompt = shim.request(
        "prompts/get",
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
    );
    assert!(
        prompt["result"].to_string().contains("Hello, Ada!"),
        "{prompt}"
    );
    // An error from the child comes back as the child's error, with the session's id.
    let unknown = shim.call("no_such_tool", json!({}));
    assert_eq!(unknown["error"]["code"], -32602);
}

#[test]
fn with_the_coogle_tool_off_the_list_is_exactly_the_childs() {
    let env = Env::new();
    env.write_config(&json!({"coogleTool": false, "servers": {"google": {
        "command": fake_mcp(), "credentials": {"source": "none"}}}}));
    let _daemon = env.daemon();
    let mut shim = env.shim();
    shim.initialize();
    let listed = shim.request("tools/list", json!({}));
    let direct = direct(&[
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}),
    ]);
    assert_eq!(listed["result"], direct[1]["result"]);
    let call = shim.call("coogle", json!({"action": "status"}));
    assert_eq!(
        call["error"]["code"], -32602,
        "no coogle tool when it is off: {call}"
    );
}

#[test]
fn progress_reaches_only_its_session_with_its_own_token() {
    let env = Env::with_fake(json!({"maxConcurrent": 2}));
    let _daemon = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    // Both sessions use the same id and the same token.
    for s in [&mut a, &mut b] {
        s.send(&json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"progress","arguments":{"steps":3,"delayMs":5},"_meta":{"progressToken":1}}}));
    }
    for s in [&mut a, &mut b] {
        let done = s.response(&json!(7), Duration::from_secs(20));
        assert_eq!(text(&done), "done 3 steps");
        let progress: Vec<&Value> = s
            .stray
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(
            progress.len(),
            3,
            "each session gets exactly its own progress: {:?}",
            s.stray
        );
        for (i, p) in progress.iter().enumerate() {
            assert_eq!(p["params"]["progressToken"], json!(1));
            assert_eq!(p["params"]["progress"], json!(i + 1));
        }
    }
}
