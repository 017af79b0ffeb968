//! A shim newer than the daemon (after `brew upgrade` or `self-update`) gets the old daemon
//! replaced, and no session is ever left without a daemon: the new binary must first prove it
//! can serve (started on the side, it listens and answers a hello with the version it printed),
//! then the old daemon, once idle, becomes it in place (same pid, the socket never closed).
//!
//! Regressions: a hello is a claim any local client can make (such claims, repeated, caused 23
//! restarts in 20 s); a fake "newer" binary that printed a higher `--version` made the daemon
//! step down, and a connected agent's next call got no answer; a broken newer coogle whose
//! `serve` failed left no daemon at all, and the shim re-ran it every ~20 s.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_github::patched_version;
use support::installed::{install, installed_daemon, newer_coogle};
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

fn info(env: &Env) -> Value {
    control(&env.socket, "info", Value::Null).unwrap()
}

fn log(env: &Env) -> String {
    std::fs::read_to_string(&env.log).unwrap_or_default()
}

/// Wait until the daemon's check of a newer binary is over: it said so in the log, or it is
/// no longer the daemon it was (stepped down, exited).
fn wait_for_refusal(env: &Env, daemon: &mut Child, count: usize) {
    let pid = daemon.id();
    wait_for(
        "the candidate's check to end",
        Duration::from_secs(30),
        || {
            log(env).matches("not handing over to").count() >= count
                || daemon.try_wait().unwrap().is_some()
                || control(&env.socket, "info", Value::Null)
                    .is_ok_and(|i| i["pid"].as_u64() != Some(u64::from(pid)))
        },
    );
}

