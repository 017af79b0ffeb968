//! `coogle setup --yes` end to end in a sealed HOME, with the fake MCP server as the upstream:
//! config written 0600 with the credentials, test daemon, unit file (systemd unavailable and a
//! stand-in systemctl), ~/.claude.json patched with a byte-exact backup, verify, and a second
//! run that changes nothing.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{Env, fake_mcp};

const SECRET: &str = "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789";
const CLIENT_ID: &str = "999999999999-setuptest.apps.googleusercontent.com";

fn fixture(name: &str) -> Vec<u8> {
    support::client_fixture(name)
}

/// Setup with nothing that takes time: no service, no test daemon, no verify.
const QUIET_SETUP: &[&str] = &[
    "setup",
    "--yes",
    "--no-service",
    "--skip-verify",
    "--skip-test",
];

/// Every file under `dir` with its bytes and mode, except the daemon's own runtime output.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let s = p.to_string_lossy();
            if [
                "/.local/state/",
                "/.cache/",
                "/Library/Logs/",
                "/Library/Caches/",
            ]
            .iter()
            .any(|d| s.contains(d))
            {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.clone(),
                    fs::read(&p).unwrap_or_default(),
                    m.permissions().mode() & 0o777,
                ));
            }
        }
    }
    out.sort();
    out
}

fn setup_env() -> (Env, PathBuf, Vec<u8>) {
    let env = Env::new();
    // A user config in the native shape with an extra key setup must keep.
    env.write_config(&json!({
        "logLevel": "debug",
        "servers": {"google": {"command": fake_mcp(), "args": [], "maxConcurrent": 2}}
    }));
    fs::set_permissions(&env.config, fs::Permissions::from_mode(0o644)).unwrap();
    let original = fixture("claude.json");
    let claude = env.home.join(".claude.json");
    fs::write(&claude, &original).unwrap();
    (env, claude, original)
}

fn run_setup(env: &Env, extra: &[&str]) -> support::Output {
    let mut args = vec![
        "setup",
        "--yes",
        "--client-id",
        CLIENT_ID,
        "--client-secret-env",
        "SETUP_TEST_SECRET",
    ];
    args.extend_from_slice(extra);
    let mut cmd = env.cmd();
    cmd.env("SETUP_TEST_SECRET", SECRET)
        .env("COOGLE_SYSTEMCTL", env.path("no-systemctl"))
        .env("CI", "true");
    support::Output::of(cmd, &args)
}

#[test]
fn setup_yes_end_to_end_and_twice_changes_nothing() {
    let (env, claude, original) = setup_env();
    let out = run_setup(&env, &[]);
    assert_eq!(out.status, Some(0), "{out}");
    for step in 1..=9 {
        assert!(out.stdout.contains(&format!("[{step}/9]")), "{out}");
    }
    // Secrets never shown, lengths are.
    assert!(
        !out.stdout.contains(SECRET) && !out.stderr.contains(SECRET),
        "{out}"
    );
    assert!(!out.stdout.contains(CLIENT_ID), "{out}");
    assert!(
        out.stdout
            .contains(&format!("secret <{} chars>", SECRET.len())),
        "{out}"
    );
    // Test daemon and verify listed the fake server's tools.
    assert!(
        out.stdout.contains("a throwaway daemon started and listed"),
        "{out}"
    );
    assert!(out.stdout.contains("answered with"), "{out}");
    // systemd unavailable: said clearly, and setup went on.
    assert!(out.stdout.contains("is not available here"), "{out}");

    // Config: credentials written, the user's keys kept in order, mode 0600.
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["logLevel", "servers", "path"]
    );
    // The PATH a daemon started with a minimal environment searches (see minimal_path.rs).
    let own_path = std::env::var("PATH").unwrap();
    let first_own = own_path.split(':').find(|d| d.starts_with('/')).unwrap();
    assert_eq!(config["path"][0], first_own, "{config:#}");
    let google = &config["servers"]["google"];
    assert_eq!(google["maxConcurrent"], 2);
    assert_eq!(
        google["credentials"],
        json!({"source": "manual", "clientId": CLIENT_ID, "clientSecret": SECRET})
    );
    assert_eq!(
        fs::metadata(&env.config).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // ~/.claude.json: patched, backup = original bytes.
    let doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    let exe = fs::canonicalize(support::COOGLE).unwrap();
    let entry = &doc["mcpServers"]["google-workspace"];
    assert_eq!(entry["command"], json!(exe));
    // The test socket is not the default one, so the entry names it.
    assert_eq!(entry["args"], json!(["mcp", "--socket", env.socket]));
    assert_eq!(entry["type"], "stdio");
    let backups: Vec<PathBuf> = fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".claude.json.coogle-backup-"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(fs::read(&backups[0]).unwrap(), original);

    // The service file is there, running this binary.
    if cfg!(target_os = "macos") {
        let plist = plist::Value::from_file(env.service_file()).unwrap();
        let args = plist.as_dictionary().unwrap()["ProgramArguments"].clone();
        assert_eq!(
            args.as_array().unwrap()[0].as_string(),
            exe.to_str(),
            "{args:?}"
        );
    } else {
        let unit = fs::read_to_string(env.service_file()).unwrap();
        assert!(
            unit.contains(&format!("ExecStart={} serve", exe.display())),
            "{unit}"
        );
    }

    // Second run: nothing changes, no new file.
    let before = snapshot(&env.home);
    let again = run_setup(&env, &[]);
    assert_eq!(again.status, Some(0), "{again}");
    assert!(again.stdout.contains("nothing needed changing"), "{again}");
    assert_eq!(snapshot(&env.home), before, "the second run changed a file");
}

