//! After `coogle share --all`, the children follow each server's sharing: none runs before the
//! first request its instance's own cache cannot answer; then one for a shared server, one per project for a
//! per-project one, one per session for a per-session one (ended with its session); an idle
//! child stops and starts again on demand; and `unshare --all` gives the original bytes back.

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// Three user-scope servers whose command lines make `share` guess each sharing mode; each
/// records the pid of every start in its own file. Their tool lists are the same for everyone
/// (`cacheScope: "public"`), so the cache may answer them (a private one never is).
fn claude_json(env: &Env) -> Value {
    let fake = fake_mcp().to_string_lossy().into_owned();
    let entry = |arg: &str| {
        json!({"type": "stdio", "command": fake, "args": [arg],
               "env": {"FAKE_MCP_PID_FILE": env.path(&format!("{arg}.pids")),
                       "FAKE_MCP_CACHE_SCOPE": "public"}})
    };
    json!({"mcpServers": {
        "notes": entry("notes"),
        "files": entry("server-filesystem"),
        "browser": entry("playwright"),
    }})
}

fn starts(env: &Env, arg: &str) -> usize {
    read_lines(&env.path(&format!("{arg}.pids"))).len()
}

/// A Claude Code session of `server` working in `project`.
fn session(env: &Env, server: &str, project: &Path) -> Shim {
    let mut cmd = env.cmd();
    cmd.env("CLAUDE_PROJECT_DIR", project);
    env.stdio_server(cmd, &["mcp", "--server", server])
}

fn status(env: &Env) -> Value {
    control(&env.socket, "status", Value::Null).unwrap()
}

/// The running children of `server`, by instance.
fn running(env: &Env, server: &str) -> Vec<u64> {
    ready_pids(&status(env), server)
}

/// The children of `server` a `status` answer shows running.
fn ready_pids(status: &Value, server: &str) -> Vec<u64> {
    status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["name"] == server && u["state"] == "ready")
        .filter_map(|u| u["pid"].as_u64())
        .collect()
}

#[test]
fn after_share_all_children_follow_each_servers_sharing() {
    let env = Env::new();
    let claude = env.home.join(".claude.json");
    let original = serde_json::to_vec_pretty(&claude_json(&env)).unwrap();
    std::fs::write(&claude, &original).unwrap();
    let out = env.run(&["share", "--all"]);
    assert_eq!(out.status, Some(0), "{out}");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    let sharing = |c: &Value, s: &str| {
        c["servers"][s]["sharing"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    };
    assert_eq!(
        [
            sharing(&config, "notes"),
            sharing(&config, "files"),
            sharing(&config, "browser")
        ],
        ["shared", "per-project", "per-session"],
        "{config:#}"
    );
    config["idleStopMs"] = json!(1000);
    env.write_config(&config);
    let (alpha, beta) = (env.path("alpha"), env.path("beta"));
    std::fs::create_dir_all(&alpha).unwrap();
    std::fs::create_dir_all(&beta).unwrap();

    // An earlier day's use: each server ran once, so its answers are in the cache on disk.
    {
        let mut d = env.daemon();
        for (server, arg) in [
            ("notes", "notes"),
            ("files", "server-filesystem"),
            ("browser", "playwright"),
        ] {
            let mut s = session(&env, server, &alpha);
            s.initialize();
            s.request("tools/list", json!({}));
            assert_eq!(starts(&env, arg), 1, "{server}");
        }
        d.signal_and_wait(libc::SIGTERM);
    }

    // Today: two sessions in alpha and one in beta open every server. The shared server and
    // alpha's project instance answer from their caches without a start; beta's project and
    // each session's browser have none of their own yet, so each waits for its own child
    // (never another instance's answers).
    let _d = env.daemon();
    let mut sessions = Vec::new();
    for project in [&alpha, &alpha, &beta] {
        for server in ["notes", "files", "browser"] {
            let mut s = session(&env, server, project);
            s.initialize();
            s.request("tools/list", json!({}));
            sessions.push((server, s));
        }
    }
    assert_eq!(
        (
            starts(&env, "notes"),
            starts(&env, "server-filesystem"),
            starts(&env, "playwright")
        ),
        (1, 2, 4),
        "only instances with no cache of their own started"
    );
    // Each session calls: one shared child, one per project, one per session.
    for (_, s) in sessions.iter_mut() {
        assert_eq!(text(&s.call("echo", json!({"text": "hi"}))), "hi");
    }
    assert_eq!(running(&env, "notes").len(), 1);
    assert_eq!(running(&env, "files").len(), 2);
    assert_eq!(running(&env, "browser").len(), 3);
    assert_eq!(
        (
            starts(&env, "notes"),
            starts(&env, "server-filesystem"),
            starts(&env, "playwright")
        ),
        (2, 3, 4)
    );

    // A per-session child ends with its session.
    let browsers = running(&env, "browser");
    let i = sessions.iter().position(|(s, _)| *s == "browser").unwrap();
    drop(sessions.remove(i));
    wait_status(
        &env.socket,
        "the session's browser child to go",
        Duration::from_secs(10),
        |s| ready_pids(s, "browser").len() == 2,
    );
    let gone: Vec<u64> = browsers
        .into_iter()
        .filter(|p| !running(&env, "browser").contains(p))
        .collect();
    wait_gone(
        "its process to exit",
        &[gone[0] as u32],
        Duration::from_secs(5),
    );

    // Everyone leaves: the shared child stops after idleStopMs, and starts again on demand.
    sessions.clear();
    wait_status(
        &env.socket,
        "the idle children to stop",
        Duration::from_secs(15),
        |s| ready_pids(s, "notes").is_empty() && ready_pids(s, "files").is_empty(),
    );
    let mut s = session(&env, "notes", &beta);
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "again"}))), "again");
    assert_eq!(starts(&env, "notes"), 3);
    drop(s);

    let out = env.run(&["unshare", "--all"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(
        std::fs::read(&claude).unwrap(),
        original,
        "unshare gave other bytes back"
    );
}
