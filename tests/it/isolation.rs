//! Every child runs where, and with what, its client would have run it: a child's environment
//! is the user's, never whichever client started the daemon; a server's `passEnv` splits
//! instances by the sessions' values; a per-project child runs in its project, never another's
//! or the daemon's directory, and instances are bounded by eviction, never by sharing; each
//! instance has its own cache; an abandoned call's logs reach nobody; the waiting room has an
//! upstream-wide bound; a request whose params the router cannot read is refused, not passed on.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// A shim started the way a client starts it: in `dir`, with `vars` added to its environment.
fn shim_in(env: &Env, dir: &Path, vars: &[(&str, &str)]) -> Shim {
    let mut cmd = env.cmd();
    cmd.current_dir(dir).env_remove("CLAUDE_PROJECT_DIR");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    env.stdio_server(cmd, &["mcp"])
}

fn project(env: &Env, name: &str) -> PathBuf {
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// Regression: `coogle mcp` started the daemon with its client's environment and working
/// directory, and every child inherited both: a first terminal's `AWS_PROFILE=prod` or a
/// project's direnv secret reached every server, and a server another client needed it for
/// ran without it when that client did not happen to start the daemon.
#[test]
fn a_childs_environment_is_the_users_not_the_starting_clients() {
    let env = Env::with_fake(json!({}));
    let first = project(&env, "first");
    let mut starter = shim_in(
        &env,
        &first,
        &[("AWS_PROFILE", "prod"), ("DIRENV_SECRET", "s3cr3t-first")],
    );
    starter.initialize();
    for var in ["AWS_PROFILE", "DIRENV_SECRET"] {
        let got = text(&starter.call("env", json!({"name": var})));
        assert_eq!(got, "<unset>", "{var} reached the child");
    }
    // The user's own variables do reach it.
    let home = text(&starter.call("env", json!({"name": "HOME"})));
    assert_eq!(home, env.home.display().to_string());
    // The child runs in the home directory, the daemon in /: neither in the starter's project.
    let cwd = text(&starter.call("cwd", json!({})));
    assert_eq!(cwd, env.home.display().to_string());
    let daemon_cwd = std::fs::read_link(format!("/proc/{}/cwd", env.daemon_pid())).unwrap();
    assert_eq!(daemon_cwd, PathBuf::from("/"));

    // Another client, with its own environment, sees the same child environment.
    let second = project(&env, "second");
    let mut other = shim_in(&env, &second, &[("AWS_PROFILE", "dev")]);
    other.initialize();
    let got = text(&other.call("env", json!({"name": "AWS_PROFILE"})));
    assert_eq!(got, "<unset>");
}

/// A variable a server needs from the session is named in its `passEnv`: each session's child
/// gets that session's value, sessions with the same value share a child, and no other
/// variable of any session's environment gets through.
#[test]
fn pass_env_gives_each_session_its_own_value_in_its_own_instance() {
    let env = Env::with_fake(json!({"passEnv": ["AWS_PROFILE"]}));
    let dir = project(&env, "p");
    let mut prod = shim_in(&env, &dir, &[("AWS_PROFILE", "prod"), ("OTHER", "x")]);
    let mut dev = shim_in(&env, &dir, &[("AWS_PROFILE", "dev")]);
    let mut prod2 = shim_in(&env, &dir, &[("AWS_PROFILE", "prod")]);
    let mut none = shim_in(&env, &dir, &[]);
    let mut pids = Vec::new();
    for (s, want) in [
        (&mut prod, "prod"),
        (&mut dev, "dev"),
        (&mut prod2, "prod"),
        (&mut none, "<unset>"),
    ] {
        s.initialize();
        assert_eq!(text(&s.call("env", json!({"name": "AWS_PROFILE"}))), want);
        assert_eq!(text(&s.call("env", json!({"name": "OTHER"}))), "<unset>");
        pids.push(text(&s.call("pid", json!({}))));
    }
    assert_eq!(pids[0], pids[2], "same value, same child");
    assert_ne!(pids[0], pids[1], "another value, another child");
    assert_ne!(pids[0], pids[3]);
    assert_ne!(pids[1], pids[3]);
    // Status names the instances by variable, never by value.
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let text = status.to_string();
    assert!(text.contains("AWS_PROFILE #"), "{status:#}");
    assert!(
        !text.contains("prod") && !text.contains("\"dev"),
        "{status:#}"
    );
}

/// What a session the daemon refused was told: the error its first request got, at once.
fn refusal(s: &mut Shim) -> String {
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}}));
    let r = s.response(&json!(1), Duration::from_secs(30));
    r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn per_project_fake(env: &Env, extra: Value) {
    let mut server = json!({"sharing": "per-project"});
    for (k, v) in extra.as_object().unwrap() {
        server[k] = v.clone();
    }
    env.write_fake_config(server);
}

