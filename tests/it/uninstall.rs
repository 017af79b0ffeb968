//! `coogle uninstall`: the service removed, each client entry setup replaced restored (the
//! file's exact bytes when nothing else changed), keys it did not write untouched, and
//! config.json removed only with --remove-config.

use crate::support;

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use support::{Env, fake_mcp};

fn fixture(name: &str) -> Vec<u8> {
    support::client_fixture(name)
}

fn installed() -> (Env, PathBuf, PathBuf, Vec<u8>, Vec<u8>) {
    let env = Env::new();
    env.write_config(
        &json!({"servers": {"google": {"command": fake_mcp(), "credentials": {"source": "none"}}}}),
    );
    let claude = env.home.join(".claude.json");
    let original = fixture("claude.json");
    fs::write(&claude, &original).unwrap();
    let cursor = env.home.join(".cursor/mcp.json");
    fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    let cursor_original = fixture("cursor_mcp.json");
    fs::write(&cursor, &cursor_original).unwrap();
    let out = env
        .cmd()
        .args([
            "setup",
            "--yes",
            "--skip-test",
            "--skip-verify",
            "--client",
            "claude-code",
            "--client",
            "cursor",
        ])
        .env("COOGLE_SYSTEMCTL", env.path("none"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_ne!(fs::read(&claude).unwrap(), original);
    (env, claude, cursor, original, cursor_original)
}

fn uninstall(env: &Env, extra: &[&str]) -> support::Output {
    let mut args = vec!["uninstall", "--yes"];
    args.extend_from_slice(extra);
    let mut cmd = env.cmd();
    cmd.env("COOGLE_SYSTEMCTL", env.path("none"));
    support::Output::of(cmd, &args)
}

#[test]
fn restores_the_exact_bytes_and_removes_the_service() {
    let (env, claude, cursor, original, cursor_original) = installed();
    let unit = env.service_file();
    assert!(unit.exists());
    let out = uninstall(&env, &[]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(fs::read(&claude).unwrap(), original, "{out}");
    assert_eq!(fs::read(&cursor).unwrap(), cursor_original, "{out}");
    assert!(!unit.exists());
    assert!(env.config.exists(), "config kept without --remove-config");
    assert!(!env.home.join(".config/coogle/setup-state.json").exists());
    // Twice is harmless.
    let again = uninstall(&env, &[]);
    assert_eq!(again.status, Some(0), "{again}");
    assert_eq!(fs::read(&claude).unwrap(), original);
}

#[test]
fn keys_written_by_others_since_setup_are_kept() {
    let (env, claude, _, original, _) = installed();
    let mut doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    doc["numStartups"] = json!(500);
    doc["mcpServers"]["added-later"] = json!({"command": "x"});
    fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = uninstall(&env, &["--remove-config"]);
    assert_eq!(out.status, Some(0), "{out}");
    let after: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    let before: Value = serde_json::from_slice(&original).unwrap();
    assert_eq!(after["numStartups"], 500);
    assert_eq!(after["mcpServers"]["added-later"], json!({"command": "x"}));
    assert_eq!(
        after["mcpServers"]["google-workspace"],
        before["mcpServers"]["google-workspace"]
    );
    assert_eq!(
        after["projects"]["/home/grace/src/mail-triage"],
        before["projects"]["/home/grace/src/mail-triage"]
    );
    let order: Vec<_> = after["mcpServers"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        order,
        ["filesystem", "google-workspace", "sentry", "added-later"]
    );
    assert!(!env.config.exists(), "--remove-config");
}

#[test]
fn without_a_record_nothing_is_touched() {
    let env = Env::new();
    let claude = env.home.join(".claude.json");
    let bytes = br#"{"mcpServers": {"coogle": {"command": "/usr/bin/coogle", "args": ["mcp"]}}}"#;
    fs::write(&claude, bytes).unwrap();
    let out = uninstall(&env, &[]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(fs::read(&claude).unwrap(), bytes);
}

#[test]
fn needs_yes_without_a_terminal() {
    let env = Env::new();
    let out = env.run(&["uninstall"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("--yes"), "{out}");
}