/// A service manager that works is used: systemd (`systemctl --user`) on Linux, launchd
/// (`launchctl bootstrap gui/<uid>`) on macOS, each through a stand-in.
#[test]
fn a_service_manager_that_works_is_used() {
    let (env, _claude, _) = setup_env();
    let log = env.path("manager.log");
    let fake = env.path("manager");
    // launchctl: the agent is not loaded yet (`print` of it fails); everything else works.
    support::write_executable(
        &fake,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\ncase \"$*\" in 'print gui/'*/dev.coogle.daemon) exit 113 ;; esac\nexit 0\n",
            log.display()
        ),
    );
    let out = env
        .cmd()
        .args([
            "setup",
            "--yes",
            "--credentials-source",
            "none",
            "--skip-verify",
        ])
        .env("COOGLE_SYSTEMCTL", &fake)
        .env("COOGLE_LAUNCHCTL", &fake)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let calls = fs::read_to_string(&log).unwrap();
    if cfg!(target_os = "macos") {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let bootstrap = format!("bootstrap gui/{uid} {}", env.service_file().display());
        assert!(calls.lines().any(|l| l == bootstrap), "{calls}");
        assert!(
            calls.contains(&format!("enable gui/{uid}/dev.coogle.daemon")),
            "{calls}"
        );
    } else {
        assert!(calls.contains("--user daemon-reload"), "{calls}");
        assert!(
            calls.contains("--user enable --now coogle.service"),
            "{calls}"
        );
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("enabled and started"));
}

