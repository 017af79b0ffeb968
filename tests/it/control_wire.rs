//! Control mode's wire, pinned: every method's request line as `nc -U` sends it, and the
//! answer line the daemon writes, byte for byte (after the values that differ from run to run
//! are replaced), in `tests/snapshots/control_wire.txt`. The typed protocol on both ends must
//! keep this exactly: scripts and older coogle clients read these lines. The CLI's words for the
//! same answers (`restart`, `reload`, `stop`, `status --json`) are pinned with them.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use serde_json::{Value, json};
use support::snapshot::Screen;
use support::*;

/// Keys whose values change from run to run: process ids, clocks, latencies.
const VOLATILE: [&str; 8] = [
    "pid",
    "uptimeMs",
    "startedAtMs",
    "connectedAtMs",
    "sinceMs",
    "p50Ms",
    "p99Ms",
    "nextRestartInMs",
];

/// `value` with the volatile numbers and this build's version replaced by placeholders.
fn steady(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if VOLATILE.contains(&k.as_str()) && v.is_number() {
                    *v = json!("[N]");
                } else if k == "exe" && v.is_string() {
                    // The binary the daemon runs: where this build happens to be.
                    *v = json!("[EXE]");
                } else if k == "version" && v == env!("CARGO_PKG_VERSION") {
                    *v = json!("[VERSION]");
                } else {
                    steady(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(steady),
        _ => {}
    }
}

/// An answer line as the snapshot shows it. The line must be compact JSON exactly as serde
/// writes it (so comparing its parse, steadied, compares its bytes), and end in one newline.
fn shown(line: &str) -> String {
    let body = line
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("an answer without its newline: {line:?}"));
    let mut value: Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: the answer {body:?}"));
    assert_eq!(
        serde_json::to_string(&value).unwrap(),
        body,
        "the answer is not compact JSON in serde's form"
    );
    steady(&mut value);
    value.to_string()
}

/// Send one line on a fresh connection, as `nc -U` does, and pin the answer.
fn exchange(screen: &mut Screen, socket: &std::path::Path, request: &str) -> Value {
    let answer = raw_exchange(socket, request.as_bytes()).unwrap_or_else(|e| {
        panic!("no answer to {request}: {e}");
    });
    screen.section(&format!("> {request}"), &shown(&answer));
    serde_json::from_str(&answer).unwrap()
}

/// Several lines on one connection: each gets its answer, in order.
fn pipelined(screen: &mut Screen, socket: &std::path::Path, requests: &[&str]) {
    let mut s = connect_patiently(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for r in requests {
        s.write_all(r.as_bytes()).unwrap();
        s.write_all(b"\n").unwrap();
    }
    let mut reader = BufReader::new(s);
    for r in requests {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        screen.section(&format!("> {r} (one connection)"), &shown(&line));
    }
}

/// `coogle status --json` as a script reads it: pretty JSON, the volatile values steadied.
fn status_json(out: &Output) -> String {
    let mut value: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    steady(&mut value);
    serde_json::to_string_pretty(&value).unwrap()
}

#[test]
fn every_control_method_answers_as_it_always_did() {
    let env = Env::with_fake(json!({}));
    let mut daemon = env.daemon();
    let socket = env.socket.clone();
    let mut screen = Screen::new();

    exchange(&mut screen, &socket, r#"{"id":"1","method":"ping"}"#);
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"p","method":"ping","params":"ignored"}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":2,"method":"info","params":null}"#,
    );
    // No id: the answer's is null. The child has not started yet (on demand).
    exchange(&mut screen, &socket, r#"{"method":"status","params":{}}"#);

    // list_tools starts the child; the server defaults to the only one.
    exchange(&mut screen, &socket, r#"{"id":"l","method":"list_tools"}"#);
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"l2","method":"list_tools","params":{"server":"google","project":null}}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"l3","method":"list_tools","params":{"server":"nope"}}"#,
    );

    exchange(
        &mut screen,
        &socket,
        r#"{"id":"c1","method":"call","params":{"tool":"echo","arguments":{"text":"hi"}}}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"c2","method":"call","params":{"server":"google","tool":"echo","arguments":null}}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"c3","method":"call","params":{"arguments":{}}}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"c4","method":"call","params":{"tool":"echo","arguments":[1]}}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"c5","method":"call","params":{"tool":"no_such_tool"}}"#,
    );
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"c6","method":"call","params":{"server":"nope","tool":"echo"}}"#,
    );

    exchange(&mut screen, &socket, r#"{"id":"st","method":"status"}"#);
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"sc","method":"start_child","params":{"server":"google"}}"#,
    );
    // As the CLI of every version sends it: this shell's project and environment.
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"rc","method":"restart_child","params":{"project":null,"env":{"HOME":"/nowhere"},"server":"google"}}"#,
    );
    exchange(&mut screen, &socket, r#"{"id":"rl","method":"reload"}"#);

    // Mistakes: each gets the structured error it always got.
    exchange(
        &mut screen,
        &socket,
        r#"{"id":"u","method":"search_gmail_messages","params":{}}"#,
    );
    exchange(&mut screen, &socket, "garbage");
    exchange(&mut screen, &socket, "[]");
    exchange(&mut screen, &socket, r#"{"id":"m"}"#);
    exchange(&mut screen, &socket, r#"{"id":"m","method":7}"#);
    exchange(
        &mut screen,
        &socket,
        r#"{"coogle":2,"mode":"mcp","version":"0.0.1"}"#,
    );
    // The hello's answer, for an mcp connection.
    exchange(
        &mut screen,
        &socket,
        r#"{"coogle":1,"mode":"mcp","version":"0.0.1"}"#,
    );
    pipelined(
        &mut screen,
        &socket,
        &[
            r#"{"id":"a","method":"ping"}"#,
            "garbage",
            r#"{"id":"m"}"#,
            r#"{"id":"b","method":"bogus"}"#,
            r#"{"id":"c","method":"list_tools","params":{"server":"nope"}}"#,
        ],
    );

    // The CLI reads the same answers into its own words.
    let out = env.run(&["status", "--json"]);
    assert_eq!(out.status, Some(0), "{out}");
    screen.section("$ coogle status --json", &status_json(&out));
    screen.command("coogle restart", &env.run(&["restart"]));
    screen.command(
        "coogle restart --server google",
        &env.run(&["restart", "--server", "google"]),
    );
    screen.command(
        "coogle restart --server nope",
        &env.run(&["restart", "--server", "nope"]),
    );
    screen.command("coogle reload", &env.run(&["reload"]));
    screen.command("coogle stop", &env.run(&["stop"]));
    let (code, log) = daemon.wait_exit();
    assert_eq!(code, Some(0), "{log}");
    screen.command("coogle stop (none running)", &env.run(&["stop"]));
    let out = env.run(&["status", "--json"]);
    screen.section("$ coogle status --json (none running)", &status_json(&out));

    // `shutdown` last, on a daemon of its own: it answers, then goes.
    let mut daemon = env.daemon();
    exchange(&mut screen, &socket, r#"{"id":"bye","method":"shutdown"}"#);
    let (code, log) = daemon.wait_exit();
    assert_eq!(code, Some(0), "{log}");

    screen.assert_matches("control_wire", &env);
}
