//! A child that dies: its caller gets a readable error at once, the child comes back, sessions
//! stay connected, and a child that cannot start leaves the daemon serving.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

#[test]
fn crash_mid_call_errors_the_caller_and_the_next_call_succeeds() {
    let env = Env::new();
    let spawns = env.path("spawns.txt");
    env.write_fake_config(json!({"env": {"FAKE_MCP_PID_FILE": spawns}}));
    let _daemon = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    let first_pid = text(&a.call("pid", json!({})));

    // B queues a call behind A's crash.
    a.send(&json!({"jsonrpc":"2.0","id":"boom","method":"tools/call","params":{"name":"crash","arguments":{}}}));
    std::thread::sleep(Duration::from_millis(50));
    b.send(&json!({"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}));

    let t = Instant::now();
    let crashed = a.response(&json!("boom"), Duration::from_secs(5));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "the caller waited {:?}",
        t.elapsed()
    );
    assert_eq!(crashed["result"]["isError"], true, "{crashed}");
    assert!(
        text(&crashed).contains("stopped during this call"),
        "{crashed}"
    );

    // B's queued call is served by the respawned child.
    let after = b.response(&json!("after"), Duration::from_secs(30));
    assert_eq!(text(&after), "still here");
    let second_pid = text(&a.call("pid", json!({})));
    assert_ne!(first_pid, second_pid);
    assert_eq!(read_lines(&spawns).len(), 2);

    let status = control(&env.socket, "status", Value::Null).unwrap();
    let up = &status["upstreams"][0];
    assert_eq!(up["restarts"], 1);
    assert!(up["lastError"].as_str().unwrap().contains("exited"), "{up}");
    assert_eq!(up["sessions"].as_array().unwrap().len(), 2);
}

#[test]
fn a_child_that_cannot_start_leaves_the_daemon_serving_and_says_why() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {
        "command": env.path("no-such-binary"),
        "credentials": {"source": "none"},
    }}}));
    let _daemon = env.daemon();
    let mut s = env.shim();
    let init = s.request(
        "initialize",
        json!({"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}),
    );
    assert_eq!(init["error"]["code"], -32000, "{init}");
    assert!(
        init["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not start"),
        "{init}"
    );
    // The daemon is still there and reports the failure.
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["state"], "failed");
    assert!(
        status["upstreams"][0]["lastError"]
            .as_str()
            .unwrap()
            .contains("no-such-binary")
    );

    // Once the command exists, the next call retries and succeeds.
    std::os::unix::fs::symlink(fake_mcp(), env.path("no-such-binary")).unwrap();
    std::thread::sleep(Duration::from_millis(3100));
    let r = s.call("echo", json!({"text": "recovered"}));
    assert_eq!(text(&r), "recovered", "{r}");
}

#[test]
fn restart_replaces_the_child_and_sessions_stay() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let before = text(&s.call("pid", json!({})));
    let out = env.run(&["restart"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("restarted google"), "{out}");
    let after = text(&s.call("pid", json!({})));
    assert_ne!(before, after);
    assert!(!pid_alive(before.parse().unwrap()));
}
