//! Bad input on the socket: a malformed line gets an error and the session carries on; a line
//! over the cap is refused and the connection closed; control mode answers every mistake with
//! a structured error; a stalled or abandoned client harms nobody else.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn hello_line() -> Vec<u8> {
    let mut l =
        serde_json::to_vec(&json!({"coogle":1,"mode":"mcp","version":"test","pid":1})).unwrap();
    l.push(b'\n');
    l
}

fn read_json(r: &mut BufReader<UnixStream>) -> Value {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

#[test]
fn malformed_lines_get_parse_errors_and_the_session_carries_on() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    let mut s = env.shim();
    s.initialize();
    s.send_raw(b"{this is not json\n");
    let err = s.recv(Duration::from_secs(5)).unwrap();
    assert_eq!(err["error"]["code"], -32700, "{err}");
    assert_eq!(err["id"], Value::Null);
    s.send_raw(b"[1,2,3]\n");
    let err = s.recv(Duration::from_secs(5)).unwrap();
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert_eq!(text(&s.call("echo", json!({"text": "fine"}))), "fine");
}

#[test]
fn an_oversized_line_is_refused_and_only_that_connection_closes() {
    let env = Env::new();
    env.write_config(&json!({"maxLineBytes": 4096, "servers": {"google": {
        "command": fake_mcp(), "credentials": {"source": "none"}}}}));
    let _daemon = env.daemon();
    // Regression: the hello carries the client's environment, and one larger than
    // `maxLineBytes` (a cap on MCP lines) got the shim refused.
    let mut cmd = env.cmd();
    cmd.env("A_LARGE_VARIABLE", "v".repeat(8_000));
    let mut other = env.stdio_server(cmd, &["mcp"]);
    other.initialize();

    let sock = UnixStream::connect(&env.socket).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut w = sock.try_clone().unwrap();
    let mut r = BufReader::new(sock);
    w.write_all(&hello_line()).unwrap();
    assert_eq!(read_json(&mut r)["ok"], true);
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{}\"}}}}}}\n",
        "x".repeat(10_000)
    );
    let _ = w.write_all(big.as_bytes());
    let err = read_json(&mut r);
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("4096"));
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the connection should be closed");

    // Everyone else carries on.
    assert_eq!(text(&other.call("echo", json!({"text": "ok"}))), "ok");
    // A control line over the cap is refused the same way.
    let reply = raw_exchange(&env.socket, &vec![b'x'; 10_000]).unwrap();
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["ok"], false);
    assert_eq!(reply["error"]["code"], "invalid_request");
}

#[test]
fn control_mode_answers_mistakes_with_structured_errors() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    let cases: Vec<(&[u8], &str)> = vec![
        (b"not json", "invalid_request"),
        (
            br#"{"id":"1","method":"search_gmail_messages"}"#,
            "invalid_request",
        ),
        (
            br#"{"id":"1","method":"list_tools","params":{"server":"nope"}}"#,
            "not_found",
        ),
        (
            br#"{"id":"1","method":"call","params":{}}"#,
            "invalid_request",
        ),
        (
            br#"{"id":"1","method":"call","params":{"tool":"echo","arguments":[1]}}"#,
            "invalid_request",
        ),
    ];
    for (line, code) in cases {
        let reply: Value = serde_json::from_str(&raw_exchange(&env.socket, line).unwrap()).unwrap();
        assert_eq!(reply["ok"], false, "{reply}");
        assert_eq!(
            reply["error"]["code"],
            code,
            "{}: {reply}",
            String::from_utf8_lossy(line)
        );
        assert!(!reply["error"]["message"].as_str().unwrap().is_empty());
    }
    // A tool named like a control method is still reachable, through `call`.
    let reply = control(
        &env.socket,
        "call",
        json!({"tool": "echo", "arguments": {"text": "status"}}),
    )
    .unwrap();
    assert_eq!(reply["content"][0]["text"], "status");
    let hello_bad: Value = serde_json::from_str(
        &raw_exchange(
            &env.socket,
            br#"{"coogle":1,"mode":"mcp","version":"x","server":"nope"}"#,
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(hello_bad["ok"], false);
    assert_eq!(hello_bad["error"]["code"], "not_found");
}

/// Regression (issue 19, item 1): a param of the wrong type was silently ignored (`"server": 5`
/// listed the default server's tools, `"env": [1]` dropped the environment). It is refused under
/// the request's id, naming what was wrong, and nothing is started.
#[test]
fn a_control_param_of_the_wrong_type_is_refused_under_its_id() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    for (line, says) in [
        (
            r#"{"id":"a","method":"list_tools","params":{"server":5}}"#,
            "bad params for list_tools: invalid type: integer `5`, expected a string",
        ),
        (
            r#"{"id":"a","method":"restart_child","params":{"env":[1]}}"#,
            "bad params for restart_child: invalid type: sequence, expected a map",
        ),
        (
            r#"{"id":"a","method":"start_child","params":"google"}"#,
            "bad params for start_child: invalid type: string \"google\"",
        ),
        (
            r#"{"id":"a","method":"call","params":{"tool":"echo","project":7}}"#,
            "bad params for call: invalid type: integer `7`",
        ),
    ] {
        let reply: Value =
            serde_json::from_str(&raw_exchange(&env.socket, line.as_bytes()).unwrap()).unwrap();
        assert_eq!(reply["id"], "a", "{line}: {reply}");
        assert_eq!(reply["ok"], false, "{line}: {reply}");
        assert_eq!(reply["error"]["code"], "invalid_request", "{line}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(says), "{line}: {message}");
    }
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["state"], "idle", "{status}");
}

