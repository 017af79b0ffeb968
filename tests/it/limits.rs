//! Every queue, table and connection count has a bound, and a flood of cheap requests cannot
//! stall other sessions: calls queued per session are capped (the rest answered at once with an
//! error), cancels do not scan the queue, connections are capped below the daemon's file limit,
//! and control connections that idle are closed.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// Regression (hardening review): one session queued 300,000 calls and the daemon grew from 8
/// to 412 MB; 5,000 cancels against a 50,000-call queue stalled every session for about 35 s.
#[test]
fn a_session_floods_the_queue_and_cancels_it_without_hurting_another() {
    let env = Env::with_fake(json!({"maxConcurrent": 1}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    a.send(&json!({"jsonrpc":"2.0","id":"front","method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}));
    std::thread::sleep(Duration::from_millis(200));
    let mut burst = Vec::new();
    for i in 0..400 {
        burst.extend_from_slice(
            format!("{}\n", json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}))
                .as_bytes(),
        );
    }
    a.send_raw(&burst);
    // Past the cap, calls are answered at once, with an error that says why.
    for i in 256..400 {
        let r = a.response(&json!(i), Duration::from_secs(10));
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(text(&r).contains("calls waiting"), "{r}");
    }
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["queue"], 256, "{status}");
    // Cancelling every queued call is cheap: B's call runs as soon as the sleep is done.
    let mut cancels = Vec::new();
    for i in 0..256 {
        cancels.extend_from_slice(
            format!(
                "{}\n",
                json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":i}})
            )
            .as_bytes(),
        );
    }
    a.send_raw(&cancels);
    let t = Instant::now();
    assert_eq!(text(&b.call("echo", json!({"text": "b"}))), "b");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["queue"], 0, "{status}");
}

/// Regression (hardening review): 1,100 idle control connections, under the usual 1,024-file
/// limit, locked every user out for as long as they stayed open.
#[test]
fn idle_connections_are_capped_and_closed() {
    let env = Env::new();
    let cfg = json!({"maxConnections": 16, "servers": {"google": {
        "command": fake_mcp(), "credentials": {"source": "none"}}}});
    env.write_config(&cfg);
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    // Connections that never say anything; past the limit they are refused at once.
    let mut idle = Vec::new();
    let mut refused = 0;
    for _ in 0..30 {
        let c = connect_patiently(&env.socket).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut line = String::new();
        match BufReader::new(c.try_clone().unwrap()).read_line(&mut line) {
            Ok(n) if n > 0 => {
                assert!(line.contains("too many connections"), "{line}");
                refused += 1;
            }
            _ => idle.push(c),
        }
    }
    assert!(refused >= 14, "{refused} refused");
    // The session that was there keeps working.
    assert_eq!(text(&s.call("echo", json!({"text": "still"}))), "still");
    // Idle ones are closed after a while, and control requests get through again.
    let t = Instant::now();
    for c in &mut idle {
        c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 64];
        let n = std::io::Read::read(c, &mut buf).unwrap_or(0);
        assert_eq!(n, 0, "closed, not answered");
    }
    assert!(t.elapsed() < Duration::from_secs(15));
    assert!(control(&env.socket, "status", Value::Null).is_ok());
    // A control connection idle after a request is closed too.
    let mut c = connect_patiently(&env.socket).unwrap();
    c.write_all(b"{\"id\":\"1\",\"method\":\"ping\"}\n")
        .unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("pong"), "{line}");
    c.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    line.clear();
    assert_eq!(
        r.read_line(&mut line).unwrap_or(0),
        0,
        "closed after idling: {line}"
    );
}
