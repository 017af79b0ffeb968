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
