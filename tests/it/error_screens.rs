//! The error screens a newcomer meets, as snapshots under `tests/snapshots/` (see
//! `support::snapshot`): no daemon, a taken socket, a broken config, an unknown key, an
//! unknown upstream, doctor on a broken install, self-update offline, `restart --daemon` with no
//! daemon, with an older binary on disk and with one that is not coogle. A change to any message
//! shows in review as a change to one of these files. Each screen also holds the rule they
//! all keep: every cause is said once.

use crate::support;

use std::os::unix::fs::DirBuilderExt;

use serde_json::{Value, json};
use support::snapshot::Screen;
use support::*;

fn initialize() -> Value {
    json!({"protocolVersion": "2025-11-25", "capabilities": {},
           "clientInfo": {"name": "a-client", "version": "1"}})
}

/// What an MCP client is told when it initializes through `coogle mcp` with `extra` args.
fn mcp_answer(env: &Env, extra: &[&str]) -> String {
    let mut s = env.shim_with(extra);
    let answer = s.request("initialize", initialize());
    serde_json::to_string_pretty(&answer["error"]).unwrap()
}

/// No line of an error screen says the same thing twice (the cause in the message and again
/// as `Caused by:`).
fn said_once(out: &Output) {
    let lines: Vec<&str> = out.stderr.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if let Some(cause) = line.trim_start().strip_prefix("Caused by: ") {
            assert!(
                !lines[..i].iter().any(|l| l.contains(cause)),
                "a cause said twice: {out}"
            );
        }
    }
}

#[test]
fn no_daemon() {
    let env = Env::with_fake(json!({}));
    let mut screen = Screen::new();
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["restart"],
        &["stop"],
    ] {
        let out = env.run(args);
        said_once(&out);
        screen.command(&format!("coogle {}", args.join(" ")), &out);
    }
    screen.assert_matches("no_daemon", &env);
}

/// Regression (issue 20, item 10): `coogle serve` on a socket someone else listens on said
/// its error twice on a terminal (the log line and the error).
#[test]
fn taken_socket() {
    let env = Env::with_fake(json!({}));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(env.socket.parent().unwrap())
        .unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(&env.socket).unwrap();
    // As on a terminal: the daemon's log goes to stderr too.
    let out = env.run(&["serve", "--log-stderr"]);
    said_once(&out);
    assert_eq!(
        out.stderr.matches("is answering connections").count(),
        1,
        "{out}"
    );
    Screen::new()
        .command("coogle serve --log-stderr", &out)
        .assert_matches("taken_socket", &env);
}

#[test]
fn broken_config() {
    let env = Env::new();
    std::fs::write(
        &env.config,
        br#"{"servers": {"google": {"command": "uvx", "ar"#,
    )
    .unwrap();
    let mut screen = Screen::new();
    for args in [&["tools"][..], &["status"], &["reload"]] {
        let out = env.run(args);
        said_once(&out);
        screen.command(&format!("coogle {}", args.join(" ")), &out);
    }
    screen.section("coogle mcp answers initialize with", &mcp_answer(&env, &[]));
    // A config file named but missing is not one to fix or move aside.
    let mut cmd = env.cmd();
    cmd.env("COOGLE_CONFIG", env.path("missing.json"));
    let out = Output::of(cmd, &["tools"]);
    screen.command("COOGLE_CONFIG=[TMP]/missing.json coogle tools", &out);
    screen.assert_matches("broken_config", &env);
}

#[test]
fn unknown_key() {
    let env = Env::new();
    let server = json!({"command": fake_mcp(), "credentials": {"source": "none"}});
    env.write_config(&json!({"servers": {"google": server}}));
    let _d = env.daemon();
    let mut typo = server.clone();
    typo["comand"] = json!("x");
    env.write_config(&json!({"idelStopMs": 60000, "servers": {"google": server, "time": typo}}));
    let mut screen = Screen::new();
    screen.command("coogle reload", &env.run(&["reload"]));
    let doctor = env.run(&["doctor"]);
    let lines: Vec<&str> = doctor.stdout.lines().collect();
    let mut said = String::new();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("unknown key") {
            said.push_str(&format!("{l}\n{}\n", lines.get(i + 1).unwrap_or(&"")));
        }
    }
    screen.section("coogle doctor says", &said);
    // Other commands say nothing about them.
    screen.command("coogle restart", &env.run(&["restart"]));
    screen.assert_matches("unknown_key", &env);
}

