//! The interactive `coogle setup`, driven for real in a pseudo-terminal: the client id is
//! typed, the secret typed without echo, the service declined, the client list confirmed.
//! Every wait is bounded; a failure prints everything the terminal showed.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::pty::Pty;
use support::{Env, fake_mcp};

const API_KEY: &str = "AIzaSyD-typed-in-the-terminal-012345678";

#[test]
fn interactive_setup_in_a_pty() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp()}}}));
    let secret = "GOCSPX-typed-in-the-terminal-42";
    let mut cmd = env.cmd();
    cmd.arg("setup")
        .env("TERM", "xterm")
        .env("COOGLE_SYSTEMCTL", env.path("none"))
        .env_remove("GOOGLE_OAUTH_CLIENT_ID")
        .env_remove("GOOGLE_OAUTH_CLIENT_SECRET")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("CI");
    let mut pty = Pty::spawn(cmd);
    let t = Duration::from_secs(30);

    let at = pty.expect("Google OAuth client id", 0, t);
    pty.send("typed-id.apps.googleusercontent.com\r");
    let at = pty.expect("Google OAuth client secret", at, t);
    pty.send(&format!("{secret}\r"));
    let at = pty.expect("secret <31 chars> (entered)", at, t);
    // No Gemini API key anywhere: the wizard offers the search server and takes one, hidden.
    let at = pty.expect("Set up the ask_google search server?", at, t);
    pty.send("y");
    let at = pty.expect("Gemini API key", at, t);
    pty.send(&format!("{API_KEY}\r"));
    let at = pty.expect("Gemini API key <39 chars> (entered)", at, t);
    let at = pty.expect("listed", at, Duration::from_secs(60));
    let at = pty.expect("Install the service", at, t);
    pty.send("n");
    let at = pty.expect("Point these clients at coogle", at, t);
    pty.send("\r");
    pty.expect("[9/9] Done", at, Duration::from_secs(60));
    let code = pty.wait(Duration::from_secs(30));
    let screen = pty.text();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains(secret), "the secret was echoed:\n{screen}");
    assert!(
        !screen.contains(API_KEY),
        "the API key was echoed:\n{screen}"
    );

    let config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(
        config["servers"]["google"]["credentials"],
        json!({"source": "manual", "clientId": "typed-id.apps.googleusercontent.com", "clientSecret": secret})
    );
    assert!(!env.service_file().exists(), "the service was declined");
    let claude: Value =
        serde_json::from_slice(&std::fs::read(env.home.join(".claude.json")).unwrap()).unwrap();
    // The test socket is not the default one, so the entry names it.
    assert_eq!(
        claude["mcpServers"]["coogle"]["args"],
        json!(["mcp", "--socket", env.socket])
    );
    assert_eq!(
        claude["mcpServers"]["coogle-search"]["args"],
        json!(["mcp", "--server", "search", "--socket", env.socket])
    );
    assert_eq!(config["search"]["apiKey"], API_KEY);
}
