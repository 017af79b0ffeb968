//! Control commands can be repeated as `brew services` can: `stop` with nothing running is
//! done already, `status --json` always prints JSON, and a command that only reads leaves
//! the daemons as it found them.

use crate::support;

use serde_json::{Value, json};
use support::*;

/// Regression (issue 20, item 8): `coogle stop` with nothing running failed and told the
/// person to start the daemon; `status --json` printed no JSON; `reload` failed.
#[test]
fn stop_status_and_reload_with_nothing_running() {
    let env = Env::with_fake(json!({}));
    for _ in 0..2 {
        let out = env.run(&["stop"]);
        assert_eq!(out.status, Some(0), "{out}");
        assert!(out.stdout.contains("no coogle daemon is running"), "{out}");
        assert!(out.stderr.is_empty(), "{out}");
    }
    let out = env.run(&["status", "--json"]);
    let status: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(status["running"], false, "{out}");
    assert_eq!(status["socket"], json!(env.socket), "{out}");
    // The exit code still says no daemon answered (README: 2, the environment).
    assert_eq!(out.status, Some(2), "{out}");
    let out = env.run(&["reload"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout.contains("the next one reads the config"),
        "{out}"
    );

    // With one running, the JSON says so too, and `stop` stops it.
    let _d = env.daemon();
    let out = env.run(&["status", "--json"]);
    let status: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(status["running"], true, "{out}");
    assert!(status["daemon"]["pid"].is_u64(), "{out}");
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("stopped the coogle daemon"), "{out}");
}

/// Regression (issue 20, item 8): `coogle tools` with no daemon started one silently, and it
/// stayed. Now one started to list the tools is stopped again; one that was running stays.
#[test]
fn tools_leaves_the_daemons_as_it_found_them() {
    let env = Env::with_fake(json!({}));
    let out = env.run(&["tools"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("echo"), "{out}");
    assert!(
        control(&env.socket, "ping", Value::Null).is_err(),
        "a daemon was left running after `coogle tools`"
    );

    let _d = env.daemon();
    let pid = control(&env.socket, "info", Value::Null).unwrap()["pid"].clone();
    let out = env.run(&["tools"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(
        control(&env.socket, "info", Value::Null).unwrap()["pid"],
        pid,
        "the running daemon was stopped"
    );
}
