//! A shim newer than the daemon (after `brew upgrade` or `self-update`) gets the old daemon
//! replaced once it is idle; live sessions carry on with the new one. Only a binary on disk
//! that really is newer counts: a hello is a claim any local client can make (regression: such
//! claims, repeated, caused 23 restarts in 20 s).

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_github::{patched_coogle, patched_version};
use support::*;

/// A connection that said hello as a client of `version`.
fn hello_of(env: &Env, version: &str) -> UnixStream {
    let mut c = connect_patiently(&env.socket).unwrap();
    c.write_all(
        format!("{{\"coogle\":1,\"mode\":\"mcp\",\"version\":\"{version}\"}}\n").as_bytes(),
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(c.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"ok\":true"), "{line}");
    c
}

#[test]
fn a_newer_client_gets_an_idle_old_daemon_replaced() {
    let env = Env::with_fake(json!({}));
    // The daemon runs from a copy of this build, which the test can replace on disk.
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("coogle");
    std::fs::copy(COOGLE, &installed).unwrap();
    let mut child = env
        .sealed(&installed)
        .args(["serve", "--log-stderr"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let old_pid = child.id();
    env.wait_ready();
    let mut s = env.shim();
    s.initialize();
    // A call in flight keeps the old daemon serving ...
    s.send(&json!({"jsonrpc":"2.0","id":"busy","method":"tools/call","params":{"name":"sleep","arguments":{"ms":2500}}}));
    std::thread::sleep(Duration::from_millis(100));
    // A client that merely claims a newer version changes nothing: the binary on disk is not.
    let _liar = hello_of(&env, "999.0.0");
    std::thread::sleep(Duration::from_millis(500));
    let info = control(&env.socket, "info", Value::Null).unwrap();
    assert_eq!(info["replacePending"], false, "{info}");
    // Now the newer release is installed over it, and its first client says hello.
    let tmp = bin.join("coogle.new");
    std::fs::write(&tmp, patched_coogle(&env.path("patch"))).unwrap();
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &installed).unwrap();
    let _newer = hello_of(&env, &patched_version());
    wait_control(
        &env.socket,
        "info",
        "the hand-over to be decided",
        Duration::from_secs(10),
        |i| i["replacePending"] == true,
    );
    assert!(
        pid_alive(old_pid),
        "the daemon must finish the call in flight first"
    );
    let busy = s.response(&json!("busy"), Duration::from_secs(10));
    assert_eq!(text(&busy), "slept 2500 ms");
    // ... then, idle, it hands over.
    wait_until(
        "the old daemon to stop",
        Duration::from_secs(10),
        || match child.try_wait().unwrap() {
            Some(_) => Ok(()),
            None => Err(describe_process(child.id())),
        },
    );
    // The shim reconnects to a daemon it starts, and its session goes on.
    assert_eq!(
        text(&s.call("echo", json!({"text": "new daemon"}))),
        "new daemon"
    );
    let info = control(&env.socket, "info", Value::Null).unwrap();
    assert_ne!(info["pid"].as_u64().unwrap() as u32, old_pid);
    // Closed first: a shim still connected would start a new daemon once this one is gone.
    drop(s);
    let _ = env.run(&["stop"]);
}
