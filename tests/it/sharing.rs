//! Sharing chosen per server: `shared` (one child for everyone), `per-project` (one child per
//! project directory, running in it) and `per-session` (each session its own child, stopped
//! with the session); `status` shows each instance.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn shim_in(env: &Env, project: &std::path::Path) -> Shim {
    let mut cmd = env.cmd();
    cmd.env("CLAUDE_PROJECT_DIR", project);
    let mut s = env.stdio_server(cmd, &["mcp"]);
    s.initialize();
    s
}

#[test]
fn per_project_servers_run_one_child_per_project_in_its_directory() {
    let env = Env::new();
    let pids = env.path("pids");
    env.write_fake_config(json!({"sharing": "per-project", "env": {"FAKE_MCP_PID_FILE": pids}}));
    let (a, b) = (env.path("project-a"), env.path("project-b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let _d = env.daemon();
    let mut in_a = shim_in(&env, &a);
    let mut in_b = shim_in(&env, &b);
    let mut in_a_too = shim_in(&env, &a);
    let (pa, pb, pa2) = (
        text(&in_a.call("pid", json!({}))),
        text(&in_b.call("pid", json!({}))),
        text(&in_a_too.call("pid", json!({}))),
    );
    assert_ne!(pa, pb, "one child per project");
    assert_eq!(pa, pa2, "sessions of one project share it");
    assert_eq!(read_lines(&pids).len(), 2);
    let cwd = text(&in_b.call("cwd", json!({})));
    assert_eq!(
        std::fs::canonicalize(&cwd).unwrap(),
        std::fs::canonicalize(&b).unwrap()
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let instances: Vec<&Value> = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["instance"].is_string())
        .collect();
    assert_eq!(instances.len(), 2, "{status}");
    assert!(instances.iter().all(|u| u["sharing"] == "per-project"));
}

#[test]
fn per_session_servers_give_each_session_its_own_child_and_stop_it_with_the_session() {
    let env = Env::with_fake(json!({"sharing": "per-session"}));
    let _d = env.daemon();
    let mut one = env.shim();
    let mut two = env.shim();
    one.initialize();
    two.initialize();
    let p1: u32 = text(&one.call("pid", json!({}))).parse().unwrap();
    let p2: u32 = text(&two.call("pid", json!({}))).parse().unwrap();
    assert_ne!(p1, p2);
    drop(one);
    wait_gone(
        "the session's child to stop with it",
        &[p1],
        Duration::from_secs(10),
    );
    assert!(pid_alive(p2));
    assert_eq!(text(&two.call("echo", json!({"text": "mine"}))), "mine");
}

#[test]
fn the_default_sharing_follows_the_kind_of_server() {
    let env = Env::new();
    env.write_config(&json!({"servers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
        "browser": {"command": "npx", "args": ["@playwright/mcp@latest"]},
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "pinned": {"command": "npx", "args": ["@playwright/mcp"], "sharing": "shared"},
    }}));
    let _d = env.daemon();
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let sharing = |name: &str| {
        status["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == name)
            .map(|u| u["sharing"].clone())
            .unwrap()
    };
    assert_eq!(sharing("files"), "per-project");
    assert_eq!(sharing("browser"), "per-session");
    assert_eq!(sharing("time"), "shared");
    assert_eq!(sharing("pinned"), "shared", "config decides over the guess");
    // Nothing was started: an idle machine runs the daemon and nothing else.
    assert!(
        status["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["state"] == "idle")
    );
}
