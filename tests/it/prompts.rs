//! The prompts as a person meets them, in a real pseudo-terminal: each says its keys, marks
//! the current row with `❯`, and cancels on Esc or Ctrl-C with the terminal given back (cursor
//! shown, echo on) and "cancelled" said, changing nothing. `coogle share` and setup's share
//! step start with the same rows checked.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::pty::Pty;
use support::{Env, fake_mcp};

const T: Duration = Duration::from_secs(30);
/// Hide and show the cursor (what a list prompt does while it is up).
const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";

/// `~/.claude.json` with two stdio servers for `coogle share` to offer.
fn two_servers(env: &Env) -> Vec<u8> {
    let fake = fake_mcp();
    let doc = json!({"mcpServers": {
        "notes": {"type": "stdio", "command": fake, "args": ["notes"]},
        "files": {"type": "stdio", "command": fake, "args": ["files"]},
    }});
    let bytes = serde_json::to_vec_pretty(&doc).unwrap();
    std::fs::write(env.home.join(".claude.json"), &bytes).unwrap();
    bytes
}

fn in_pty(env: &Env, args: &[&str]) -> Pty {
    let mut cmd = env.cmd();
    cmd.args(args).env("TERM", "xterm").env_remove("CI");
    Pty::spawn(cmd)
}

/// The cursor is visible at the end: every hide was followed by a show.
fn cursor_shown(screen: &str) -> bool {
    match (screen.rfind(HIDE_CURSOR), screen.rfind(SHOW_CURSOR)) {
        (Some(hide), Some(show)) => show > hide,
        (None, _) => true,
        (Some(_), None) => false,
    }
}

/// Regression (issue 20, item 11): `coogle share`'s list gave no key hints and marked the
/// current row by colour alone; Ctrl-C left the cursor hidden and said nothing. Esc did
/// nothing.
#[test]
fn a_list_says_its_keys_and_esc_or_ctrl_c_cancel_it() {
    for (key, name) in [("\x1b", "Esc"), ("\x03", "Ctrl-C")] {
        let env = Env::with_fake(json!({}));
        let before = two_servers(&env);
        let mut pty = in_pty(&env, &["share"]);
        let at = pty.expect("Share these servers", 0, T);
        let at = pty.expect("space toggles", at, T);
        pty.expect("esc cancels", at, T);
        // The current row has a marker of its own, not only a colour.
        pty.expect("❯ ", at, T);
        pty.send(key);
        pty.expect("cancelled", at, T);
        let code = pty.wait(T);
        let screen = pty.text();
        assert_eq!(code, Some(130), "{name}: {screen}");
        assert!(
            cursor_shown(&pty.raw()),
            "{name} left the cursor hidden: {:?}",
            pty.raw()
        );
        assert_eq!(
            std::fs::read(env.home.join(".claude.json")).unwrap(),
            before,
            "{name}: a cancelled share changed ~/.claude.json"
        );
    }
}

/// Ctrl-C at a secret prompt (echo off) and Esc at a text prompt: cancelled, and the terminal
/// echoes and reads lines again afterwards.
#[test]
fn text_prompts_cancel_with_the_terminal_given_back() {
    for (prompt, before, key) in [
        (
            "Google OAuth client secret",
            "typed-id.apps.googleusercontent.com\r",
            "\x03",
        ),
        ("Google OAuth client id", "", "\x1b"),
    ] {
        let env = Env::new();
        env.write_config(&json!({"servers": {"google": {"command": fake_mcp()}}}));
        let mut cmd = env.cmd();
        cmd.arg("setup")
            .env("TERM", "xterm")
            .env_remove("GOOGLE_OAUTH_CLIENT_ID")
            .env_remove("GOOGLE_OAUTH_CLIENT_SECRET")
            .env_remove("CI");
        let mut pty = Pty::spawn(cmd);
        let mut at = pty.expect("Google OAuth client id", 0, T);
        if !before.is_empty() {
            pty.send(before);
            at = pty.expect(prompt, at, T);
        }
        pty.expect("esc cancels", at, T);
        pty.send("half-typed");
        pty.send(key);
        pty.expect("cancelled", at, T);
        assert_eq!(pty.wait(T), Some(130), "{}", pty.text());
        let modes = pty.modes();
        assert!(
            modes.c_lflag & libc::ECHO != 0 && modes.c_lflag & libc::ICANON != 0,
            "at {prompt:?}: the terminal was left without echo or line mode:\n{}",
            pty.text()
        );
        let config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
        assert!(
            config["servers"]["google"].get("credentials").is_none(),
            "a cancelled setup wrote credentials: {config}"
        );
    }
}

/// Regression (issue 20, item 11): setup's share step started with nothing checked while
/// `coogle share` started with everything checked. Both start checked; Enter shares.
#[test]
fn setup_and_share_offer_the_same_rows_checked() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp(),
        "credentials": {"source": "none"}}}}));
    two_servers(&env);
    let mut cmd = env.cmd();
    cmd.args([
        "setup",
        "--no-service",
        "--no-search",
        "--skip-test",
        "--skip-verify",
    ])
    .env("TERM", "xterm")
    .env_remove("CI");
    let mut pty = Pty::spawn(cmd);
    let at = pty.expect("Point these clients at coogle", 0, T);
    pty.send("\r");
    let at = pty.expect("Share these servers", at, T);
    // Both rows checked (dialoguer's ✔), as `coogle share` shows them.
    let at = pty.expect("✔ Claude Code", at, T);
    pty.expect("✔ Claude Code", at, T);
    pty.send("\r");
    pty.expect("[9/9] Done", at, T);
    assert_eq!(pty.wait(T), Some(0), "{}", pty.text());
    let claude: Value =
        serde_json::from_slice(&std::fs::read(env.home.join(".claude.json")).unwrap()).unwrap();
    for name in ["notes", "files"] {
        let args = &claude["mcpServers"][name]["args"];
        assert_eq!(args[0], "mcp", "{name} was not shared: {claude}");
    }

    // `coogle share` on the same kind of file starts with the same rows checked.
    let env = Env::with_fake(json!({}));
    two_servers(&env);
    let mut pty = in_pty(&env, &["share"]);
    let at = pty.expect("Share these servers", 0, T);
    let at = pty.expect("✔ Claude Code", at, T);
    pty.expect("✔ Claude Code", at, T);
    pty.send("\x1b");
    assert_eq!(pty.wait(T), Some(130), "{}", pty.text());
}
