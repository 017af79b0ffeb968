//! `reload`: the daemon reads its config file again and serves the servers new in it at once,
//! without stopping anything: a call in flight on another server gets its answer, the daemon
//! keeps its pid. Changed and removed servers are reported and keep running as they were; a
//! file that does not load is an error naming it, and changes nothing.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn fake_server(extra: Value) -> Value {
    let mut server = json!({"command": fake_mcp(), "credentials": {"source": "none"}});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            server[k] = v;
        }
    }
    server
}

fn tool_names(s: &mut Shim) -> Vec<String> {
    s.request("tools/list", json!({}))["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Start a 3 s `sleep` on `shim` and wait until the daemon has it in flight; returns its id.
fn start_long_call(env: &Env, shim: &mut Shim) -> Value {
    let id = json!("long");
    shim.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "sleep", "arguments": {"ms": 3000}}}));
    wait_status(
        &env.socket,
        "the call to be in flight",
        Duration::from_secs(20),
        |s| s["upstreams"][0]["inFlight"] == 1,
    );
    id
}

#[test]
fn a_call_in_flight_keeps_its_answer_while_reload_adds_a_server() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": fake_server(json!({}))}}));
    let d = env.daemon();
    let mut a = env.shim();
    a.initialize();
    let long = start_long_call(&env, &mut a);

    env.write_config(&json!({"servers": {
        "google": fake_server(json!({})),
        "other": fake_server(json!({"env": {"FAKE_MCP_EXTRA_TOOL": "special"}})),
    }}));
    let out = env.run(&["reload"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("added: other"), "{out}");
    assert!(
        out.stdout.contains(&env.config.display().to_string()),
        "{out}"
    );

    // The new server is reachable at once, by name, from a new session.
    let mut b = env.shim_with(&["--server", "other"]);
    b.initialize();
    assert!(tool_names(&mut b).contains(&"special".to_string()));
    assert_eq!(text(&b.call("echo", json!({"text": "hi"}))), "hi");

    // The call that was in flight when the config changed gets its answer.
    let r = a.response(&long, Duration::from_secs(20));
    assert_eq!(text(&r), "slept 3000 ms", "{r}");
    assert_ne!(r["result"]["isError"], true, "{r}");

    let info = control(&env.socket, "info", Value::Null).unwrap();
    assert_eq!(info["pid"].as_u64(), Some(d.pid() as u64), "{info}");
    assert_eq!(info["upstreams"], json!(["google", "other"]), "{info}");
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let names: Vec<&str> = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["google", "other"], "{status}");
}

#[test]
fn a_config_that_does_not_load_is_an_error_and_changes_nothing() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": fake_server(json!({}))}}));
    let d = env.daemon();
    let mut a = env.shim();
    a.initialize();
    std::fs::write(&env.config, b"{\"servers\": {\"google\": \n").unwrap();

    let err = control(&env.socket, "reload", Value::Null).unwrap_err();
    assert!(err.contains("invalid_config"), "{err}");
    assert!(err.contains(&env.config.display().to_string()), "{err}");
    assert!(err.contains("could not parse"), "{err}");
    let out = env.run(&["reload"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stderr.contains("did not reload") && out.stderr.contains("could not parse"),
        "{out}"
    );
    // Regression (issue 20, item 10): the parse error was printed three times (a warning
    // before asking, the daemon's answer, and that answer's cause).
    assert_eq!(out.stderr.matches("could not parse").count(), 1, "{out}");

    // A file that loads but is invalid is refused too, naming the key.
    env.write_config(&json!({"servers": {"google": fake_server(json!({})),
                                         "bad": {"args": ["x"]}}}));
    let err = control(&env.socket, "reload", Value::Null).unwrap_err();
    assert!(
        err.contains("invalid_config") && err.contains("bad"),
        "{err}"
    );

    assert_eq!(text(&a.call("echo", json!({"text": "still"}))), "still");
    let info = control(&env.socket, "info", Value::Null).unwrap();
    assert_eq!(info["upstreams"], json!(["google"]), "{info}");
    assert_eq!(info["pid"].as_u64(), Some(d.pid() as u64));
}

#[test]
fn changed_and_removed_servers_are_reported_not_applied() {
    let env = Env::new();
    env.write_config(&json!({"servers": {
        "google": fake_server(json!({})),
        "other": fake_server(json!({})),
    }}));
    let _d = env.daemon();
    env.write_config(&json!({"servers": {
        "google": fake_server(json!({"env": {"FAKE_MCP_EXTRA_TOOL": "special"}})),
        "third": fake_server(json!({})),
    }}));
    let r = control(&env.socket, "reload", Value::Null).unwrap();
    assert_eq!(r["added"], json!(["third"]), "{r}");
    assert_eq!(r["changed"], json!(["google"]), "{r}");
    assert_eq!(r["removed"], json!(["other"]), "{r}");

    // Both keep running as the daemon started them.
    let mut g = env.shim();
    g.initialize();
    assert!(!tool_names(&mut g).contains(&"special".to_string()));
    let mut o = env.shim_with(&["--server", "other"]);
    o.initialize();
    assert_eq!(text(&o.call("echo", json!({"text": "kept"}))), "kept");

    // A second reload adds nothing again, and says when the rest takes effect.
    let out = env.run(&["reload"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(!out.stdout.contains("added"), "{out}");
    assert!(out.stdout.contains("changed: google"), "{out}");
    assert!(out.stdout.contains("removed: other"), "{out}");
    assert!(out.stdout.contains("next start"), "{out}");
}

/// Names resolve over the servers served now: with a second server added, a session that
/// names none gets `google`, and an unknown name lists every server, the added one too.
#[test]
fn names_resolve_over_the_added_servers() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": fake_server(json!({}))}}));
    let _d = env.daemon();
    env.write_config(&json!({"servers": {
        "google": fake_server(json!({})),
        "other": fake_server(json!({})),
    }}));
    control(&env.socket, "reload", Value::Null).unwrap();
    let err = control(&env.socket, "list_tools", json!({"server": "nope"})).unwrap_err();
    assert!(err.contains("google, other"), "{err}");
    let tools = control(&env.socket, "list_tools", json!({"server": "other"})).unwrap();
    assert_eq!(tools["server"], "other", "{tools}");
    let tools = control(&env.socket, "list_tools", Value::Null).unwrap();
    assert_eq!(tools["server"], "google", "{tools}");
}

/// Regression (issue 20, item 5): a typo in config.json was silently ignored by `reload`.
/// Each unknown key is named after reloading, with the key it most likely meant.
#[test]
fn reload_names_unknown_keys() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": fake_server(json!({}))}}));
    let _d = env.daemon();
    env.write_config(&json!({"idelStopMs": 5000,
        "servers": {"google": fake_server(json!({})), "time": fake_server(json!({"comand": "x"}))}}));
    let out = env.run(&["reload"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("added: time"), "{out}");
    for key in [
        "unknown key idelStopMs (did you mean idleStopMs?)",
        "unknown key servers.time.comand (did you mean command?)",
    ] {
        assert!(
            out.stderr.contains(&format!(
                "warning: {}: {key}; it is ignored",
                env.config.display()
            )),
            "{out}"
        );
    }
}
