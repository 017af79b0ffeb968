//! Quiet sessions cost nothing: a child with nothing in flight, nothing waiting and no live
//! subscription or task is parked after `idleStopMs` while its sessions stay connected; they
//! notice nothing, and the next request that needs the child starts it again. A subscription
//! (either era's) keeps its child, and a stateful server is never parked while a session is
//! connected.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn envelope() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "parking", "version": "1"},
    })
}

/// A 2026-07-28 request, with its envelope.
fn modern(s: &mut Shim, method: &str, mut params: Value) -> Value {
    params["_meta"] = envelope();
    s.request(method, params)
}

fn upstream(env: &Env) -> Value {
    control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0].clone()
}

fn wait_parked(env: &Env) -> Value {
    wait_status(
        &env.socket,
        "the child to be parked",
        Duration::from_secs(30),
        |s| s["upstreams"][0]["parkedSinceMs"].is_u64(),
    )["upstreams"][0]
        .clone()
}

fn pid_of(s: &mut Shim) -> u32 {
    text(&s.call("pid", json!({}))).parse().unwrap()
}

#[test]
fn open_sessions_of_both_eras_stay_connected_while_their_child_is_parked() {
    // A server whose lists are the same for everyone (public): the cache may answer them.
    let env = Env::with_fake(json!({"idleStopMs": 1000,
                                    "env": {"FAKE_MCP_CACHE_SCOPE": "public"}}));
    let _d = env.daemon();
    // Each session starts as Claude Code does: its handshake and its tool list.
    let mut legacy = env.shim();
    legacy.initialize();
    legacy.request("tools/list", json!({}));
    let mut new = env.shim();
    modern(&mut new, "server/discover", json!({}));
    modern(&mut new, "tools/list", json!({}));
    let first = pid_of(&mut legacy);
    let r = modern(
        &mut new,
        "tools/call",
        json!({"name": "pid", "arguments": {}}),
    );
    assert_eq!(text(&r), first.to_string(), "one child for both");

    let parked = wait_parked(&env);
    assert!(parked["pid"].is_null(), "{parked:#}");
    assert_eq!(
        parked["sessions"].as_array().unwrap().len(),
        2,
        "{parked:#}"
    );
    wait_gone("the parked child", &[first], Duration::from_secs(10));
    let text_status = env.run(&["status"]);
    assert!(text_status.stdout.contains("parked for"), "{text_status}");

    // What a session asks next is answered from the cache: the child stays parked.
    let tools = modern(&mut new, "tools/list", json!({}));
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    let again = legacy.request("tools/list", json!({}));
    assert!(again["result"]["tools"].is_array(), "{again}");
    assert!(upstream(&env)["parkedSinceMs"].is_u64());

    // A call starts it again, for either era, and both are served by the new child.
    let second = pid_of(&mut legacy);
    assert_ne!(second, first);
    let r = modern(
        &mut new,
        "tools/call",
        json!({"name": "pid", "arguments": {}}),
    );
    assert_eq!(text(&r), second.to_string());
    assert!(upstream(&env)["parkedSinceMs"].is_null());
}

/// A session's resource subscription (handshake era) or `subscriptions/listen` stream (2026-07-28)
/// is live state in the child: the child is not parked while it lasts.
#[test]
fn a_live_subscription_of_either_era_keeps_its_child() {
    for era in ["legacy", "modern"] {
        let env = Env::with_fake(json!({"idleStopMs": 500}));
        let _d = env.daemon();
        let mut s = env.shim();
        let pid;
        if era == "legacy" {
            s.initialize();
            pid = pid_of(&mut s);
            let r = s.request("resources/subscribe", json!({"uri": "fake://hello"}));
            assert!(r.get("result").is_some(), "{r}");
        } else {
            let r = modern(
                &mut s,
                "tools/call",
                json!({"name": "pid", "arguments": {}}),
            );
            pid = text(&r).parse().unwrap();
            let mut params = json!({"notifications": {"toolsListChanged": true}});
            params["_meta"] = envelope();
            s.send(
                &json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
                           "params": params}),
            );
            s.notification(
                "notifications/subscriptions/acknowledged",
                Duration::from_secs(20),
            );
        }
        std::thread::sleep(Duration::from_secs(2));
        let u = upstream(&env);
        assert_eq!(
            u["pid"], pid,
            "{era}: parked under a live subscription: {u:#}"
        );
        // Once it ends, the child is parked like any other.
        if era == "legacy" {
            s.request("resources/unsubscribe", json!({"uri": "fake://hello"}));
        } else {
            s.send(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": "L"}}),
            );
        }
        wait_parked(&env);
    }
}