#[test]
fn several_control_requests_on_one_connection_like_nc() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    env.wait_upstream_ready();
    let sock = UnixStream::connect(&env.socket).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut w = sock.try_clone().unwrap();
    let mut r = BufReader::new(sock);
    w.write_all(b"{\"id\":\"1\",\"method\":\"ping\"}\n{\"id\":2,\"method\":\"list_tools\"}\n{\"id\":\"3\",\"method\":\"info\"}\n").unwrap();
    let a = read_json(&mut r);
    let b = read_json(&mut r);
    let c = read_json(&mut r);
    assert_eq!(a["id"], "1");
    assert_eq!(a["result"]["pong"], true);
    assert_eq!(b["id"], 2);
    assert!(b["result"]["tools"].as_array().unwrap().len() >= 8);
    assert!(c["result"]["pid"].as_u64().is_some());
}

#[test]
fn stalled_and_abandoned_clients_do_not_hurt_others() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    env.wait_upstream_ready();
    // Half a line, then silence.
    let mut stalled = UnixStream::connect(&env.socket).unwrap();
    stalled
        .write_all(b"{\"coogle\":1,\"mode\":\"mcp\"")
        .unwrap();
    // A session that sends calls and never reads the answers.
    let mut deaf = UnixStream::connect(&env.socket).unwrap();
    deaf.write_all(&hello_line()).unwrap();
    for i in 0..200 {
        let l = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"large\",\"arguments\":{{\"bytes\":20000}}}}}}\n"
        );
        if deaf.write_all(l.as_bytes()).is_err() {
            break;
        }
    }
    // Many connections opened and dropped.
    for _ in 0..300 {
        drop(UnixStream::connect(&env.socket).unwrap());
    }
    let mut s = env.shim();
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "served"}))), "served");
    assert_eq!(
        control(&env.socket, "ping", Value::Null).unwrap()["pong"],
        true
    );
    drop(stalled);
    drop(deaf);
}

#[test]
fn the_shim_drops_an_oversized_stdin_line_and_carries_on() {
    let env = Env::new();
    env.write_config(&json!({"maxLineBytes": 4096, "servers": {"google": {
        "command": fake_mcp(), "credentials": {"source": "none"}}}}));
    let _daemon = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{}\"}}}}}}\n",
        "y".repeat(20_000)
    );
    s.send_raw(big.as_bytes());
    let err = s.recv(Duration::from_secs(5)).unwrap();
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("4096"));
    // The rest of the long line was skipped, not read as a new message.
    assert_eq!(text(&s.call("echo", json!({"text": "after"}))), "after");
}
