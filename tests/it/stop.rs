//! `coogle stop` returns only once the daemon's process has exited, so `coogle stop && coogle
//! serve` always leaves a daemon running, even while the old one drains a call in flight.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::serve::Serve;
use support::*;

/// Regression: `stop` returned when the socket file was gone, while the daemon was still
/// draining its calls and holding its lock; the `serve` after it said "already running" and
/// exited 0, and then the old daemon exited too, leaving none.
#[test]
fn stop_then_serve_with_a_call_in_flight_leaves_a_running_daemon() {
    let env = Env::new();
    // A child that ignores SIGTERM makes the daemon use its whole grace period to stop it.
    env.write_config(&json!({
        "shutdownGraceMs": 2000,
        "servers": {"google": {
            "command": fake_mcp(),
            "env": {"FAKE_MCP_IGNORE_SIGTERM": "1"},
            "credentials": {"source": "none"},
        }},
    }));
    let mut old = env.daemon();
    env.wait_upstream_ready();
    let old_pid = old.pid();
    let socket = env.socket.clone();
    let call = std::thread::spawn(move || {
        raw_exchange(
            &socket,
            &serde_json::to_vec(&json!({"id": "c", "method": "call", "params": {
                "server": "google", "tool": "sleep", "arguments": {"ms": 30000}}}))
            .unwrap(),
        )
    });
    wait_status(
        &env.socket,
        "the call to be in flight",
        Duration::from_secs(10),
        |s| s["upstreams"][0]["inFlight"] == 1,
    );

    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains(&format!("pid {old_pid}")), "{out}");
    assert!(
        !pid_alive(old_pid),
        "`coogle stop` returned while the daemon (pid {old_pid}) was still running"
    );
    let (code, _) = old.wait_exit();
    assert_eq!(code, Some(0));
    let _ = call.join();

    let mut new = Serve::spawn(env.cmd());
    wait_until("the new daemon to answer", Duration::from_secs(20), || {
        assert!(
            !new.exited(),
            "`coogle serve` after `coogle stop` exited: the old daemon still held the socket"
        );
        match control(&env.socket, "info", Value::Null) {
            Ok(i) if i["pid"].as_u64() == Some(u64::from(new.pid())) => Ok(()),
            Ok(i) => Err(format!("info: {i}")),
            Err(e) => Err(format!("info failed: {e}")),
        }
    });
}

/// A daemon that does not exit within the wait is reported, with a non-zero exit code.
#[test]
fn stop_says_when_the_daemon_does_not_exit() {
    let env = Env::new();
    // Pretend to be a daemon: answer `shutdown` with the pid of a process that stays.
    let socket_dir = env.socket.parent().unwrap().to_path_buf();
    std::fs::create_dir(&socket_dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&env.socket).unwrap();
    let stays = std::process::id();
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        for conn in listener.incoming().flatten() {
            let mut line = String::new();
            let _ = BufReader::new(&conn).read_line(&mut line);
            let _ = (&conn).write_all(
                format!("{{\"id\":\"1\",\"ok\":true,\"result\":{{\"pid\":{stays}}}}}\n").as_bytes(),
            );
        }
    });
    env.write_config(&json!({"shutdownGraceMs": 0}));
    let started = std::time::Instant::now();
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stderr.contains(&format!("(pid {stays})")), "{out}");
    assert!(out.stderr.contains("has not exited after 30 s"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(40), "{out}");
}
