//! The same multi-session checks against real servers nobody here wrote:
//! `@modelcontextprotocol/server-everything` (npm) and `workspace-mcp` (PyPI).
//!
//! `.ci/run` installs both and sets `COOGLE_TEST_REQUIRE_ALL=1`, which turns a missing
//! server into a failure; locally a missing server is skipped with a message saying so.

#![allow(clippy::print_stderr)]

use crate::support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// Run `sessions` shims concurrently, each listing tools and making `calls` calls built by `make`.
fn concurrent_sessions(
    env: &Env,
    sessions: usize,
    calls: usize,
    make: fn(usize, usize) -> (String, Value, String),
) -> Vec<Value> {
    let handles: Vec<_> = (0..sessions)
        .map(|s| {
            let mut shim = env.shim();
            std::thread::spawn(move || {
                shim.initialize();
                let tools = shim.request("tools/list", json!({}))["result"].clone();
                let mut mismatches = 0;
                for c in 0..calls {
                    let (tool, args, expect) = make(s, c);
                    let r = shim.call(&tool, args);
                    let got = r["result"]["content"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if !got.contains(&expect) {
                        eprintln!("mismatch: wanted {expect:?}, got {r}");
                        mismatches += 1;
                    }
                }
                assert_eq!(
                    mismatches, 0,
                    "session {s} saw answers that were not its own"
                );
                tools
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn server_everything_shared_by_many_sessions() {
    let Some(bin) = require_program("mcp-server-everything") else {
        return;
    };
    let env = Env::new();
    env.write_config(&json!({"servers": {"everything": {
        "command": bin, "args": ["stdio"], "maxConcurrent": 4,
    }}}));
    let _daemon = env.daemon();
    let lists = concurrent_sessions(&env, 6, 25, |s, c| {
        let msg = format!("s{s}-c{c}-{}", s * 1000 + c);
        ("echo".into(), json!({"message": msg}), msg)
    });
    // Every session sees the same list, equal to what the server gives a client directly with
    // the same capabilities.
    for l in &lists {
        assert_eq!(l, &lists[0]);
    }
    let direct = direct_tools(&bin.to_string_lossy(), &["stdio"], &[]);
    let (upstream, _) = split_coogle_tool(&lists[0]);
    assert_eq!(
        upstream, direct,
        "the tool list through coogle differs from the direct one"
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["stats"]["calls"], 150);
    assert_eq!(status["upstreams"][0]["stats"]["errors"], 0);
    assert_eq!(status["upstreams"][0]["restarts"], 0);
}

#[test]
fn workspace_mcp_core_shared_by_many_sessions() {
    let Some(uvx) = require_program("uvx") else {
        return;
    };
    let env = Env::new();
    // The original coogle's own default command, with dummy credentials (it lists tools offline).
    env.write_config(&json!({
        "mcp": {"command": uvx, "args": ["workspace-mcp", "--tool-tier", "core"]},
        "credentials": {"source": "manual", "clientId": "dummy-id.apps.googleusercontent.com", "clientSecret": "dummy-secret"},
    }));
    let _daemon = env.daemon();
    let status = env.wait_upstream_ready();
    let pid = status["upstreams"][0]["pid"].as_u64().unwrap();
    let lists = concurrent_sessions(&env, 4, 0, |_, _| unreachable!());
    for l in &lists {
        assert_eq!(l, &lists[0]);
    }
    let (upstream, _) = split_coogle_tool(&lists[0]);
    let tools = upstream["tools"].as_array().unwrap();
    assert_eq!(
        tools.len(),
        43,
        "workspace-mcp --tool-tier core lists 43 tools offline"
    );
    let direct = direct_tools(
        &uvx.to_string_lossy(),
        &["workspace-mcp", "--tool-tier", "core"],
        &[
            (
                "GOOGLE_OAUTH_CLIENT_ID",
                "dummy-id.apps.googleusercontent.com",
            ),
            ("GOOGLE_OAUTH_CLIENT_SECRET", "dummy-secret"),
        ],
    );
    assert_eq!(upstream, direct);
    // One child for all sessions.
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["pid"].as_u64().unwrap(), pid);
    assert_eq!(status["upstreams"][0]["restarts"], 0);
}

/// The server's tools/list as a direct client with the daemon's default capabilities sees it.
fn direct_tools(cmd: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    use std::io::{BufRead, BufReader, Write};
    let mut child = Command::new(cmd)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"elicitation":{}},"clientInfo":{"name":"direct","version":"1"}}}),
    );
    let mut result = Value::Null;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut sent_list = false;
    while std::time::Instant::now() < deadline {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["id"] == 1 && !sent_list {
            send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
            send(json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}));
            sent_list = true;
        } else if v["id"] == 2 {
            result = v["result"].clone();
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(!result.is_null(), "{cmd} did not list its tools");
    result
}

#[test]
fn workspace_mcp_sign_in_is_detected_per_account() {
    let Some(uvx) = require_program("uvx") else {
        return;
    };
    let env = Env::new();
    env.write_config(&json!({
        "mcp": {"command": uvx, "args": ["workspace-mcp", "--tool-tier", "core"]},
        "credentials": {"source": "manual", "clientId": "dummy-id.apps.googleusercontent.com", "clientSecret": "dummy-secret"},
    }));
    let _daemon = env.daemon();
    env.wait_upstream_ready();
    let out = env.run(&[
        "call",
        "list_calendars",
        r#"{"user_google_email":"ada@example.com"}"#,
    ]);
    assert!(
        out.stdout
            .contains("Authorization URL: https://accounts.google.com/"),
        "{out}"
    );
    assert_eq!(
        out.status,
        Some(1),
        "a sign-in answer is an error result: {out}"
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let sign_in = &status["upstreams"][0]["signIn"][0];
    assert_eq!(sign_in["account"], "ada@example.com", "{status}");
    assert!(
        sign_in["url"]
            .as_str()
            .unwrap()
            .contains("login_hint=ada%40example.com")
    );
}

#[test]
fn with_no_config_at_all_the_default_upstream_is_workspace_mcp() {
    if require_program("uvx").is_none() {
        return;
    }
    let env = Env::new();
    assert!(!env.config.exists());
    // No config file anywhere: the defaults apply (the original coogle's uvx workspace-mcp).
    // A daemon of its own, since `tools` stops one it had to start.
    let mut serve = env.cmd();
    serve.env_remove("COOGLE_CONFIG");
    let _d = support::serve::Serve::spawn(serve);
    env.wait_ready();
    let out = env
        .cmd()
        .env_remove("COOGLE_CONFIG")
        .args(["tools"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.trim_end().ends_with("44 tools"),
        "43 of workspace-mcp + coogle: {stdout}"
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(
        status["upstreams"][0]["command"],
        "uvx workspace-mcp --tool-tier core"
    );
    assert_eq!(status["upstreams"][0]["tools"], 43);
    assert_eq!(status["daemon"]["configFile"], Value::Null);
}