/// Regression: past 64 project directories in one daemon's life, every new project's session
/// was served by the server's unbound instance, running in the daemon's (its starter's)
/// directory. Unused instances now make room; with all in use, a new project is refused, and a
/// per-project server is never reached without a project.
#[test]
fn per_project_instances_are_bounded_by_eviction_never_by_sharing() {
    let env = Env::new();
    per_project_fake(&env, json!({}));
    let mut config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    config["maxInstances"] = json!(2);
    env.write_config(&config);

    // Five projects one after the other: each is served in its own directory.
    for i in 0..5 {
        let dir = project(&env, &format!("p{i}"));
        let mut s = shim_in(&env, &dir, &[]);
        s.initialize();
        assert_eq!(text(&s.call("cwd", json!({}))), dir.display().to_string());
    }
    // Two projects in use: a third is refused, clearly, and served by nobody else.
    let (a, b) = (project(&env, "a"), project(&env, "b"));
    let mut sa = shim_in(&env, &a, &[]);
    sa.initialize();
    sa.call("cwd", json!({}));
    let mut sb = shim_in(&env, &b, &[]);
    sb.initialize();
    let c = project(&env, "c");
    let mut sc = shim_in(&env, &c, &[]);
    let msg = refusal(&mut sc);
    assert!(
        msg.contains("2 separate instances") && msg.contains("maxInstances"),
        "{msg}"
    );
    // When a project leaves, the next one gets its place.
    drop(sa);
    wait_until("a's instance to be unused", Duration::from_secs(20), || {
        let mut s = shim_in(&env, &c, &[]);
        let refused = refusal(&mut s);
        if !refused.is_empty() {
            return Err(format!("refused: {refused}"));
        }
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let cwd = text(&s.call("cwd", json!({})));
        if cwd == c.display().to_string() {
            Ok(())
        } else {
            Err(format!("the child runs in {cwd}"))
        }
    });

    // A control request names its project, or is refused.
    let err = control(&env.socket, "call", json!({"tool": "cwd"})).unwrap_err();
    assert!(err.contains("names no project directory"), "{err}");
    let r = control(&env.socket, "call", json!({"tool": "cwd", "project": b})).unwrap();
    assert_eq!(r["content"][0]["text"], b.display().to_string());
}

/// Regression: per-project instances shared one cache, so project B's first session was
/// answered with what project A's child had said (its instructions, its directory) while B's
/// own child was not running yet. Each instance now has its own, on disk too.
#[test]
fn a_projects_first_session_never_gets_another_projects_answers() {
    let env = Env::new();
    per_project_fake(
        &env,
        json!({"env": {"FAKE_MCP_INSTRUCTIONS_CWD": "1", "FAKE_MCP_START_DELAY_MS": "300"}}),
    );
    let (a, b) = (project(&env, "a"), project(&env, "b"));
    let instructions = |dir: &Path| {
        let mut s = shim_in(&env, dir, &[]);
        let init = s.initialize();
        init["instructions"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(instructions(&a).ends_with(&format!("cwd={}", a.display())));
    assert!(
        instructions(&b).ends_with(&format!("cwd={}", b.display())),
        "B was told what A's child said"
    );
    // After a daemon restart each is answered from its own cache on disk.
    let pid = env.daemon_pid();
    let _ = control(&env.socket, "shutdown", Value::Null);
    wait_gone("the daemon to exit", &[pid], Duration::from_secs(20));
    assert!(instructions(&b).ends_with(&format!("cwd={}", b.display())));
    assert!(instructions(&a).ends_with(&format!("cwd={}", a.display())));
}

fn envelope(log_level: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "isolation", "version": "1"},
        "io.modelcontextprotocol/logLevel": log_level,
    })
}

fn modern_call(s: &mut Shim, id: u64, tool: &str, args: Value) {
    s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": tool, "arguments": args, "_meta": envelope("debug")}}));
}

/// Regression: a 2026-07-28 child went on logging for a call that timed out (or was
/// cancelled), and those lines reached another session that had a call in flight. An
/// abandoned call's logs now reach nobody while the child may still be working on it.
#[test]
fn an_abandoned_calls_logs_reach_no_other_session() {
    for how in ["timeout", "cancel"] {
        let env = Env::with_fake(json!({
            "env": {"FAKE_MCP_ERA": "modern"},
            "maxConcurrent": 4,
            "callTimeoutMs": 1500,
        }));
        let mut a = env.shim();
        let mut b = env.shim();
        // B's call logs every 100 ms for 3 s, deaf to cancels.
        modern_call(
            &mut b,
            1,
            "notify",
            json!({"kind": "log", "count": 30, "everyMs": 100, "text": "for B"}),
        );
        std::thread::sleep(Duration::from_millis(300));
        if how == "cancel" {
            b.send(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": 1, "reason": "test"}}),
            );
        } else {
            let r = b.response(&json!(1), Duration::from_secs(20));
            assert_eq!(r["result"]["isError"], true, "{r}");
        }
        // A's call is in flight, asking for logs, while the child goes on logging for B.
        modern_call(&mut a, 7, "sleep", json!({"ms": 2500}));
        let r = a.response(&json!(7), Duration::from_secs(30));
        assert!(r.get("result").is_some(), "{r}");
        let leaked: Vec<&Value> = a
            .stray
            .iter()
            .filter(|m| m["params"]["data"] == "for B")
            .collect();
        assert!(leaked.is_empty(), "{how}: A got B's logs: {leaked:?}");
    }
}