/// Regression (issue 20, item 10): `coogle tools --server nosuch` printed `error: not_found:
/// …` and then the identical `Caused by: not_found: …`.
#[test]
fn unknown_upstream() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut screen = Screen::new();
    for args in [
        &["tools", "--server", "nosuch"][..],
        &["call", "--server", "nosuch", "echo"],
        &["restart", "--server", "nosuch"],
    ] {
        let out = env.run(args);
        said_once(&out);
        assert_eq!(out.stderr.matches("no upstream named").count(), 1, "{out}");
        screen.command(&format!("coogle {}", args.join(" ")), &out);
    }
    screen.section(
        "coogle mcp --server nosuch answers initialize with",
        &mcp_answer(&env, &["--server", "nosuch"]),
    );
    // And a tool the upstream does not have: the server's own words, once (it was
    // `MCP error: Mcp error: -32602: …`).
    let out = env.run(&["call", "nosuchtool"]);
    said_once(&out);
    screen.command("coogle call nosuchtool", &out);
    screen.assert_matches("unknown_upstream", &env);
}

/// Doctor on an installation broken after setup: config.json cut short, a Google entry that
/// bypasses coogle, a client entry that runs another binary. The lines about this machine's
/// own programs (uvx, node) are left out: they differ from machine to machine.
#[cfg(target_os = "linux")]
#[test]
fn doctor_on_a_broken_install() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp(),
        "credentials": {"source": "none"}}}}));
    let claude = env.home.join(".claude.json");
    std::fs::write(&claude, b"{}").unwrap();
    let mut cmd = env.cmd();
    cmd.env("COOGLE_SYSTEMCTL", env.path("none"));
    let setup = Output::of(cmd, &["setup", "--yes", "--skip-test", "--skip-verify"]);
    assert_eq!(setup.status, Some(0), "{setup}");
    let _ = env.run(&["stop"]);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&claude).unwrap()).unwrap();
    doc["mcpServers"]["gmail"] = json!({"command": "uvx", "args": ["workspace-mcp"],
        "env": {"GOOGLE_OAUTH_CLIENT_ID": "x"}});
    doc["mcpServers"]["old"] = json!({"command": "/opt/old/coogle", "args": ["mcp"]});
    std::fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    std::fs::write(&env.config, b"{\"servers\": {").unwrap();

    let mut out = env.run(&["doctor"]);
    let mut kept = Vec::new();
    let mut skip_fix = false;
    for line in out.stdout.lines() {
        let program = ["uvx", "node"].iter().any(|p| {
            line.starts_with(&format!("  ✓ {p} at "))
                || line.starts_with(&format!("  ! {p} not found"))
        });
        if program {
            skip_fix = true;
            continue;
        }
        if skip_fix && line.starts_with("    fix:") {
            continue;
        }
        skip_fix = false;
        kept.push(line);
    }
    out.stdout = kept.join("\n") + "\n";
    Screen::new()
        .command("coogle doctor", &out)
        .assert_matches("doctor_broken_install", &env);
}

/// Regression (issue 20, item 10): `self-update --check` offline printed six `Caused by:`
/// lines, two of them identical.
#[test]
fn self_update_offline() {
    let env = Env::new();
    // A port nothing listens on: connection refused, as offline.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = env.cmd();
    cmd.env("COOGLE_UPDATE_API_URL", format!("http://127.0.0.1:{port}"))
        .env_remove("GH_TOKEN")
        .env_remove("GITHUB_TOKEN");
    let out = Output::of(cmd, &["self-update", "--check"]);
    said_once(&out);
    Screen::new()
        .command("coogle self-update --check", &out)
        .assert_matches("self_update_offline", &env);
}

/// `coogle restart --daemon` when it cannot upgrade in place: no daemon (nothing to do), an
/// older coogle on disk, and a file that is not coogle. Each says why once, and that the
/// daemon serves on.
#[test]
fn restart_daemon_refused() {
    let env = Env::with_fake(json!({}));
    let mut screen = Screen::new();
    let out = env.run(&["restart", "--daemon"]);
    said_once(&out);
    screen.command("coogle restart --daemon", &out);
    let (mut daemon, installed) = support::installed::installed_daemon(&env);
    for (what, script) in [
        ("an older coogle", "#!/bin/sh\necho 'coogle 0.0.1 (old)'\n"),
        ("not coogle", "#!/bin/sh\necho 'something else 1.0'\n"),
    ] {
        let tmp = env.path("replacement");
        support::write_executable(&tmp, script);
        std::fs::rename(&tmp, &installed).unwrap();
        let mut out = env.run(&["restart", "--daemon"]);
        // The running daemon's version, as the other screens show it.
        out.stderr = out
            .stderr
            .replace(concat!("(", env!("CARGO_PKG_VERSION"), ")"), "([VERSION])");
        assert_eq!(out.status, Some(1), "{what}: {out}");
        assert_eq!(out.stderr.matches("serves on").count(), 1, "{what}: {out}");
        said_once(&out);
        screen.command(&format!("coogle restart --daemon  # {what} on disk"), &out);
    }
    let _ = env.run(&["stop"]);
    let _ = daemon.wait();
    screen.assert_matches("restart_daemon_refused", &env);
}