#[test]
fn corrupt_claude_json_is_refused_and_untouched() {
    let (env, claude, _) = setup_env();
    let corrupt = fixture("corrupt_claude.json");
    fs::write(&claude, &corrupt).unwrap();
    let out = run_setup(&env, &["--no-service", "--skip-verify"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stdout.contains("could not parse"), "{out}");
    assert!(out.stdout.contains("left unchanged"), "{out}");
    assert!(!out.stdout.contains("GOCSPX-corrupt"), "{out}");
    // Regression: after the ✗ at step 6, the last step said "Done ✓ nothing needed
    // changing". The failure is said once, at its step, and the end says setup did not finish.
    assert_eq!(
        out.stdout.matches("could not parse").count(),
        1,
        "said once: {out}"
    );
    assert!(!out.stdout.contains("nothing needed changing"), "{out}");
    assert!(out.stdout.contains("✗ setup did not finish"), "{out}");
    assert_eq!(fs::read(&claude).unwrap(), corrupt);
    let stray: Vec<_> = fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("coogle-"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[test]
fn credentials_found_in_claude_json_move_into_config() {
    let (env, claude, _) = setup_env();
    let out = env.run(QUIET_SETUP);
    let stdout = &out.stdout;
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        stdout.contains("mcpServers.google-workspace in"),
        "{stdout}"
    );
    assert!(!stdout.contains("GOCSPX"), "{stdout}");
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config["servers"]["google"]["credentials"]["clientSecret"],
        "GOCSPX-fixture-top-secret-000"
    );
    let text = fs::read_to_string(&claude).unwrap();
    assert!(!text.contains("GOCSPX"), "{text}");
}

#[test]
fn all_clients_with_their_files() {
    let (env, claude, _) = setup_env();
    let desktop = env.home.join(".config/Claude/claude_desktop_config.json");
    fs::create_dir_all(desktop.parent().unwrap()).unwrap();
    fs::write(&desktop, fixture("claude_desktop_config.json")).unwrap();
    let cursor = env.home.join(".cursor/mcp.json");
    fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    fs::write(&cursor, fixture("cursor_mcp.json")).unwrap();
    let out = run_setup(&env, &["--client", "all", "--no-service", "--skip-test"]);
    assert_eq!(out.status, Some(0), "{out}");
    for (path, name) in [
        (&claude, "google-workspace"),
        (&desktop, "workspace"),
        (&cursor, "coogle"),
    ] {
        let doc: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
        assert_eq!(
            doc["mcpServers"][name]["args"],
            json!(["mcp", "--socket", env.socket]),
            "{}",
            path.display()
        );
    }
}

#[test]
fn without_yes_and_without_a_terminal_it_fails_fast() {
    let (env, claude, original) = setup_env();
    let out = env.cmd().arg("setup").env("CI", "true").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--yes"), "{stderr}");
    assert_eq!(fs::read(&claude).unwrap(), original);
}

#[test]
fn missing_credentials_under_yes_is_a_usage_error() {
    let env = Env::with_fake(json!({}));
    fs::write(
        &env.config,
        serde_json::to_vec(&json!({"servers": {"google": {"command": fake_mcp()}}})).unwrap(),
    )
    .unwrap();
    let out = env
        .cmd()
        .args(["setup", "--yes"])
        .env_remove("GOOGLE_OAUTH_CLIENT_ID")
        .env_remove("GOOGLE_OAUTH_CLIENT_SECRET")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--client-id"), "{stderr}");
}

/// With no config.json yet, the Google Workspace entry being replaced says how this user runs
/// the server: its command, args and non-OAuth env become the upstream (so the test daemon runs
/// exactly that), and the OAuth client moves into `credentials`.
#[test]
fn the_replaced_entry_becomes_the_upstream() {
    let env = Env::new();
    let mut doc: Value = serde_json::from_slice(&fixture("claude.json")).unwrap();
    let entry = &mut doc["mcpServers"]["google-workspace"];
    entry["command"] = json!(fake_mcp());
    entry["args"] = json!(["--tool-tier", "extended"]);
    let claude = env.home.join(".claude.json");
    fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    assert!(!env.config.exists());

    let out = env
        .cmd()
        .args(["setup", "--yes", "--no-service", "--skip-verify"])
        .env("COOGLE_SYSTEMCTL", env.path("no-systemctl"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "as mcpServers.google-workspace ran it; its other env kept: USER_GOOGLE_EMAIL"
        ),
        "{stdout}"
    );
    // The test daemon ran the entry's command (the fake server) and listed its tools.
    assert!(
        stdout.contains("a throwaway daemon started and listed"),
        "{stdout}"
    );
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config["mcp"],
        json!({"command": fake_mcp(), "args": ["--tool-tier", "extended"],
               "env": {"USER_GOOGLE_EMAIL": "grace@example.com"}})
    );
    assert_eq!(
        config["credentials"]["clientSecret"],
        "GOCSPX-fixture-top-secret-000"
    );
    // A second run keeps the upstream as it is now written.
    let again = env.run(QUIET_SETUP);
    assert_eq!(again.status, Some(0), "{again}");
    let config2: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(config2, config);
}

/// Regression: with a config.json that already named the upstream, the replaced entry's other
/// env (`USER_GOOGLE_EMAIL`) was dropped: the client entry loses its env, so it must move into
/// that upstream's `env`.
#[test]
fn the_replaced_entrys_env_moves_into_an_existing_upstream() {
    let (env, claude, _) = setup_env();
    let out = run_setup(&env, &["--no-service", "--skip-verify", "--skip-test"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("USER_GOOGLE_EMAIL"), "{out}");
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config["servers"]["google"]["env"],
        json!({"USER_GOOGLE_EMAIL": "grace@example.com"})
    );
    assert_eq!(config["servers"]["google"]["maxConcurrent"], 2);
    let doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    assert!(doc["mcpServers"]["google-workspace"]["env"].is_null());
}