/// Pings the daemon on fresh connections, back to back, until stopped: how many failed.
struct Pinger {
    stop: Arc<AtomicBool>,
    failed: Arc<AtomicUsize>,
    sent: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Pinger {
    fn start(socket: &Path) -> Pinger {
        let (stop, failed, sent): (Arc<AtomicBool>, Arc<AtomicUsize>, Arc<AtomicUsize>) =
            Default::default();
        let (s, f, n) = (Arc::clone(&stop), Arc::clone(&failed), Arc::clone(&sent));
        let socket = socket.to_path_buf();
        let thread = std::thread::spawn(move || {
            let mut errors = Vec::new();
            while !s.load(Ordering::Relaxed) {
                n.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = control(&socket, "ping", Value::Null) {
                    f.fetch_add(1, Ordering::Relaxed);
                    errors.push(e);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            errors
        });
        Pinger {
            stop,
            failed,
            sent,
            thread: Some(thread),
        }
    }

    /// (pings sent, the errors of those that failed)
    fn finish(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let errors = self.thread.take().unwrap().join().unwrap();
        assert_eq!(errors.len(), self.failed.load(Ordering::Relaxed));
        (self.sent.load(Ordering::Relaxed), errors)
    }
}

#[test]
fn a_newer_coogle_proves_itself_then_takes_over_in_place() {
    let env = Env::with_fake(json!({}));
    let (mut child, installed) = installed_daemon(&env);
    let old_pid = child.id();
    let socket_inode = std::fs::metadata(&env.socket).unwrap().ino();
    let mut s = env.shim();
    s.initialize();
    let child_pid = text(&s.call("pid", json!({})));
    // A call in flight keeps the old daemon serving ...
    s.send(&json!({"jsonrpc":"2.0","id":"busy","method":"tools/call","params":{"name":"sleep","arguments":{"ms":10000}}}));
    std::thread::sleep(Duration::from_millis(100));
    // A client that merely claims a newer version changes nothing: the binary on disk is not.
    let _liar = hello_of(&env, "999.0.0");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(info(&env)["replacePending"], false);
    // Now the newer release is installed over it, and its first client says hello.
    install(&installed, &newer_coogle(&env));
    let new = patched_version();
    let _newer = hello_of(&env, &new);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while info(&env)["replacePending"] != true {
        assert!(
            std::time::Instant::now() < deadline,
            "the newer coogle did not prove itself:\n{}",
            log(&env)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info(&env)["version"], env!("CARGO_PKG_VERSION"));
    let busy = s.response(&json!("busy"), Duration::from_secs(20));
    assert_eq!(text(&busy), "slept 10000 ms");
    // ... then, idle, it becomes the new version in place: same process, same socket, and no
    // connection made meanwhile goes unanswered.
    let pinger = Pinger::start(&env.socket);
    wait_for("the new version to serve", Duration::from_secs(30), || {
        control(&env.socket, "info", Value::Null).is_ok_and(|i| i["version"] == new.as_str())
    });
    std::thread::sleep(Duration::from_millis(200));
    let (sent, errors) = pinger.finish();
    assert!(
        errors.is_empty(),
        "{} of {sent} pings failed: {errors:?}",
        errors.len()
    );
    let now = info(&env);
    assert_eq!(now["pid"].as_u64(), Some(u64::from(old_pid)), "{now}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the daemon process exited"
    );
    assert_eq!(exe_of(old_pid), std::fs::canonicalize(&installed).unwrap());
    assert_eq!(std::fs::metadata(&env.socket).unwrap().ino(), socket_inode);
    let said = log(&env);
    assert!(
        said.contains(&format!("coogle {new} proved it can serve")),
        "{said}"
    );
    assert!(said.contains("took over the socket, the lock"), "{said}");
    // The session goes on (its shim reconnected to the same socket), and so does its child:
    // an upgrade in place restarts nothing.
    assert_eq!(
        text(&s.call("echo", json!({"text": "new daemon"}))),
        "new daemon"
    );
    assert_eq!(text(&s.call("pid", json!({}))), child_pid, "{}", log(&env));
    // Closed first: a shim still connected would start a new daemon once this one is gone.
    drop(s);
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    wait_for("the daemon to exit", Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
}

/// `--version` says a newer coogle; its `serve` runs a coogle that is not the installed file.
const FAKE: &str = r#"#!/bin/sh
echo "$@" >> "$FAKE_LOG"
case "$1" in
    --version) echo "coogle 99.0.0 (not really)" ;;
    *) exec "$REAL" "$@" ;;
esac
"#;

#[test]
fn a_binary_that_is_not_the_newer_coogle_it_claims_is_never_handed_anything() {
    let env = Env::with_fake(json!({}));
    let (mut child, installed) = installed_daemon(&env);
    let pid = child.id();
    let calls = env.path("fake-calls");
    let script = FAKE
        .replace("$FAKE_LOG", &calls.display().to_string())
        .replace("$REAL", COOGLE);
    let mut s = env.shim();
    s.initialize();
    install(&installed, script.as_bytes());
    let serves = || {
        read_lines(&calls)
            .iter()
            .filter(|l| l.starts_with("serve"))
            .count()
    };
    let _claim = hello_of(&env, "99.0.0");
    // The session is served while the candidate is checked ...
    assert_eq!(text(&s.call("echo", json!({"text": "during"}))), "during");
    wait_for_refusal(&env, &mut child, 1);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the daemon stepped down"
    );
    // ... and after: the same daemon, the same version, nothing pending.
    assert_eq!(text(&s.call("echo", json!({"text": "after"}))), "after");
    let now = info(&env);
    assert_eq!(now["pid"].as_u64(), Some(u64::from(pid)), "{now}");
    assert_eq!(now["version"], env!("CARGO_PKG_VERSION"), "{now}");
    assert_eq!(now["replacePending"], false, "{now}");
    let said = log(&env);
    assert!(
        said.contains("the process that answers runs another executable"),
        "the log says why: {said}"
    );
    assert_eq!(serves(), 1, "{:?}", read_lines(&calls));
    // The same file is not tried again ...
    let _again = hello_of(&env, "99.0.0");
    assert_eq!(text(&s.call("echo", json!({"text": "still"}))), "still");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(serves(), 1, "tried again: {:?}", read_lines(&calls));
    // ... until it changes.
    install(&installed, format!("{script}# changed\n").as_bytes());
    let _changed = hello_of(&env, "99.0.0");
    wait_for_refusal(&env, &mut child, 2);
    assert_eq!(serves(), 2, "{:?}", read_lines(&calls));
    assert_eq!(info(&env)["pid"].as_u64(), Some(u64::from(pid)));
    assert_eq!(text(&s.call("echo", json!({"text": "end"}))), "end");
    drop(s);
    let _ = env.run(&["stop"]);
    wait_for("the daemon to exit", Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
}

#[test]
fn a_broken_newer_coogle_leaves_the_old_daemon_serving() {
    let env = Env::with_fake(json!({}));
    let (mut child, installed) = installed_daemon(&env);
    let pid = child.id();
    let mut s = env.shim();
    s.initialize();
    // A real newer coogle, whose `serve` fails: it cannot read the config (the running daemon
    // read it before it broke).
    install(&installed, &newer_coogle(&env));
    std::fs::write(&env.config, "{\"servers\": {\"google\": ").unwrap();
    let new = patched_version();
    let _claim = hello_of(&env, &new);
    assert_eq!(text(&s.call("echo", json!({"text": "during"}))), "during");
    wait_for_refusal(&env, &mut child, 1);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the daemon stepped down"
    );
    // Nothing was left without a daemon: the same one serves, and keeps serving.
    for i in 0..5 {
        let t = format!("call {i}");
        assert_eq!(text(&s.call("echo", json!({"text": t}))), t);
    }
    let now = info(&env);
    assert_eq!(now["pid"].as_u64(), Some(u64::from(pid)), "{now}");
    assert_eq!(now["version"], env!("CARGO_PKG_VERSION"), "{now}");
    assert!(child.try_wait().unwrap().is_none());
    let said = log(&env);
    assert!(
        said.contains(&format!("(coogle {new}): its `serve` exited")) && said.contains("config"),
        "the log says why: {said}"
    );
    drop(s);
    let _ = env.run(&["stop"]);
    wait_for("the daemon to exit", Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
}

/// `--version` says a newer coogle; its `serve` takes a while, then exits with code 7.
const SLOW_FAKE: &str = r#"#!/bin/sh
echo "$@" >> "$FAKE_LOG"
case "$1" in
    --version) echo "coogle 99.0.0 (not really)" ;;
    *) sleep 2; exit 7 ;;
esac
"#;

/// Regression: the candidate is the daemon's own child, and the sweep that follows an
/// upstream child's exit took it for an orphan left behind and killed it (its reaping could
/// also take the candidate's exit status from the check waiting for it).
#[test]
fn a_candidate_being_checked_is_not_taken_for_an_orphan() {
    let env = Env::with_fake(json!({}));
    let (mut child, installed) = installed_daemon(&env);
    let calls = env.path("fake-calls");
    install(
        &installed,
        SLOW_FAKE
            .replace("$FAKE_LOG", &calls.display().to_string())
            .as_bytes(),
    );
    let mut s = env.shim();
    s.initialize();
    let _claim = hello_of(&env, "99.0.0");
    wait_for("the candidate to start", Duration::from_secs(20), || {
        read_lines(&calls).iter().any(|l| l.starts_with("serve"))
    });
    // An upstream child exits while the candidate is being checked.
    s.send(&json!({"jsonrpc":"2.0","id":"crash","method":"tools/call","params":{"name":"crash","arguments":{}}}));
    let _ = s.response(&json!("crash"), Duration::from_secs(10));
    wait_for_refusal(&env, &mut child, 1);
    let said = log(&env);
    assert!(
        said.contains("its `serve` exited (exit status: 7) before it listened"),
        "the candidate ran its course: {said}"
    );
    assert_eq!(text(&s.call("echo", json!({"text": "on"}))), "on");
    drop(s);
    let _ = env.run(&["stop"]);
    wait_for("the daemon to exit", Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
}