/// Regression: the README promised 4,096 queued calls per upstream in all, but only the 256
/// per session held: 20 sessions queued 5,120.
#[test]
fn queued_calls_are_bounded_across_sessions() {
    let env = Env::with_fake(json!({"maxConcurrent": 1, "callTimeoutMs": 60000}));
    let mut first = env.shim();
    first.initialize();
    // One long call holds the only slot; 16 sessions queue 256 each behind it.
    first.send(
        &json!({"jsonrpc": "2.0", "id": "hold", "method": "tools/call",
                       "params": {"name": "sleep", "arguments": {"ms": 60000}}}),
    );
    let mut sessions: Vec<Shim> = (0..16).map(|_| env.shim()).collect();
    for s in &mut sessions {
        s.initialize();
        let mut batch = Vec::new();
        for i in 0..256 {
            let line = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": "echo", "arguments": {"text": "q"}}});
            batch.extend(serde_json::to_vec(&line).unwrap());
            batch.push(b'\n');
        }
        s.send_raw(&batch);
    }
    wait_status(
        &env.socket,
        "4,096 calls to be queued",
        Duration::from_secs(60),
        |st| st["upstreams"][0]["queue"].as_u64() == Some(4096),
    );
    let mut late = env.shim();
    late.initialize();
    let r = late.call("echo", json!({"text": "one too many"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        text(&r).contains("4096 requests already wait"),
        "{}",
        text(&r)
    );
    let _ = control(&env.socket, "shutdown", Value::Null);
}

/// Regression: the reaper kept what lived below each child by server name, so when one
/// instance's child exited (a per-session browser whose session ended), what lived below
/// another instance's child of the same server (another session's browser) was stopped too; and
/// a child spawned while another one's exit was being handled could be taken for an orphan.
#[test]
fn one_instances_exit_leaves_another_instances_processes_alone() {
    let env = Env::with_fake(json!({"sharing": "per-session"}));
    let mut first = env.shim();
    first.initialize();
    first.call("pid", json!({}));
    let mut second = env.shim();
    second.initialize();
    let grandchild: u32 = text(&second.call("spawn_grandchild", json!({"detach": true})))
        .parse()
        .unwrap();
    // Long enough for the daemon's process-table scan to see it below the second child.
    std::thread::sleep(Duration::from_secs(4));
    let first_child: u32 = text(&first.call("pid", json!({}))).parse().unwrap();
    drop(first);
    wait_gone(
        "the first session's child to exit",
        &[first_child],
        Duration::from_secs(20),
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        pid_alive(grandchild),
        "the second session's process went with the first session's child"
    );
    // It still goes with its own.
    drop(second);
    wait_gone(
        "the second session's grandchild to go",
        &[grandchild],
        Duration::from_secs(20),
    );
}

/// Regression (review of 21c9c63): a key escaped as a lone surrogate, which serde_json checks
/// as JSON but will not decode, hid `params` (or its `_meta`, or a call's arguments) from the
/// router, which forwarded them as they were: a `progressToken` it never rewrote reached the
/// child and could name another session's call, as the child (Python's `json` decodes the key)
/// reads it. Such a request is refused, once, with why; the session goes on.
#[test]
fn a_request_the_router_cannot_read_is_refused_and_the_session_goes_on() {
    let env = Env::with_fake(json!({}));
    let mut a = env.shim();
    a.initialize();
    let cases = [
        (
            r#"{"name":"echo","arguments":{"text":"x"},"\ud800":0,"_meta":{"progressToken":1}}"#,
            "params",
        ),
        (
            r#"{"name":"echo","arguments":{"text":"x"},"_meta":{"\udfff":0,"progressToken":1}}"#,
            "params._meta",
        ),
        (
            r#"{"name":"echo","arguments":{"text":"x","\ud800":0}}"#,
            "params.arguments",
        ),
    ];
    for (id, (params, part)) in (11..).zip(cases) {
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#);
        a.send_raw(format!("{line}\n").as_bytes());
        let r = a.response(&json!(id), Duration::from_secs(20));
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
        // The message as the client shows it: said once, with what to do.
        assert_eq!(
            r["error"]["message"],
            format!(
                "invalid params: {part} has a key written with an escape that is not Unicode (a lone surrogate such as \\ud800); send it without that key"
            ),
            "{r}"
        );
    }
    let r = a.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "after"}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "after", "{r}");
}
