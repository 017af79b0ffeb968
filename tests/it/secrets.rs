//! Secrets stay with whoever needs them: the daemon's log and its directory are private, and
//! each upstream child inherits only its own credentials from the daemon's environment
//! (`GOOGLE_OAUTH_*` only where Google credentials are configured, the Gemini key only in the
//! search server).

use crate::support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;
use support::serve::Serve;
use support::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Regression: the log was 0644 in a 0755 directory, readable by every local user, and it
/// holds what children print on stderr and, at debug level, what sessions ask.
#[test]
fn the_log_and_its_directory_are_private() {
    // Left loose by an older coogle: tightened by the daemon.
    let env = Env::with_fake(json!({}));
    let dir = env.log.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(&env.log, "an older line\n").unwrap();
    std::fs::set_permissions(&env.log, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _d = env.daemon();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&env.log), 0o600);
    assert!(
        std::fs::read_to_string(&env.log)
            .unwrap()
            .starts_with("an older line")
    );

    // Created by a shim starting a daemon: private from the start.
    let env = Env::with_fake(json!({}));
    let mut s = env.shim();
    s.initialize();
    assert_eq!(mode(env.log.parent().unwrap()), 0o700);
    assert_eq!(mode(&env.log), 0o600);
}

/// What a process's environment holds, from /proc.
fn environ(pid: u64) -> HashMap<String, String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Regression: every child inherited the daemon's whole environment, so any server the user
/// shared got the Google OAuth client secret and the Gemini key.
#[test]
fn each_child_inherits_only_its_own_secrets() {
    let env = Env::new();
    env.write_config(&json!({"servers": {
        "google": {"command": fake_mcp(), "credentials": {"source": "env"}},
        "other": {"command": fake_mcp(), "credentials": {"source": "none"},
                  "env": {"OTHER_OWN": "1"}},
    }}));
    let secrets = [
        ("GOOGLE_OAUTH_CLIENT_ID", "id-from-the-daemon"),
        ("GOOGLE_OAUTH_CLIENT_SECRET", "GOCSPX-daemon-secret"),
        ("GOOGLE_OAUTH_REDIRECT_URI", "http://localhost:8000/cb"),
        ("GEMINI_API_KEY", "AIza-gemini-daemon-key"),
        ("GOOGLE_API_KEY", "AIza-google-daemon-key"),
    ];
    let mut cmd = env.cmd();
    cmd.envs(secrets);
    let _d = Serve::spawn(cmd);
    // The Gemini key adds the built-in `search` upstream.
    let mut pids = HashMap::new();
    env.wait_ready();
    for server in ["google", "other", "search"] {
        support::demand_start(&env.socket, Some(server));
    }
    wait_status(
        &env.socket,
        "three upstreams ready",
        Duration::from_secs(30),
        |status| {
            let ups = status["upstreams"].as_array().cloned().unwrap_or_default();
            pids = ups
                .iter()
                .filter(|u| u["state"] == "ready")
                .map(|u| {
                    (
                        u["name"].as_str().unwrap().to_owned(),
                        u["pid"].as_u64().unwrap(),
                    )
                })
                .collect();
            pids.len() == 3
        },
    );
    let has = |who: &str, var: &str| environ(pids[who]).contains_key(var);
    let oauth = &secrets[..3];
    let gemini = &secrets[3..];
    for (var, _) in oauth {
        assert!(has("google", var), "google lacks {var}");
        assert!(!has("other", var), "other got {var}");
        assert!(!has("search", var), "search got {var}");
    }
    for (var, _) in gemini {
        assert!(has("search", var), "search lacks {var}");
        assert!(!has("google", var), "google got {var}");
        assert!(!has("other", var), "other got {var}");
    }
    assert_eq!(environ(pids["other"])["OTHER_OWN"], "1");
    assert_eq!(
        environ(pids["google"])["GOOGLE_OAUTH_CLIENT_SECRET"],
        "GOCSPX-daemon-secret"
    );
    // The rest of the environment still passes (PATH, HOME).
    assert_eq!(
        environ(pids["other"])["HOME"],
        env.home.display().to_string()
    );
}
