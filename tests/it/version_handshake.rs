//! A shim newer than the daemon (after `brew upgrade` or `self-update`) gets the old daemon
//! replaced once it is idle; live sessions carry on with the new one.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

#[test]
fn a_newer_client_gets_an_idle_old_daemon_replaced() {
    let env = Env::with_fake(json!({}));
    let mut d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    // A call in flight keeps the old daemon serving ...
    s.send(&json!({"jsonrpc":"2.0","id":"busy","method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}));
    std::thread::sleep(Duration::from_millis(100));
    let mut newer = UnixStream::connect(&env.socket).unwrap();
    newer
        .write_all(b"{\"coogle\":1,\"mode\":\"mcp\",\"version\":\"999.0.0\"}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(newer.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"ok\":true"), "{line}");
    let info = control(&env.socket, "info", Value::Null).unwrap();
    assert_eq!(info["replacePending"], true);
    let old_pid = d.pid();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        pid_alive(old_pid),
        "the daemon must finish the call in flight first"
    );
    let busy = s.response(&json!("busy"), Duration::from_secs(10));
    assert_eq!(text(&busy), "slept 1500 ms");
    // ... then, idle, it hands over.
    let (code, _) = d.wait_exit();
    assert_eq!(code, Some(0));
    drop(newer);
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