/// A config or socket other than the defaults is written into the client entry, so the agent's
/// `coogle mcp` reaches the same daemon: the verify step runs the entry with none of the
/// COOGLE_* variables of this shell and still gets the fake server's tools.
#[test]
fn non_default_config_and_socket_go_into_the_client_entry() {
    let env = Env::new();
    let config = env.path("elsewhere/coogle.json");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::write(
        &config,
        serde_json::to_vec(&json!({"servers": {"google": {"command": fake_mcp()}}})).unwrap(),
    )
    .unwrap();
    let claude = env.home.join(".claude.json");
    fs::write(&claude, b"{}").unwrap();
    let out = env
        .cmd()
        .env_remove("COOGLE_CONFIG")
        .env_remove("COOGLE_SOCKET")
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&env.socket)
        .args(["setup", "--yes", "--no-service", "--skip-test"])
        .args(["--credentials-source", "none"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("answered with"), "{stdout}");
    let doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    assert_eq!(
        doc["mcpServers"]["coogle"]["args"],
        json!(["mcp", "--config", config, "--socket", env.socket])
    );
    // The default config was not created.
    assert!(!env.config.exists());
}

/// Regression: a second `--credentials-source claude-json` run failed (exit 2) because the
/// first had moved the client out of ~/.claude.json into config.json; and a config whose
/// client comes from the daemon's environment is kept when this shell lacks the variables.
#[test]
fn repeated_runs_keep_the_credentials_they_wrote() {
    let (env, _claude, _) = setup_env();
    let args = [
        "setup",
        "--yes",
        "--no-service",
        "--skip-test",
        "--skip-verify",
        "--credentials-source",
        "claude-json",
    ];
    for run in 1..=2 {
        let out = env.cmd().args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "run {run}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config["servers"]["google"]["credentials"]["clientSecret"],
        "GOCSPX-fixture-top-secret-000"
    );

    let mut config = config;
    config["servers"]["google"]["credentials"] = json!({"source": "env"});
    env.write_config(&config);
    let out = env
        .cmd()
        .args([
            "setup",
            "--yes",
            "--no-service",
            "--skip-test",
            "--skip-verify",
        ])
        .env_remove("GOOGLE_OAUTH_CLIENT_ID")
        .env_remove("GOOGLE_OAUTH_CLIENT_SECRET")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("not set in this shell"), "{stdout}");
    let after: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        after["servers"]["google"]["credentials"],
        json!({"source": "env"})
    );
}

/// Regression (issue 20, item 12): "✓ uvx uvx 0.13.9"; "changed: config …" listed twice in
/// Done when the share step wrote config.json after the config step; `--no-service`, which the
/// person asked for, shown as a `!` warning.
#[test]
fn setup_says_each_thing_once_and_plainly() {
    let (env, claude, _) = setup_env();
    // Another stdio server in Claude Code's config, for `--share-all` to move behind coogle.
    let mut doc: serde_json::Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    doc["mcpServers"]["notes"] = json!({"type": "stdio", "command": fake_mcp(), "args": ["notes"]});
    fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = run_setup(
        &env,
        &[
            "--no-service",
            "--share-all",
            "--skip-test",
            "--skip-verify",
        ],
    );
    assert_eq!(out.status, Some(0), "{out}");
    for line in out.stdout.lines() {
        for program in ["uvx", "node", "npx"] {
            assert!(
                !line.contains(&format!("{program} {program} ")),
                "the program named twice: {line}\n{out}"
            );
        }
    }
    assert!(
        out.stdout
            .contains("✓ not installed (--no-service): `coogle mcp` starts the daemon on demand"),
        "{out}"
    );
    assert!(!out.stdout.contains("! not installed"), "{out}");
    let done = out.stdout.split("Done").nth(1).unwrap_or_default();
    let config = format!("changed: config {}", env.config.display());
    assert_eq!(done.matches(&config).count(), 1, "{out}");
}
