//! `coogle doctor`: ✓ for a working installation (exit 0), ✗ with the fix for what is wrong
//! (exit 1).

use crate::support;

use std::fs;

use serde_json::json;
use support::{Env, fake_mcp};

fn installed_env() -> Env {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp(), "credentials": {
        "source": "manual", "clientId": "id-0123456789", "clientSecret": "GOCSPX-doctor-secret"}}}}));
    fs::write(
        env.home.join(".claude.json"),
        support::client_fixture("claude.json"),
    )
    .unwrap();
    let out = env
        .cmd()
        .args(["setup", "--yes", "--skip-test"])
        .env("COOGLE_SYSTEMCTL", env.path("none"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    env
}

#[test]
fn healthy_installation() {
    let env = installed_env();
    let _daemon = env.daemon();
    env.wait_upstream_ready();
    let out = env.run(&["doctor"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(!out.stdout.contains('✗'), "{out}");
    assert!(out.stdout.contains("points at this binary"), "{out}");
    assert!(out.stdout.contains("secret <20 chars>"), "{out}");
    assert!(!out.stdout.contains("GOCSPX-doctor-secret"), "{out}");
    assert!(out.stdout.contains("upstream google connected"), "{out}");
    assert!(
        out.stdout
            .contains("✓ upstream google: no Google sign-in pending"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains(&format!("daemon {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(out.stdout.contains("is private (0700)"), "{out}");
}

#[test]
fn problems_are_crossed_with_their_fix() {
    let env = installed_env();
    // A Google entry that bypasses coogle, and a broken config.
    let claude = env.home.join(".claude.json");
    let mut doc: serde_json::Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    doc["mcpServers"]["direct"] = json!({"command": "uvx", "env": {"GOOGLE_OAUTH_CLIENT_ID": "x"}});
    fs::write(&claude, serde_json::to_vec(&doc).unwrap()).unwrap();
    fs::write(&env.config, b"{ not json").unwrap();
    let out = env.run(&["doctor"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stdout.contains("✗ config: could not parse"), "{out}");
    assert!(
        out.stdout
            .contains("mcpServers.direct starts Google Workspace MCP directly"),
        "{out}"
    );
    assert!(out.stdout.contains("fix: `coogle setup --yes`"), "{out}");
}

/// A pending Google sign-in (the upstream answered a call with an authorization URL) is a ✗
/// with the URL to open, and doctor exits 1 until a call goes through.
#[test]
fn a_pending_sign_in_is_crossed_with_its_url() {
    const URL: &str = "https://accounts.google.com/o/oauth2/auth?client_id=x&state=doctor";
    let env = installed_env();
    let _daemon = env.daemon();
    env.wait_upstream_ready();
    let auth =
        format!("**ACTION REQUIRED: Google Authentication Needed**\nAuthorization URL: {URL}");
    let args = serde_json::to_string(&json!({"ms": 1, "text": auth})).unwrap();
    let _ = env.run(&["call", "sleep", &args]);
    let out = env.run(&["doctor"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stdout
            .contains("✗ upstream google waits for a Google sign-in"),
        "{out}"
    );
    assert!(out.stdout.contains(&format!("fix: open {URL}")), "{out}");
    // A call that goes through clears it.
    let _ = env.run(&["call", "echo", r#"{"text":"ok"}"#]);
    let out = env.run(&["doctor"]);
    assert!(out.stdout.contains("no Google sign-in pending"), "{out}");
}

/// README's own entry, `"command": "coogle"`, is this binary when `coogle` on the client's PATH
/// is; another binary called `coogle`, or none on PATH, is a ✗ that says which.
#[test]
fn a_bare_coogle_entry_is_resolved_on_path() {
    let env = Env::new();
    // The default socket and config, so the shim entry is README's plain `coogle mcp`; the
    // socket stays private through config.json's socketPath.
    env.write_config(&json!({
        "socketPath": env.socket,
        "servers": {"google": {"command": fake_mcp(), "credentials": {"source": "none"}}}
    }));
    fs::write(
        env.home.join(".claude.json"),
        serde_json::to_vec(&json!({"mcpServers": {"google": {
            "type": "stdio", "command": "coogle", "args": ["mcp"]
        }}}))
        .unwrap(),
    )
    .unwrap();
    let bin = env.path("bin");
    fs::create_dir(&bin).unwrap();
    let doctor = |path: &std::ffi::OsStr| {
        let mut cmd = env.cmd();
        cmd.env_remove("COOGLE_SOCKET")
            .env_remove("COOGLE_CONFIG")
            .env("PATH", path);
        support::Output::of(cmd, &["doctor"])
    };
    let with_bin = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();

    std::os::unix::fs::symlink(support::COOGLE, bin.join("coogle")).unwrap();
    let out = doctor(&with_bin);
    assert!(
        out.stdout
            .contains("✓ Claude Code: mcpServers.google points at this binary"),
        "{out}"
    );
    assert!(!out.stdout.contains("not this binary"), "{out}");
    assert!(!out.stdout.contains("no coogle entry"), "{out}");

    // Another `coogle` first on PATH.
    fs::remove_file(bin.join("coogle")).unwrap();
    support::write_executable(&bin.join("coogle"), "#!/bin/sh\n");
    let out = doctor(&with_bin);
    assert!(
        out.stdout
            .contains("✗ Claude Code: mcpServers.google runs coogle, not this binary"),
        "{out}"
    );

    // None at all.
    let out = doctor(std::ffi::OsStr::new("/usr/bin:/bin"));
    assert!(
        out.stdout.contains(
            "✗ Claude Code: mcpServers.google runs `coogle`, which Claude Code cannot find"
        ),
        "{out}"
    );
    assert!(
        out.stdout.contains(
            "`coogle setup --yes --client claude-code` writes this binary's absolute path"
        ),
        "{out}"
    );
}

/// An upstream command on this shell's PATH but not on the PATH a daemon started by launchd,
/// systemd or Claude Desktop has: a ✗ naming the fix; recording the PATH (`path`) clears it.
#[test]
fn a_command_only_this_shell_finds_is_crossed() {
    let env = Env::new();
    let bin = env.path("bin");
    fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(fake_mcp(), bin.join("only-here-mcp")).unwrap();
    let with_bin = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let server = json!({"command": "only-here-mcp", "credentials": {"source": "none"}});
    env.write_config(&json!({"servers": {"google": server}}));
    let mut cmd = env.cmd();
    cmd.env("PATH", &with_bin);
    let out = support::Output::of(cmd, &["doctor"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stdout.contains(&format!(
            "✗ google: only-here-mcp is at {}, but a daemon started without your shell's PATH",
            bin.join("only-here-mcp").display()
        )),
        "{out}"
    );
    assert!(
        out.stdout.contains(
            "fix: `coogle setup --yes` records this shell's PATH in config.json (`path`)"
        ),
        "{out}"
    );

    env.write_config(&json!({"path": [bin], "servers": {"google": server}}));
    let mut cmd = env.cmd();
    cmd.env("PATH", &with_bin);
    let out = support::Output::of(cmd, &["doctor"]);
    assert!(
        out.stdout.contains(&format!(
            "✓ google: only-here-mcp found at {}",
            bin.join("only-here-mcp").display()
        )),
        "{out}"
    );
}

/// A stand-in for the service manager that says the service is loaded and running (systemd's
/// `is-active` succeeds, launchd prints `state = running`) while nothing serves.
fn manager_saying_running(env: &Env) -> std::path::PathBuf {
    let manager = env.path("manager");
    support::write_executable(
        &manager,
        "#!/bin/sh\ncase \"$*\" in\n'print gui/'*) echo 'state = running' ;;\nesac\nexit 0\n",
    );
    manager
}

/// Every fix doctor printed: none may tie up the terminal (`coogle serve` runs in the
/// foreground until stopped).
fn assert_fixes_return(out: &support::Output) {
    for fix in out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("fix:"))
    {
        assert!(
            !fix.contains("coogle serve"),
            "a fix that ties up the terminal: {out}"
        );
    }
}

/// Regression (issue 20, item 6): with the unit file written but no systemd running (a
/// container, WSL), doctor said ✗ "no daemon answers … start the service, or run `coogle
/// serve`" and exited 1, while without a unit file the same state was a `!`. In both, the
/// first session starts the daemon: a `!`. A service the manager says runs while nothing
/// answers is a ✗, with a fix that returns.
#[test]
fn a_daemon_started_on_demand_is_not_a_problem() {
    let env = installed_env();
    // Setup's last step ran the client entry, which started a daemon on demand: none now.
    assert_eq!(env.run(&["stop"]).status, Some(0));
    let unit = env.service_file();
    let unit_text = fs::read(&unit).expect("setup wrote the service file");
    for with_unit in [true, false] {
        let out = env.run(&["doctor"]);
        assert_eq!(out.status, Some(0), "with unit file: {with_unit}: {out}");
        assert!(!out.stdout.contains('✗'), "{out}");
        assert!(
            out.stdout.contains("! no daemon answers on")
                && out.stdout.contains("(it starts on demand)"),
            "{out}"
        );
        assert_fixes_return(&out);
        if with_unit {
            fs::remove_file(&unit).unwrap();
        }
    }

    fs::write(&unit, unit_text).unwrap();
    let manager = manager_saying_running(&env);
    let mut cmd = env.cmd();
    cmd.env("COOGLE_SYSTEMCTL", &manager)
        .env("COOGLE_LAUNCHCTL", &manager);
    let out = support::Output::of(cmd, &["doctor"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stdout
            .contains("✗ the service runs, but no daemon answers on"),
        "{out}"
    );
    assert!(out.stdout.contains("`coogle logs` says why"), "{out}");
    assert_fixes_return(&out);
}

/// Regression (issue 20, item 12): doctor before setup crossed what setup would do, and named
/// an entry "coogle" in `~/.claude.json` that the person never made (the built-in defaults'
/// credentials source). Before setup it says so, once, and exits 0.
#[test]
fn before_setup_doctor_says_to_run_setup() {
    let env = Env::new();
    fs::write(
        env.home.join(".claude.json"),
        serde_json::to_vec(&json!({"mcpServers": {"fs": {"command": "npx", "args": ["x"]}}}))
            .unwrap(),
    )
    .unwrap();
    let mut cmd = env.cmd();
    cmd.env_remove("COOGLE_CONFIG");
    let out = support::Output::of(cmd, &["doctor"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(!out.stdout.contains('✗'), "{out}");
    assert!(!out.stdout.contains("\"coogle\""), "{out}");
    assert!(
        out.stdout
            .trim_end()
            .ends_with("coogle is not set up yet: `coogle setup` does it."),
        "{out}"
    );
}

/// Regression (issue 20, item 5): typos in config.json (`idelStopMs`, `servers.x.comand`) were
/// a raw `WARN coogle::config::read` line on every command, with no suggestion, and doctor said
/// "✓ config loads" and "Everything looks right". Doctor now names each with a `!` and the key
/// it most likely meant; other commands say nothing about them.
#[test]
fn config_typos_are_named_with_a_suggestion() {
    let env = Env::new();
    env.write_config(&json!({
        "idelStopMs": 60000,
        "servers": {"google": {"command": fake_mcp(), "comand": "x",
                               "credentials": {"source": "none"}}}
    }));
    let out = env.run(&["doctor"]);
    assert!(
        out.stdout
            .contains("! config: unknown key idelStopMs (did you mean idleStopMs?)"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("! config: unknown key servers.google.comand (did you mean command?)"),
        "{out}"
    );
    assert!(out.stdout.contains("fix: rename it to idleStopMs"), "{out}");
    assert!(!out.stdout.contains("Everything looks right"), "{out}");
    for args in [&["status"][..], &["tools"], &["stop"]] {
        let out = env.run(args);
        assert!(
            !out.stderr.contains("unknown") && !out.stderr.contains("WARN"),
            "{out}"
        );
    }
}

/// Regression (issue 20, items 10 and 12): an upstream whose command is missing read "✗
/// upstream x is failed could not start … `coogle doctor` says how to fix it", inside doctor;
/// and a server that has nothing to do with Google got "no Google sign-in pending".
#[test]
fn a_failed_upstream_reads_well_and_only_google_signs_in() {
    let env = Env::new();
    env.write_config(&json!({"servers": {
        "time": {"command": fake_mcp(), "credentials": {"source": "none"}},
        "gone": {"command": "no-such-mcp-server-9f3a", "credentials": {"source": "none"}},
    }}));
    let _d = env.daemon();
    support::demand_start(&env.socket, Some("time"));
    support::demand_start(&env.socket, Some("gone"));
    support::wait_for(
        "both upstreams to settle",
        std::time::Duration::from_secs(30),
        || {
            support::control(&env.socket, "status", serde_json::Value::Null).is_ok_and(|s| {
                s["upstreams"][0]["state"] == "ready" && s["upstreams"][1]["state"] == "failed"
            })
        },
    );
    let out = env.run(&["doctor"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stdout.contains("✓ upstream time connected"), "{out}");
    assert!(
        out.stdout
            .contains("✗ upstream gone (failed): could not start `no-such-mcp-server-9f3a`"),
        "{out}"
    );
    assert!(!out.stdout.contains("`coogle doctor` says"), "{out}");
    assert!(!out.stdout.contains("is failed"), "{out}");
    assert!(!out.stdout.contains("Google sign-in"), "{out}");
    assert!(
        out.stdout
            .contains("`coogle restart --server gone` retries"),
        "{out}"
    );
}
