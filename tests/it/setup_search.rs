//! `coogle setup` and the ask_google search server: a Gemini API key found in the environment
//! or a `.env` file is written to config.json (0600, shown masked only) and a second client
//! entry (`coogle mcp --server search`) is added; `--no-search` and a placeholder key leave it
//! out; `--search` without a key is a usage error; doctor checks the key.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};
use support::{Env, fake_mcp};

const KEY: &str = "AIzaSyD-setup-test-0123456789abcdefghijk";

fn env_with_claude_json() -> Env {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp(),
        "credentials": {"source": "none"}}}}));
    fs::write(env.home.join(".claude.json"), b"{\"numStartups\": 3}").unwrap();
    env
}

fn setup(env: &Env, extra: &[&str], vars: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = env.cmd();
    cmd.args([
        "setup",
        "--yes",
        "--no-service",
        "--skip-test",
        "--skip-verify",
    ])
    .args(extra)
    .env_remove("GOOGLE_API_KEY")
    .env_remove("GEMINI_API_KEY")
    .current_dir(&env.home);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn claude(env: &Env) -> Value {
    serde_json::from_slice(&fs::read(env.home.join(".claude.json")).unwrap()).unwrap()
}

#[test]
fn a_key_in_the_environment_sets_up_the_search_server() {
    let env = env_with_claude_json();
    let (code, out, err) = setup(&env, &[], &[("GEMINI_API_KEY", KEY)]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!(
            "Gemini API key <{} chars> ($GEMINI_API_KEY)",
            KEY.len()
        )),
        "{out}"
    );
    assert!(
        !out.contains(KEY) && !err.contains(KEY),
        "the key was shown"
    );
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(config["search"]["apiKey"], KEY);
    assert_eq!(
        fs::metadata(&env.config).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let doc = claude(&env);
    assert_eq!(
        doc["mcpServers"]["coogle-search"]["args"],
        json!(["mcp", "--server", "search", "--socket", env.socket])
    );
    assert_eq!(
        doc["mcpServers"]["coogle"]["args"],
        json!(["mcp", "--socket", env.socket])
    );
    assert_eq!(doc["numStartups"], 3);

    // Twice: the key now comes from config.json, and nothing changes.
    let before = (
        fs::read(&env.config).unwrap(),
        fs::read(env.home.join(".claude.json")).unwrap(),
    );
    let (code, out, _) = setup(&env, &[], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(config.json search.apiKey)"), "{out}");
    assert!(out.contains("nothing needed changing"), "{out}");
    let after = (
        fs::read(&env.config).unwrap(),
        fs::read(env.home.join(".claude.json")).unwrap(),
    );
    assert_eq!(before, after);

    // Doctor sees the key (masked) and the search entry.
    let doctor = env.run(&["doctor"]);
    assert!(
        doctor
            .stdout
            .contains(&format!("search: Gemini API key <{} chars>", KEY.len())),
        "{doctor}"
    );
    assert!(
        doctor.stdout.contains("serves the search server"),
        "{doctor}"
    );
    assert!(!doctor.stdout.contains(KEY), "{doctor}");

    // Uninstall takes the search entry out again.
    let out = env.run(&["uninstall", "--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(claude(&env), json!({"numStartups": 3}));
}

#[test]
fn a_dotenv_key_is_found_and_no_search_leaves_it_out() {
    let env = env_with_claude_json();
    fs::write(
        env.home.join(".env"),
        format!("# keys\nexport GOOGLE_API_KEY='{KEY}'\n"),
    )
    .unwrap();
    let (code, out, _) = setup(&env, &["--no-search"], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(claude(&env)["mcpServers"].get("coogle-search").is_none());
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert!(config.get("search").is_none(), "{config}");

    let (code, out, _) = setup(&env, &[], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("({})", env.home.join(".env").display())),
        "{out}"
    );
    assert!(claude(&env)["mcpServers"].get("coogle-search").is_some());
}

#[test]
fn placeholder_and_missing_keys() {
    let env = env_with_claude_json();
    // A placeholder found on the way is reported and left out...
    let (code, out, _) = setup(&env, &[], &[("GOOGLE_API_KEY", "your-api-key-here")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("looks like a placeholder"), "{out}");
    assert!(claude(&env)["mcpServers"].get("coogle-search").is_none());
    // ...but refused when --search asks for the search server.
    let (code, _, err) = setup(
        &env,
        &["--search"],
        &[("GOOGLE_API_KEY", "your-api-key-here")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("placeholder"), "{err}");
    // --search with no key anywhere is a usage error with the fix.
    let (code, _, err) = setup(&env, &["--search"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--api-key-env"), "{err}");
    // --api-key-env names the variable; an unset one is an error.
    let (code, _, err) = setup(&env, &["--api-key-env", "NOPE_NOT_SET"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("NOPE_NOT_SET is not set"), "{err}");

    // Doctor: a configured search server with a placeholder key is a failure.
    let mut config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    config["search"] = json!({"apiKey": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"});
    env.write_config(&config);
    let doctor = env
        .cmd()
        .arg("doctor")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("search: the API key looks like a placeholder"),
        "{stdout}"
    );
}