/// A server whose state lives in its process (a browser's tabs) keeps its child while any
/// session is connected, and parks it once none is.
#[test]
fn a_stateful_server_is_never_parked_while_a_session_is_open() {
    let env = Env::with_fake(json!({"idleStopMs": 500, "stateful": true}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let pid = pid_of(&mut s);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(upstream(&env)["pid"], pid, "parked with a session open");
    drop(s);
    wait_parked(&env);
}

/// A call that arrives while the child is being parked (here: slow to stop) waits for the next
/// child and is answered, never failed.
#[test]
fn a_call_racing_the_park_is_answered_by_the_next_child() {
    let env = Env::with_fake(json!({"idleStopMs": 500,
                                    "env": {"FAKE_MCP_IGNORE_SIGTERM": "1"}}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let first = pid_of(&mut s);
    wait_status(
        &env.socket,
        "the park to begin",
        Duration::from_secs(20),
        |st| st["upstreams"][0]["state"] == "stopping",
    );
    let r = s.call("echo", json!({"text": "raced"}));
    assert_eq!(text(&r), "raced", "{r}");
    let second = pid_of(&mut s);
    assert_ne!(first, second);
}

/// Read system calls a process has made so far (`/proc/PID/io`).
#[cfg(target_os = "linux")]
fn reads_by(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("syscr: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no syscr in {io}"))
}

/// How often the daemon's runtime thread (its main thread: one thread runs it) has been
/// switched out so far, waiting or preempted: each wake-up counts one.
#[cfg(target_os = "linux")]
fn switches_by(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status")).unwrap();
    status
        .lines()
        .filter_map(|l| l.split_once("ctxt_switches:"))
        .map(|(_, n)| n.trim().parse::<u64>().unwrap())
        .sum()
}

/// Reads by the daemon over 7 s (two of the reaper's scans, each a read of every process's
/// entry in the process table, when it scans), and its wake-ups.
#[cfg(target_os = "linux")]
fn reads_over_two_scans(pid: u32) -> (u64, u64) {
    let (reads, wakes) = (reads_by(pid), switches_by(pid));
    std::thread::sleep(Duration::from_secs(7));
    (reads_by(pid) - reads, switches_by(pid) - wakes)
}

/// A daemon with no child alive (none started yet, or every one parked) leaves the process
/// table alone: the reaper has nothing below a child to look for. With a child alive, the same
/// daemon reads it every few seconds, which shows the measure sees a scan. Nor does such a
/// daemon wake at all while nobody calls: it learns of its socket's removal from the OS, not
/// by looking every 2 s (which woke it 12 times in 10 s).
#[cfg(target_os = "linux")]
#[test]
fn a_daemon_with_no_child_alive_does_not_read_the_process_table_nor_wake() {
    // Parked 10 s after its last call: alive through the 7 s measured after it.
    let env = Env::with_fake(json!({"idleStopMs": 10_000}));
    let _d = env.daemon();
    let pid = env.daemon_pid();
    let before_any = reads_over_two_scans(pid);
    let mut s = env.shim();
    s.initialize();
    let child = pid_of(&mut s);
    let watching = reads_over_two_scans(pid);
    wait_parked(&env);
    wait_gone("the parked child", &[child], Duration::from_secs(10));
    // The last child gone, two scans more for what it may have left (3 s apart, the last
    // at most 6 s on): 10 s leaves room for a late tick on a busy machine.
    std::thread::sleep(Duration::from_secs(10));
    let parked = reads_over_two_scans(pid);
    // Reads: a scan reads every process's entry. Wake-ups: two are a margin for a signal or a
    // stray event; looking at the socket every 2 s took 8 or more.
    let quiet = before_any.0 <= 5 && parked.0 <= 5 && before_any.1 <= 2 && parked.1 <= 2;
    assert!(
        quiet && watching.0 >= 10 && watching.1 >= 3,
        "(reads, wake-ups) over 7 s: {before_any:?} before any child, {watching:?} with one, \
         {parked:?} once parked"
    );
}

/// The first call after parking reaches the new child before the daemon's own look at its tools
/// (a child just started computes its first list cold: the call would wait behind it), and
/// after what sessions set up in the old child (the log level a session chose), so it runs as
/// it did there. Both eras of child.
#[test]
fn the_first_call_after_parking_goes_before_the_daemons_own_tool_list() {
    for era in ["legacy", "modern"] {
        let env = Env::new();
        let events = env.path("events");
        // Public lists: the daemon keeps the session's, and checks it again on the new child.
        env.write_fake_config(json!({"idleStopMs": 500, "env": {
            "FAKE_MCP_ERA": era,
            "FAKE_MCP_EVENT_LOG": events.to_str().unwrap(),
            "FAKE_MCP_CACHE_SCOPE": "public",
        }}));
        let _d = env.daemon();
        let mut s = env.shim();
        let call = |s: &mut Shim| match era {
            "legacy" => s.call("echo", json!({"text": "after parking"})),
            _ => modern(
                s,
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "after parking"}}),
            ),
        };
        if era == "legacy" {
            s.initialize();
            let r = s.request("logging/setLevel", json!({"level": "error"}));
            assert!(r["result"].is_object(), "{r}");
        } else {
            modern(&mut s, "server/discover", json!({}));
            let tools = modern(&mut s, "tools/list", json!({}));
            assert!(tools["result"]["tools"].is_array(), "{tools}");
        }
        assert_eq!(text(&call(&mut s)), "after parking");
        wait_parked(&env);
        let before = std::fs::read_to_string(&events).unwrap().lines().count();

        assert_eq!(text(&call(&mut s)), "after parking");
        // The daemon's own list follows the call: wait for it, then read the order.
        let mut methods = Vec::new();
        for _ in 0..100 {
            methods = std::fs::read_to_string(&events)
                .unwrap()
                .lines()
                .skip(before)
                .map(|l| l.split(' ').next().unwrap_or_default().to_owned())
                .collect::<Vec<_>>();
            if methods.iter().any(|m| m == "tools/list") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let at = |m: &str| {
            methods
                .iter()
                .position(|x| x == m)
                .unwrap_or_else(|| panic!("{era}: no {m} in {methods:?}"))
        };
        assert!(at("tools/call") < at("tools/list"), "{era}: {methods:?}");
        if era == "legacy" {
            assert!(
                at("logging/setLevel") < at("tools/call"),
                "{era}: {methods:?}"
            );
        } else {
            assert!(
                at("subscriptions/listen") < at("tools/call"),
                "{era}: {methods:?}"
            );
        }
    }
}
