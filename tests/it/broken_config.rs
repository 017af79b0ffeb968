//! A config.json that breaks while a daemon runs does not cut anyone off it: the shim needs
//! only the socket (flags, environment, or `socketPath` read on its own), and `coogle status`
//! still answers, with a warning that names the file and what is wrong.

use crate::support;

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::serve::Serve;
use support::*;

/// The broken fixture: a missing comma on line 3, reported at line 4 column 3.
fn unparsable() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/broken_config.json"
    ))
    .unwrap()
}

/// A new shim session reaches the daemon: initialize, then a call.
fn a_session_works(env: &Env, cmd: Command) {
    let mut s = env.stdio_server(cmd, &["mcp"]);
    assert_eq!(s.initialize()["serverInfo"]["name"], "fake-mcp");
    assert_eq!(
        text(&s.call("echo", json!({"text": "still here"}))),
        "still here"
    );
    s.close_stdin();
    let stderr = s.stderr();
    assert!(
        stderr.contains("config.json"),
        "the shim's warning: {stderr}"
    );
}

fn status_warns(env: &Env, cmd: Command, what: &str) {
    let out = Output::of(cmd, &["status"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("google"), "{out}");
    let warning = out
        .stderr
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_else(|| panic!("no warning: {out}"));
    assert!(
        warning.contains(&env.config.display().to_string()) && warning.contains(what),
        "{out}"
    );
}

/// Regression: a syntax error in config.json made every new `coogle mcp` exit at once, and
/// `coogle status` refuse to ask the daemon that was running fine.
#[test]
fn an_unparsable_config_does_not_cut_sessions_off_a_running_daemon() {
    // The socket from the environment (COOGLE_SOCKET, as the test harness sets it).
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    env.wait_upstream_ready();
    std::fs::write(&env.config, unparsable()).unwrap();
    a_session_works(&env, env.cmd());
    status_warns(&env, env.cmd(), "at line 4 column 3");

    // No socket given and nothing to read from the file: the default socket
    // ($XDG_RUNTIME_DIR/coogle/coogle.sock here), where a default daemon listens.
    let env = Env::with_fake(json!({}));
    let runtime = env.path("xdg");
    std::fs::create_dir(&runtime).unwrap();
    let default_cmd = || {
        let mut c = env.cmd();
        c.env_remove("COOGLE_SOCKET")
            .env("XDG_RUNTIME_DIR", &runtime);
        c
    };
    let socket = runtime.join("coogle/coogle.sock");
    let _d = Serve::spawn(default_cmd());
    wait_control(
        &socket,
        "ping",
        "the default daemon",
        Duration::from_secs(20),
        |_| true,
    );
    std::fs::write(&env.config, unparsable()).unwrap();
    a_session_works(&env, default_cmd());
    status_warns(&env, default_cmd(), "at line 4 column 3");
    let _ = control(&socket, "shutdown", Value::Null);
}

/// A file that parses but is invalid elsewhere still gives its `socketPath`.
#[test]
fn an_invalid_config_still_gives_its_socket_path() {
    let env = Env::new();
    let config = |extra: Value| {
        let mut c = json!({
            "socketPath": env.socket,
            "servers": {"google": {"command": fake_mcp(), "credentials": {"source": "none"}}},
        });
        if let (Some(c), Value::Object(extra)) = (c.as_object_mut(), extra) {
            c.extend(extra);
        }
        env.write_config(&c);
    };
    config(json!({}));
    let no_socket_flag = || {
        let mut c = env.cmd();
        c.env_remove("COOGLE_SOCKET");
        c
    };
    let _d = Serve::spawn(no_socket_flag());
    env.wait_upstream_ready();
    config(json!({"logLevel": 5}));
    a_session_works(&env, no_socket_flag());
    status_warns(&env, no_socket_flag(), "logLevel must be a string");
}
