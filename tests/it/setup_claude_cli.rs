//! With Claude Code's `claude` CLI available, setup registers the user-scope entry through
//! `claude mcp remove` + `claude mcp add-json --scope user` (a stand-in CLI here, which rewrites
//! the file in its own format), patches per-project entries directly, and uninstall still gives
//! back the original bytes. A CLI that fails halfway loses nothing: the removed entry is put
//! back and the file is patched directly.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{Env, fake_mcp};

fn fake_claude() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake-claude")
}

fn setup_env() -> (Env, PathBuf, Vec<u8>, PathBuf) {
    support::find_program("python3").expect("python3 runs the stand-in claude CLI");
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp()}}}));
    let original = support::client_fixture("claude.json");
    let claude = env.home.join(".claude.json");
    fs::write(&claude, &original).unwrap();
    let log = env.path("claude-cli.log");
    (env, claude, original, log)
}

fn run(env: &Env, args: &[&str], log: &Path, fail: Option<&str>) -> (i32, String) {
    let mut cmd = env.cmd();
    cmd.args(args)
        .env("COOGLE_CLAUDE_CLI", fake_claude())
        .env("FAKE_CLAUDE_LOG", log);
    if let Some(f) = fail {
        cmd.env("FAKE_CLAUDE_FAIL", f);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

const SETUP: &[&str] = &[
    "setup",
    "--yes",
    "--no-service",
    "--skip-test",
    "--skip-verify",
];

fn calls(log: &Path) -> Vec<Vec<String>> {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn user_scope_goes_through_the_cli_and_uninstall_restores_the_bytes() {
    let (env, claude, original, log) = setup_env();
    let (code, out) = run(&env, SETUP, &log, None);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("registered through `claude mcp add-json --scope user`"),
        "{out}"
    );
    let calls = calls(&log);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0],
        ["mcp", "remove", "--scope", "user", "google-workspace"]
    );
    assert_eq!(
        &calls[1][..5],
        ["mcp", "add-json", "--scope", "user", "google-workspace"]
    );
    let added: Value = serde_json::from_str(&calls[1][5]).unwrap();
    assert_eq!(added["args"], json!(["mcp", "--socket", env.socket]));
    assert!(!calls[1][5].contains("GOCSPX"), "no secret on argv");

    let doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    let exe = fs::canonicalize(support::COOGLE).unwrap();
    assert_eq!(doc["mcpServers"]["google-workspace"]["command"], json!(exe));
    // The per-project Google entry has no CLI form: patched directly.
    let project = &doc["projects"]["/home/grace/src/mail-triage"]["mcpServers"]["gmail"];
    assert_eq!(project["command"], json!(exe), "{project}");
    assert!(!fs::read_to_string(&claude).unwrap().contains("GOCSPX"));

    // Setup again: nothing to do, the CLI is not called.
    let (code, out) = run(&env, SETUP, &log, None);
    assert_eq!(code, 0, "{out}");
    assert_eq!(self::calls(&log).len(), 2, "{out}");

    let (code, out) = run(&env, &["uninstall", "--yes"], &log, None);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        fs::read(&claude).unwrap(),
        original,
        "uninstall did not give back the original bytes\n{out}"
    );
}

#[test]
fn a_cli_that_fails_halfway_loses_nothing() {
    let (env, claude, original, log) = setup_env();
    let before: Value = serde_json::from_slice(&original).unwrap();
    let (code, out) = run(&env, SETUP, &log, Some("add-json"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("the claude CLI did not do it"), "{out}");
    assert!(out.contains("add-json failed on purpose"), "{out}");
    let doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    let exe = fs::canonicalize(support::COOGLE).unwrap();
    // The entry the CLI removed was put back, then patched in place directly.
    assert_eq!(doc["mcpServers"]["google-workspace"]["command"], json!(exe));
    assert!(
        doc["mcpServers"]["google-workspace"].get("env").is_none(),
        "{doc}"
    );
    assert!(doc["mcpServers"].get("coogle").is_none(), "{doc}");

    let (code, out) = run(&env, &["uninstall", "--yes"], &log, None);
    assert_eq!(code, 0, "{out}");
    let after: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    assert_eq!(after, before, "{out}");
}
