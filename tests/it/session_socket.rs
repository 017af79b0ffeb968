//! A session's socket as the daemon holds it (`daemon/session_socket.rs`).
//!
//! The daemon wakes for work, not for nothing. A Unix socket says "writable" each time its
//! peer reads, so a session's socket registered for writing woke the daemon once more per call
//! (the shim reading the answer) with nothing to do. It is registered for reading only; the
//! daemon asks to hear "writable" only while a session's buffer is full. A session still costs
//! one descriptor, and a peer that stops reading does not keep it forever.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::Env;

/// Voluntary context switches of every thread of `pid`: each time one blocked (the daemon's
/// runtime, in `epoll_wait`).
fn voluntary_switches(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// A session on the daemon's socket whose every read the test times.
struct Session {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Session {
    fn open(env: &Env) -> Session {
        let w = UnixStream::connect(&env.socket).unwrap();
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        let mut s = Session { w, r };
        s.send(&json!({"coogle": 1, "mode": "mcp", "version": env!("CARGO_PKG_VERSION")}));
        assert_eq!(s.line()["ok"], true);
        s
    }

    /// Initialized, as a handshake-era client.
    fn initialized(env: &Env) -> Session {
        let mut s = Session::open(env);
        s.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "session-socket", "version": "1"}}}),
        );
        assert_eq!(s.line()["id"], 0);
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.w.write_all(&line).unwrap();
    }

    fn line(&mut self) -> Value {
        let mut buf = String::new();
        self.r.read_line(&mut buf).unwrap();
        serde_json::from_str(&buf).unwrap_or_else(|e| panic!("{e}: {buf:?}"))
    }

    /// A call whose answer is read only once the daemon has surely gone back to waiting: the
    /// read is then the only thing that could wake it.
    fn call_apart(&mut self, id: u64) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x", "message": "x"}}}));
        // Nothing is read until the answer has surely come (the daemon and the child answer
        // in well under a millisecond; a busy machine that takes longer only makes the test
        // weaker, never failing).
        std::thread::sleep(Duration::from_millis(15));
        let answer = self.line();
        assert_eq!(answer["id"], id, "{answer}");
        assert!(answer["result"].is_object(), "{answer}");
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// A call wakes the daemon twice: the request, and the child's answer; the session reading
/// its answer wakes it no more (it did, once per call, before the fix: 3 per call here). A
/// busy machine can only batch wake-ups, so the bound holds under load.
#[test]
fn a_session_reading_its_answers_does_not_wake_the_daemon() {
    const CALLS: u64 = 100;
    let env = Env::with_fake(json!({}));
    let daemon = env.daemon();
    let mut s = Session::initialized(&env);
    for id in 1..=10 {
        s.call_apart(id);
    }
    let before = voluntary_switches(daemon.pid());
    for id in 0..CALLS {
        s.call_apart(100 + id);
    }
    let woke = voluntary_switches(daemon.pid()) - before;
    let per_call = woke as f64 / CALLS as f64;
    assert!(
        per_call < 2.5,
        "the daemon blocked {woke} times over {CALLS} calls ({per_call:.2} per call); 2 is the work"
    );
}

/// The descriptors `pid` holds now.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Regression (review of the read-only registration): each session held two descriptors (the
/// reader's and a copy for the writer), while the connection limit counted one, so the daemon
/// ran out of descriptors below its own limit and could not start a child. A session costs
/// one.
#[test]
fn a_session_costs_one_descriptor() {
    const SESSIONS: usize = 20;
    let env = Env::with_fake(json!({}));
    let daemon = env.daemon();
    let mut first = Session::initialized(&env);
    first.call_apart(1);
    let before = open_fds(daemon.pid());
    let mut sessions: Vec<Session> = (0..SESSIONS).map(|_| Session::initialized(&env)).collect();
    for s in &mut sessions {
        s.call_apart(2);
    }
    let more = open_fds(daemon.pid()) - before;
    assert!(
        more <= SESSIONS + 2,
        "{SESSIONS} sessions took {more} more descriptors"
    );
}

/// A peer that stops sending (shuts its write side) and never reads the answers queued for it
/// does not keep the session's socket: once it is gone, what is queued for it is given up
/// after a few seconds (before, its writer waited forever).
#[test]
fn a_peer_that_hangs_up_without_reading_does_not_keep_its_socket() {
    let env = Env::with_fake(json!({}));
    let daemon = env.daemon();
    let mut warm = Session::initialized(&env);
    warm.call_apart(1);
    let before = open_fds(daemon.pid());
    let mut s = Session::initialized(&env);
    // Far more answer than a socket buffer holds: the daemon's writer waits on this peer.
    let text = "x".repeat(4096);
    for id in 0..400 {
        s.send(
            &json!({"jsonrpc": "2.0", "id": 10 + id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text, "message": text}}}),
        );
    }
    s.w.shutdown(std::net::Shutdown::Write).unwrap();
    support::wait_until("the socket to be let go", Duration::from_secs(30), || {
        let now = open_fds(daemon.pid());
        if now <= before {
            Ok(())
        } else {
            Err(format!("{now} descriptors, {before} before the session"))
        }
    });
    // The daemon serves on.
    warm.call_apart(2);
    drop(s);
}
