//! Upgrade in place: `coogle restart --daemon` (and every upgrade route, which runs it) makes
//! the daemon become the binary on disk in its own process, carrying every running child over:
//! the sessions of both protocol eras stay connected and are answered by the same child, a call
//! in flight finishes first, a request made during the hand-over is answered once by the new
//! daemon, and a binary that cannot serve is never handed anything.
//!
//! The daemon's pid stays the same (it execs; see docs/ARCHITECTURE.md, "Upgrade in place"):
//! what changes is the binary it runs and the moment it started (`status`'s `startedAtMs`).

use crate::support;

use std::collections::HashSet;
use std::process::Child;
use std::time::Duration;

use serde_json::{Value, json};
use support::fake_github::patched_version;
use support::installed::{install, installed_daemon, newer_coogle};
use support::*;

fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "upgrade", "version": "1"},
    })
}

/// A 2026-07-28 tool call, with its envelope.
fn modern_call(s: &mut Shim, tool: &str, args: Value) -> Value {
    s.request(
        "tools/call",
        json!({"name": tool, "arguments": args, "_meta": envelope()}),
    )
}

fn status(env: &Env) -> Value {
    control(&env.socket, "status", Value::Null).unwrap()
}

/// The running children: (pid, started at).
fn children(env: &Env) -> Vec<(u64, u64)> {
    status(env)["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| Some((u["pid"].as_u64()?, u["startedAtMs"].as_u64()?)))
        .collect()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// `coogle stop`, then: no daemon, and none of `pids` left (not even as a zombie).
fn stop_leaves_nothing(env: &Env, daemon: &mut Child, pids: &[u64]) {
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    wait_for("the daemon to exit", Duration::from_secs(30), || {
        daemon.try_wait().unwrap().is_some()
    });
    for &pid in pids {
        wait_for("the children to be gone", Duration::from_secs(10), || {
            !alive(pid)
        });
    }
}

fn log(env: &Env) -> String {
    std::fs::read_to_string(&env.log).unwrap_or_default()
}

#[test]
fn restart_daemon_keeps_the_child_and_both_eras_sessions() {
    let env = Env::with_fake(json!({}));
    let (mut daemon, installed) = installed_daemon(&env);
    let mut legacy = env.shim();
    legacy.initialize();
    let mut modern = env.shim();
    let child = text(&legacy.call("pid", json!({})));
    assert_eq!(text(&modern_call(&mut modern, "pid", json!({}))), child);
    let before = status(&env);
    let kept = children(&env);
    assert_eq!(kept.len(), 1, "{before}");

    // The same version first (a restart), then a newer one (an upgrade): neither restarts the
    // child, and both sessions are answered by it, in their own eras.
    for (round, version) in [
        (1, env!("CARGO_PKG_VERSION").to_string()),
        (2, patched_version()),
    ] {
        if round == 2 {
            install(&installed, &newer_coogle(&env));
        }
        let was = status(&env);
        let out = env.run(&["restart", "--daemon"]);
        assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
        assert!(
            out.stdout.contains("1 running server kept") && out.stdout.contains("pid"),
            "{out}"
        );
        let now = status(&env);
        assert_eq!(now["daemon"]["version"], version.as_str(), "{now}");
        assert_eq!(now["daemon"]["pid"], before["daemon"]["pid"], "{now}");
        assert_ne!(
            now["daemon"]["startedAtMs"], was["daemon"]["startedAtMs"],
            "the daemon did not restart: {now}"
        );
        assert!(now["daemon"]["handOverFailed"].is_null(), "{now}");
        assert_eq!(children(&env), kept, "round {round}: the child changed");
        assert_eq!(text(&legacy.call("pid", json!({}))), child);
        assert_eq!(text(&modern_call(&mut modern, "pid", json!({}))), child);
        assert_eq!(
            text(&legacy.call("echo", json!({"text": "still here"}))),
            "still here"
        );
    }
    // The human status says when the daemon and the child started.
    let human = env.run(&["status"]);
    assert!(human.stdout.contains("(since "), "{human}");
    assert!(
        daemon.try_wait().unwrap().is_none(),
        "the daemon process exited"
    );
    drop(legacy);
    drop(modern);
    stop_leaves_nothing(&env, &mut daemon, &[kept[0].0]);
}

/// A call in flight finishes on the old daemon (the hand-over waits for it), and calls made
/// while the daemon hands over are answered once each, by the same child, none failed.
#[test]
fn calls_in_flight_and_during_the_hand_over_are_answered_once() {
    let env = Env::with_fake(json!({}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut busy = env.shim();
    busy.initialize();
    let child = text(&busy.call("pid", json!({})));
    busy.send(&json!({"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}));
    std::thread::sleep(Duration::from_millis(100));

    // Another session calls back to back all through the hand-over.
    let mut chatty = env.shim();
    chatty.initialize();
    let restart = env.cmd().args(["restart", "--daemon"]).spawn().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let caller = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut i = 0u64;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let id = json!(format!("c{i}"));
            chatty.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":format!("n{i}")}}}));
            let r = chatty.response(&id, Duration::from_secs(30));
            seen.push((i, r));
            i += 1;
        }
        (chatty, seen)
    });
    let restart = restart.wait_with_output().unwrap();
    let (mut chatty, seen) = {
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        caller.join().unwrap()
    };
    assert!(
        restart.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&restart.stderr),
        log(&env)
    );
    // The long call was answered, once, by the child that had it.
    let long = busy.response(&json!("long"), Duration::from_secs(20));
    assert_eq!(text(&long), "slept 1500 ms", "{long}");
    assert!(seen.len() > 5, "only {} calls were made", seen.len());
    for (i, r) in &seen {
        assert_eq!(text(r), format!("n{i}"), "call {i}: {r}");
    }
    // Nothing else arrives: no answer twice.
    chatty.send(&json!({"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"pid","arguments":{}}}));
    let last = chatty.response(&json!("last"), Duration::from_secs(20));
    assert_eq!(text(&last), child);
    assert!(
        log(&env).contains("handing over to coogle"),
        "no hand-over happened:\n{}",
        log(&env)
    );
    drop(busy);
    drop(chatty);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// A binary that says it is a newer coogle but cannot serve is never handed anything: the
/// restart says why, the daemon and its child serve on.
#[test]
fn a_binary_that_crashes_at_start_leaves_the_old_daemon_serving() {
    let env = Env::with_fake(json!({}));
    let (mut daemon, installed) = installed_daemon(&env);
    let mut s = env.shim();
    s.initialize();
    let child = text(&s.call("pid", json!({})));
    let before = status(&env);
    install(
        &installed,
        b"#!/bin/sh\n[ \"$1\" = --version ] && { echo 'coogle 99.0.0 (broken)'; exit 0; }\necho 'thread main panicked: boom' >&2\nexit 101\n",
    );
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stderr.contains("did not prove it can serve")
            && out.stderr.contains("serves on")
            && out.stderr.matches("error:").count() == 1,
        "{out}"
    );
    let now = status(&env);
    assert_eq!(
        now["daemon"]["startedAtMs"],
        before["daemon"]["startedAtMs"]
    );
    assert!(now["daemon"]["handOverFailed"].is_string(), "{now}");
    assert_eq!(text(&s.call("pid", json!({}))), child);
    // An older coogle is refused as plainly.
    let older = env.path("older");
    support::write_executable(&older, "#!/bin/sh\necho 'coogle 0.0.1 (old)'\n");
    std::fs::rename(&older, &installed).unwrap();
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stderr.contains("older than this daemon"), "{out}");
    assert_eq!(text(&s.call("pid", json!({}))), child);
    drop(s);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// Two restarts at once: both succeed, one daemon serves after them, the child is kept.
#[test]
fn two_restarts_at_once_make_one_daemon() {
    let env = Env::with_fake(json!({}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut s = env.shim();
    s.initialize();
    let child = text(&s.call("pid", json!({})));
    let a = env.cmd().args(["restart", "--daemon"]).spawn().unwrap();
    let b = env.cmd().args(["restart", "--daemon"]).spawn().unwrap();
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}\n{}", log(&env));
    }
    assert_eq!(text(&s.call("pid", json!({}))), child);
    let serving: HashSet<u64> = (0..5)
        .map(|_| status(&env)["daemon"]["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(serving.len(), 1);
    assert_eq!(serving.into_iter().next(), Some(u64::from(daemon.id())));
    drop(s);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// A per-session server (a browser with the session's tabs) keeps its process across the
/// hand-over, and the session that owns it is still the one it serves.
#[test]
fn a_per_session_child_survives_with_its_session() {
    let env = Env::with_fake(json!({"sharing": "per-session"}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut mine = env.shim();
    mine.initialize();
    let mut other = env.shim();
    other.initialize();
    let my_child = text(&mine.call("pid", json!({})));
    let their_child = text(&other.call("pid", json!({})));
    assert_ne!(my_child, their_child);
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert!(out.stdout.contains("2 running servers kept"), "{out}");
    assert_eq!(text(&mine.call("pid", json!({}))), my_child);
    assert_eq!(text(&other.call("pid", json!({}))), their_child);
    drop(mine);
    drop(other);
    stop_leaves_nothing(
        &env,
        &mut daemon,
        &[my_child.parse().unwrap(), their_child.parse().unwrap()],
    );
}

/// A child that exits around the hand-over (killed just as the restart begins) is collected
/// (no zombie), and the next call gets an answer from a new one.
#[test]
fn a_child_that_exits_during_the_hand_over_is_replaced() {
    let env = Env::with_fake(json!({}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut s = env.shim();
    s.initialize();
    let mut gone = Vec::new();
    for delay_ms in [0u64, 150, 400] {
        let child: u64 = text(&s.call("pid", json!({}))).parse().unwrap();
        let restart = env.cmd().args(["restart", "--daemon"]).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        kill9(child);
        let out = restart.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}\n{}", log(&env));
        wait_for(
            "the killed child to be collected",
            Duration::from_secs(10),
            || !std::path::Path::new(&format!("/proc/{child}")).exists(),
        );
        // A call that reaches the dying child before the daemon has seen it exit is failed
        // with "retry", as after any crash: the question here is what comes after.
        wait_for("the daemon to see it exit", Duration::from_secs(10), || {
            children(&env).iter().all(|(pid, _)| *pid != child)
        });
        let next = text(&s.call("pid", json!({})));
        assert_ne!(next, child.to_string(), "delay {delay_ms}");
        gone.push(
            next.parse()
                .unwrap_or_else(|_| panic!("delay {delay_ms}: {next}\n{}", log(&env))),
        );
    }
    drop(s);
    stop_leaves_nothing(&env, &mut daemon, &gone);
}

fn kill9(pid: u64) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// Homebrew's service runs `opt/coogle/bin/coogle`, a link that `brew upgrade` points at the
/// new version's file: the daemon becomes what the link names now, not the old file it was
/// started from.
#[test]
fn a_daemon_started_through_a_link_becomes_what_the_link_names_now() {
    let env = Env::with_fake(json!({}));
    let cellar_old = env.path("Cellar/coogle/old/bin");
    let cellar_new = env.path("Cellar/coogle/new/bin");
    let opt = env.path("opt/coogle/bin");
    for d in [&cellar_old, &cellar_new, &opt] {
        std::fs::create_dir_all(d).unwrap();
    }
    support::copy_executable(std::path::Path::new(COOGLE), &cellar_old.join("coogle"));
    install(&cellar_new.join("coogle"), &newer_coogle(&env));
    let link = opt.join("coogle");
    std::os::unix::fs::symlink(cellar_old.join("coogle"), &link).unwrap();
    let mut daemon = env
        .sealed(&link)
        .args(["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    env.wait_ready();
    let mut s = env.shim();
    s.initialize();
    let child = text(&s.call("pid", json!({})));
    // brew upgrade: the link now names the new version.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(cellar_new.join("coogle"), &link).unwrap();
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert_eq!(
        status(&env)["daemon"]["version"],
        patched_version().as_str(),
        "{out}"
    );
    assert_eq!(text(&s.call("pid", json!({}))), child);
    drop(s);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// What a session set up on the child goes with it: after the hand-over, a subscriber still
/// gets its resource's updates (the child is not subscribed again), a session that did not
/// subscribe gets none, and when the subscriber leaves the child is unsubscribed.
#[test]
fn subscriptions_are_carried_with_the_child() {
    let (env, events) = Env::with_fake_events(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = env.shim();
    let mut c = env.shim();
    a.initialize();
    c.initialize();
    let r = a.request("resources/subscribe", json!({"uri": "fake://hello"}));
    assert_eq!(r["result"], json!({}), "{r}");
    let child = text(&c.call("pid", json!({})));
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));

    c.call("notify", json!({"kind": "resource"}));
    let u = a.notification("notifications/resources/updated", Duration::from_secs(10));
    assert_eq!(u["params"]["uri"], "fake://hello");
    assert!(
        c.recv(Duration::from_millis(300))
            .is_none_or(|m| m["method"] != "notifications/resources/updated"),
        "a session that did not subscribe got the update"
    );
    assert_eq!(count_events(&events, "resources/subscribe"), 1);
    drop(a);
    wait_file(
        "the child to be unsubscribed when its subscriber leaves",
        &events,
        Duration::from_secs(10),
        |t| count_prefixed(t, "resources/unsubscribe") == 1,
    );
    assert_eq!(text(&c.call("pid", json!({}))), child);
    drop(c);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// The new daemon numbers its requests to a carried child after the old daemon's. Otherwise a
/// late answer to a request of the old one (its own `tools/list`, which a hand-over does not
/// wait for) would be taken for the answer to the new request with the same id: a session's
/// call answered with another request's result.
#[test]
fn a_carried_child_is_never_sent_an_id_the_old_daemon_used() {
    let (env, events) = Env::with_fake_events(json!({"env": {"FAKE_MCP_ERA": "legacy"}}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut s = env.shim();
    s.initialize();
    for i in 0..5 {
        assert_eq!(
            text(&s.call("echo", json!({"text": i.to_string()}))),
            i.to_string()
        );
    }
    let child = text(&s.call("pid", json!({})));
    // `<method> <id|-> ...` per message the child read.
    let ids = |lines: &[&str]| -> Vec<u64> {
        lines
            .iter()
            .filter_map(|l| l.split(' ').nth(1)?.parse().ok())
            .collect()
    };
    let seen = std::fs::read_to_string(&events).unwrap();
    let before: Vec<&str> = seen.lines().collect();
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert_eq!(
        text(&s.call("pid", json!({}))),
        child,
        "the child was not carried"
    );
    assert_eq!(text(&s.call("echo", json!({"text": "after"}))), "after");
    let all = std::fs::read_to_string(&events).unwrap();
    let after: Vec<&str> = all.lines().skip(before.len()).collect();
    let (old, new) = (ids(&before), ids(&after));
    let highest_old = old.iter().max().copied().unwrap_or(0);
    assert!(!new.is_empty(), "the new daemon sent nothing: {after:?}");
    assert!(
        new.iter().all(|&id| id > highest_old),
        "the new daemon reused the old one's ids (up to {highest_old}): {after:?}"
    );
    drop(s);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// A call that timed out before the hand-over may still be running in the carried child: what
/// the child asks for it afterwards is never put to another session that happens to be the only
/// one busy with the new daemon (the old daemon knew whose it was; the new one does not).
#[test]
fn a_request_for_a_call_given_up_before_the_hand_over_reaches_no_other_session() {
    let env = Env::with_fake(
        json!({"env": {"FAKE_MCP_ERA": "legacy"}, "maxConcurrent": 2, "callTimeoutMs": 1000}),
    );
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = eliciting_shim(&env);
    let mut b = eliciting_shim(&env);
    let child = text(&a.call("pid", json!({})));
    let started = std::time::Instant::now();
    b.send(&json!({"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"ask",
        "arguments":{"method":"elicitation/create","delayMs":8000,
                     "params":{"message":"secret of caller B","requestedSchema":{"type":"object"}}}}}));
    let timed_out = b.response(&json!("b"), Duration::from_secs(5));
    assert!(text(&timed_out).contains("timed out"), "{timed_out}");
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    // A is the only session busy when the carried child, still on B's call, asks for B's
    // secret (8 s after B's call began): A's call starts before and ends after that.
    a.send(&json!({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sleep","arguments":{"ms":9000}}}));
    assert!(
        started.elapsed() < Duration::from_millis(6500),
        "the hand-over took too long for this test: {:?}",
        started.elapsed()
    );
    let until = started + Duration::from_millis(10_000);
    while std::time::Instant::now() < until {
        if let Some(m) = a.recv(Duration::from_millis(100)) {
            assert_ne!(
                m["method"], "elicitation/create",
                "A was asked for B's secret: {m}"
            );
        }
    }
    assert!(
        !a.stray
            .iter()
            .any(|m| m.to_string().contains("secret of caller B")),
        "A was asked for B's secret"
    );
    assert_eq!(
        text(&a.call("pid", json!({}))),
        child,
        "the child was not carried"
    );
    drop((a, b));
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// A request the child put to a session that the session had not answered when the daemon was
/// replaced: the child is told it will get no answer, the session that it may drop it, and a
/// late answer to it never passes for the answer to a request of the new daemon (which numbers
/// its requests to sessions after the old one's).
#[test]
fn a_childs_request_open_at_the_hand_over_is_cancelled_and_its_id_never_reused() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}, "callTimeoutMs": 1000}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = eliciting_shim(&env);
    let child = text(&a.call("pid", json!({})));
    let ask = |a: &mut Shim, id: &str, message: &str| {
        a.send(
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"ask",
            "arguments":{"method":"elicitation/create",
                         "params":{"message":message,"requestedSchema":{"type":"object"}}}}}),
        );
        let asked = a.notification("elicitation/create", Duration::from_secs(10));
        assert_eq!(asked["params"]["message"], message, "{asked}");
        asked["id"].clone()
    };
    // Asked, never answered: the call times out, the request stays open.
    let old = ask(&mut a, "first", "old question");
    let timed_out = a.response(&json!("first"), Duration::from_secs(5));
    assert!(text(&timed_out).contains("timed out"), "{timed_out}");
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    let cancelled = a.notification("notifications/cancelled", Duration::from_secs(10));
    assert_eq!(cancelled["params"]["requestId"], old, "{cancelled}");
    // The new daemon asks under another id; the old question's late answer goes nowhere.
    let new = ask(&mut a, "second", "new question");
    assert_ne!(new, old);
    a.send(&json!({"jsonrpc": "2.0", "id": old,
        "result": {"action": "accept", "content": {"answer": "stale"}}}));
    a.send(&json!({"jsonrpc": "2.0", "id": new,
        "result": {"action": "accept", "content": {"answer": "fresh"}}}));
    let answered = text(&a.response(&json!("second"), Duration::from_secs(10)));
    assert!(
        answered.contains("fresh") && !answered.contains("stale"),
        "{answered}"
    );
    still_the_carried_child_then_stop(&env, &mut daemon, a, &child);
}

/// A call its session gave up on before the hand-over, the carried child still on it: what
/// the child asks for it afterwards goes to that session once it is back (as the old daemon
/// would have asked it), not refused as nobody's.
#[test]
fn a_given_up_call_is_its_sessions_again_after_the_hand_over() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_ERA": "legacy"}, "callTimeoutMs": 1000}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = eliciting_shim(&env);
    let child = text(&a.call("pid", json!({})));
    let started = std::time::Instant::now();
    a.send(
        &json!({"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"ask",
        "arguments":{"method":"elicitation/create","delayMs":8000,
                     "params":{"message":"a late question","requestedSchema":{"type":"object"}}}}}),
    );
    let timed_out = a.response(&json!("late"), Duration::from_secs(5));
    assert!(text(&timed_out).contains("timed out"), "{timed_out}");
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert!(
        started.elapsed() < Duration::from_millis(7000),
        "the hand-over took too long for this test: {:?}",
        started.elapsed()
    );
    // The new daemon asks it, 8 s after the call began.
    let asked = a.notification("elicitation/create", Duration::from_secs(15));
    assert_eq!(asked["params"]["message"], "a late question", "{asked}");
    still_the_carried_child_then_stop(&env, &mut daemon, a, &child);
}

/// `s` is still answered by `child` (it was carried); then `coogle stop` leaves nothing.
fn still_the_carried_child_then_stop(env: &Env, daemon: &mut Child, mut s: Shim, child: &str) {
    assert_eq!(
        text(&s.call("pid", json!({}))),
        child,
        "the child was not carried"
    );
    drop(s);
    stop_leaves_nothing(env, daemon, &[child.parse().unwrap()]);
}

/// A session whose client can answer `elicitation/create`, past its handshake.
fn eliciting_shim(env: &Env) -> Shim {
    let mut s = env.shim();
    let init = s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s
}

/// Config of two fake servers: `a` shared, and `other` with `extra` settings.
fn two_servers(env: &Env, other: Value) {
    let mut b = json!({"command": fake_mcp(), "credentials": {"source": "none"}});
    for (k, v) in other.as_object().unwrap() {
        b[k] = v.clone();
    }
    env.write_config(&json!({"servers": {
        "a": {"command": fake_mcp(), "credentials": {"source": "none"}},
        "other": b,
    }}));
}

/// Regression (review of the hand-over): a carried child stayed one of the daemon's children
/// but was no longer counted as an upstream's, so when another child exited before the exec
/// (here an old shim's per-session child, which cannot be carried and is stopped) the reaper
/// took the carried one for an orphan and killed it, while `restart --daemon` said "kept".
#[test]
fn a_child_stopped_during_the_hand_over_takes_no_carried_child_with_it() {
    let env = Env::new();
    two_servers(&env, json!({"sharing": "per-session"}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = env.shim_with(&["--server", "a"]);
    a.initialize();
    let kept: u64 = text(&a.call("pid", json!({}))).parse().unwrap();
    // An older shim: its hello has no session token, so its per-session child is not carried.
    let mut old = connect_patiently(&env.socket).unwrap();
    let mut reader = std::io::BufReader::new(old.try_clone().unwrap());
    let mut line = String::new();
    let mut say = |msg: &str, line: &mut String, answer: bool| {
        use std::io::{BufRead, Write};
        old.write_all(format!("{msg}\n").as_bytes()).unwrap();
        if answer {
            line.clear();
            reader.read_line(line).unwrap();
        }
    };
    say(
        r#"{"coogle":1,"mode":"mcp","server":"other","version":"0.1.0"}"#,
        &mut line,
        true,
    );
    assert!(line.contains("\"ok\":true"), "{line}");
    say(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#,
        &mut line,
        true,
    );
    say(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &mut line,
        false,
    );
    say(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pid","arguments":{}}}"#,
        &mut line,
        true,
    );
    let stopped: u64 =
        serde_json::from_str::<Value>(&line).unwrap()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();

    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert!(out.stdout.contains("1 of 2 running servers kept"), "{out}");
    wait_for(
        "the old shim's child to be stopped",
        Duration::from_secs(10),
        || !alive(stopped),
    );
    // Time for a reaper that took it for an orphan to act.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(kept), "the carried child was killed:\n{}", log(&env));
    assert_eq!(text(&a.call("pid", json!({}))), kept.to_string());
    assert!(!log(&env).contains("left behind"), "{}", log(&env));
    drop(a);
    stop_leaves_nothing(&env, &mut daemon, &[kept]);
}

/// Regression (review of the hand-over): a session of a server whose child was not running
/// (parked after `idleStopMs`) was not told of the hand-over, and what it asked meanwhile was
/// answered "coogle is shutting down" instead of being sent again to the new daemon.
#[test]
fn calls_to_a_parked_server_during_the_hand_over_are_answered() {
    let env = Env::new();
    two_servers(&env, json!({"idleStopMs": 1}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = env.shim_with(&["--server", "a"]);
    a.initialize();
    let kept = text(&a.call("pid", json!({})));
    let mut c = env.shim_with(&["--server", "other"]);
    c.initialize();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let caller = std::thread::spawn(move || {
        let mut bad = Vec::new();
        let mut i = 0u64;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let r = c.call("echo", json!({"text": format!("n{i}")}));
            if text(&r) != format!("n{i}") {
                bad.push(r);
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        (i, bad)
    });
    for _ in 0..4 {
        let out = env.run(&["restart", "--daemon"]);
        assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (calls, bad) = caller.join().unwrap();
    assert!(calls > 10, "only {calls} calls");
    assert!(
        bad.is_empty(),
        "{} of {calls} calls failed: {bad:?}",
        bad.len()
    );
    assert_eq!(text(&a.call("pid", json!({}))), kept);
    drop(a);
    stop_leaves_nothing(&env, &mut daemon, &[kept.parse().unwrap()]);
}

/// Regression (review of the hand-over): a server edited in config.json kept its old child
/// across `restart --daemon`, running the old definition while status showed the new one. A
/// changed server starts again as configured now; an unchanged one is kept.
#[test]
fn a_server_edited_since_its_child_started_runs_its_new_definition() {
    let env = Env::new();
    two_servers(&env, json!({}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut a = env.shim_with(&["--server", "a"]);
    let mut b = env.shim_with(&["--server", "other"]);
    a.initialize();
    b.initialize();
    let a_pid = text(&a.call("pid", json!({})));
    let b_pid = text(&b.call("pid", json!({})));
    assert_eq!(text(&b.call("env", json!({"name": "MYKEY"}))), "<unset>");
    two_servers(&env, json!({"env": {"MYKEY": "new-value"}}));
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert!(out.stdout.contains("1 of 2 running servers kept"), "{out}");
    assert_eq!(text(&a.call("pid", json!({}))), a_pid);
    assert_eq!(text(&b.call("env", json!({"name": "MYKEY"}))), "new-value");
    let b_now = text(&b.call("pid", json!({})));
    assert_ne!(b_now, b_pid);
    drop(a);
    drop(b);
    stop_leaves_nothing(
        &env,
        &mut daemon,
        &[a_pid.parse().unwrap(), b_now.parse().unwrap()],
    );
}

/// Regression (review of the hand-over): log lines a child wrote while its sessions were
/// reconnecting reached nobody (5 to 8 lost per hand-over). The adopted child's stdout is read
/// once its sessions are back, so none is lost.
#[test]
fn log_lines_written_during_the_hand_over_reach_their_session() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_TICK_MS": "2", "FAKE_MCP_ERA": "legacy"}}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut s = env.shim();
    s.initialize();
    s.request("logging/setLevel", json!({"level": "debug"}));
    let child = text(&s.call("pid", json!({})));
    for _ in 0..3 {
        let out = env.run(&["restart", "--daemon"]);
        assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    }
    let mut seqs: Vec<u64> = Vec::new();
    let mut take = |m: &Value| {
        if m["method"] == "notifications/message" && m["params"]["logger"] == "tick" {
            seqs.push(m["params"]["data"]["seq"].as_u64().unwrap());
        }
    };
    for m in std::mem::take(&mut s.stray) {
        take(&m);
    }
    let until = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < until {
        if let Some(m) = s.recv(Duration::from_millis(100)) {
            take(&m);
        }
    }
    assert!(seqs.len() > 100, "only {} ticks arrived", seqs.len());
    let gaps: Vec<(u64, u64)> = seqs
        .windows(2)
        .filter(|w| w[1] != w[0] + 1)
        .map(|w| (w[0], w[1]))
        .collect();
    assert!(gaps.is_empty(), "ticks lost or out of order at {gaps:?}");
    assert_eq!(text(&s.call("pid", json!({}))), child);
    drop(s);
    stop_leaves_nothing(&env, &mut daemon, &[child.parse().unwrap()]);
}

/// A child that closed its stdout (deaf and mute, still running) is not carried: the hand-over
/// does not wait for a reader that already ended, and the next call gets a new child.
#[test]
fn a_child_that_closed_its_stdout_does_not_hold_the_hand_over() {
    let env = Env::with_fake(json!({}));
    let (mut daemon, _installed) = installed_daemon(&env);
    let mut s = env.shim();
    s.initialize();
    let old = text(&s.call("pid", json!({})));
    s.send(&json!({"jsonrpc":"2.0","id":"mute","method":"tools/call","params":{"name":"close_stdout","arguments":{}}}));
    let started = std::time::Instant::now();
    let out = env.run(&["restart", "--daemon"]);
    assert_eq!(out.status, Some(0), "{out}\n{}", log(&env));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the hand-over took {:?}",
        started.elapsed()
    );
    let _ = s.response(&json!("mute"), Duration::from_secs(30));
    let new = text(&s.call("pid", json!({})));
    assert_ne!(new, old);
    drop(s);
    stop_leaves_nothing(
        &env,
        &mut daemon,
        &[old.parse().unwrap(), new.parse().unwrap()],
    );
}
