//! The commands a person runs: status, tools, call, restart, stop, logs; their output and exit
//! codes (0 success, 1 the operation failed, 2 usage or environment).

use crate::support;

use serde_json::{Value, json};
use support::*;

#[test]
fn status_tools_and_call_through_a_running_daemon() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    env.wait_upstream_ready();

    let out = env.run(&["tools"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("echo"), "{out}");
    assert!(out.stdout.trim_end().ends_with("tools"), "{out}");
    let out = env.run(&["tools", "--json"]);
    let tools: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(tools[0]["name"], "echo");

    let out = env.run(&["call", "echo", r#"{"text":"hi there"}"#]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(out.stdout.trim(), "hi there");
    let out = env.run(&["call", "fail", "{}"]);
    assert_eq!(out.status, Some(1), "a tool's isError exits 1: {out}");
    assert!(out.stdout.contains("failed on purpose"));
    let out = env.run(&["call", "echo", "{not json"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("not valid JSON"), "{out}");
    let out = env.run(&["call", "echo", r#"{"text":"j"}"#, "--json"]);
    let r: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["structuredContent"]["echo"], "j");

    let out = env.run(&["status"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("google · ready"), "{out}");
    assert!(out.stdout.contains("coogle daemon"), "{out}");
    assert!(out.stdout.contains("calls"), "{out}");
    let out = env.run(&["status", "--json"]);
    let s: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(s["upstreams"][0]["state"], "ready");
    // The CLI's own calls were made as sessions (rmcp over the socket, like an agent).
    assert_eq!(s["upstreams"][0]["stats"]["calls"], 3);

    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    let out = env.run(&["status"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("no coogle daemon is running"), "{out}");
    assert!(out.stderr.contains("hint:"), "{out}");

    let out = env.run(&["logs", "-n", "5"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.lines().count() <= 5);
}

#[test]
fn a_broken_config_is_a_clear_error_naming_file_and_line() {
    let env = Env::new();
    std::fs::write(
        &env.config,
        "{\n  \"servers\": {\n    \"google\": { \"command\": oops }\n  }\n}\n",
    )
    .unwrap();
    for args in [&["status"][..], &["serve"][..]] {
        let out = env.run(args);
        assert_eq!(out.status, Some(2), "{out}");
        assert!(
            out.stderr.contains(&env.config.display().to_string()),
            "{out}"
        );
        assert!(out.stderr.contains("line 3"), "{out}");
    }
}

#[test]
fn the_original_flat_config_runs_its_upstream_as_google() {
    let env = Env::new();
    env.write_config(&json!({
        "socketPath": env.socket,
        "mcp": {"command": fake_mcp(), "args": []},
        "credentials": {"source": "manual", "clientId": "id-123.apps.googleusercontent.com", "clientSecret": "GOCSPX-secret"},
        "callTimeoutMs": 30000,
        "logLevel": "debug"
    }));
    let _d = env.daemon();
    let mut s = env.shim_with(&["--server", "google"]);
    s.initialize();
    // Credentials reach the child's environment ...
    assert_eq!(
        text(&s.call("env", json!({"name": "GOOGLE_OAUTH_CLIENT_ID"}))),
        "id-123.apps.googleusercontent.com"
    );
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["name"], "google");
    assert_eq!(status["upstreams"][0]["callTimeoutMs"], 30000);
    // ... and never the log.
    let log = std::fs::read_to_string(&env.log).unwrap_or_default();
    assert!(!log.contains("GOCSPX-secret"));
}

#[test]
fn credentials_come_from_claude_json() {
    let env = Env::new();
    std::fs::write(
        env.home.join(".claude.json"),
        serde_json::to_vec_pretty(&json!({
            "numStartups": 3,
            "projects": {"/work/x": {"mcpServers": {"coogle": {
                "command": "uvx", "args": ["workspace-mcp"],
                "env": {"GOOGLE_OAUTH_CLIENT_ID": "from-claude-json", "GOOGLE_OAUTH_CLIENT_SECRET": "s3cret"}
            }}}}
        }))
        .unwrap(),
    )
    .unwrap();
    env.write_config(&json!({"mcp": {"command": fake_mcp(), "args": []}}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    assert_eq!(
        text(&s.call("env", json!({"name": "GOOGLE_OAUTH_CLIENT_ID"}))),
        "from-claude-json"
    );
    assert_eq!(
        text(&s.call("env", json!({"name": "GOOGLE_OAUTH_CLIENT_SECRET"}))),
        "s3cret"
    );
}

#[test]
fn logs_follow_prints_new_lines_and_survives_rotation() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    std::fs::create_dir_all(env.log.parent().unwrap()).unwrap();
    std::fs::write(&env.log, "old line 1\nold line 2\n").unwrap();
    let mut child = env
        .cmd()
        .args(["logs", "-f", "-n", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "old line 2\n", "-n 1 shows the last line only");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&env.log)
        .unwrap();
    writeln!(f, "new line").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "new line\n");
    // Rotation: the file is renamed away and a new one started.
    std::fs::rename(&env.log, env.log.with_extension("log.1")).unwrap();
    // Longer than what was read of the old file, so only the file's identity tells.
    let long = format!("after rotation {}\n", "z".repeat(200));
    std::fs::write(&env.log, &long).unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, long);
    let _ = child.kill();
    let _ = child.wait();
}

/// Regression (issue 20, item 12): `--server` had an empty description in `tools`, `call` and
/// `restart`. Every option of every command says what it is.
#[test]
fn every_option_is_described() {
    let env = Env::new();
    let commands = [
        "serve",
        "mcp",
        "status",
        "tools",
        "call",
        "restart",
        "reload",
        "stop",
        "setup",
        "doctor",
        "uninstall",
        "share",
        "unshare",
        "self-update",
        "logs",
    ];
    for command in commands {
        let out = env.run(&[command, "-h"]);
        assert_eq!(out.status, Some(0), "{out}");
        let options = out
            .stdout
            .split("Options:")
            .nth(1)
            .unwrap_or_else(|| panic!("no options: {out}"));
        let lines: Vec<&str> = options.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if !trimmed.starts_with('-') {
                continue;
            }
            // `--name <VALUE>  What it is`, or (clap wraps long help) the description on the
            // next, deeper-indented line.
            let same_line = trimmed.split("  ").filter(|s| !s.trim().is_empty()).count() > 1;
            let indent = line.len() - trimmed.len();
            let next_line = lines.get(i + 1).is_some_and(|n| {
                let t = n.trim_start();
                !t.is_empty() && !t.starts_with('-') && n.len() - t.len() > indent
            });
            assert!(
                same_line || next_line,
                "`coogle {command}`: {trimmed:?} has no description:\n{out}"
            );
        }
    }
}
