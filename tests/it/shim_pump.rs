//! The shim's one thread serves both directions from one `poll`: neither direction waits on
//! the other, and a line is read whole however it arrives.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use support::{Env, fake_mcp, text};

/// A client that writes many large requests at once, faster than the daemon takes them: the
/// shim keeps what the daemon's socket has not taken and leaves stdin unread meanwhile, while
/// the answers to the first requests keep flowing back. A shim that waited in a write to the
/// daemon would stop passing answers on, and the daemon, its answers unread, would drop the
/// session.
#[test]
fn a_flood_of_large_requests_is_answered_while_the_daemon_catches_up() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    let mut shim = env.shim();
    shim.initialize();
    const CALLS: usize = 60;
    const BYTES: usize = 200_000;
    // Written by the test's thread in one go (the pipe blocks it while the shim is behind);
    // the answers are read meanwhile by the support's reader thread.
    let mut all = Vec::new();
    for i in 0..CALLS {
        let body = format!("{i:04}{}", "z".repeat(BYTES));
        let msg = json!({"jsonrpc": "2.0", "id": format!("f{i}"), "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": body, "message": "x"}}});
        all.extend(serde_json::to_vec(&msg).unwrap());
        all.push(b'\n');
    }
    shim.send_raw(&all);
    let mut seen = HashSet::new();
    for i in 0..CALLS {
        let answer = shim.response(&json!(format!("f{i}")), Duration::from_secs(120));
        let got = text(&answer);
        assert_eq!(
            got.len(),
            BYTES + 4,
            "call {i}: {}",
            &got[..got.len().min(200)]
        );
        assert_eq!(
            &got[..4],
            format!("{i:04}"),
            "call {i} got another call's answer"
        );
        seen.insert(i);
    }
    assert_eq!(seen.len(), CALLS);
    // The session is still whole: no reconnect, and the next call is answered at once.
    assert_eq!(
        text(&shim.call("echo", json!({"text": "after", "message": "x"}))),
        "after"
    );
    shim.close_stdin();
    let stderr = shim.stderr();
    assert!(!stderr.contains("reconnecting"), "{stderr}");
}

/// Lines that arrive in pieces, with pauses between (a slow pipe, a client writing a large
/// request in chunks): each is read whole across the shim's wake-ups, and a line over the cap
/// is dropped to its end however many pieces it takes, with one error said once.
#[test]
fn lines_that_arrive_in_pieces_are_read_whole() {
    let env = Env::new();
    env.write_config(&json!({"maxLineBytes": 4096, "servers": {"google": {
        "command": fake_mcp(), "credentials": {"source": "none"}}}}));
    let _daemon = env.daemon();
    let mut shim = env.shim();
    shim.initialize();
    let pause = || std::thread::sleep(Duration::from_millis(60));

    let request = r#"{"jsonrpc":"2.0","id":"split","method":"tools/call","params":{"name":"echo","arguments":{"text":"whole","message":"x"}}}"#;
    let (a, rest) = request.split_at(17);
    let (b, c) = rest.split_at(40);
    for piece in [a, b, c] {
        shim.send_raw(piece.as_bytes());
        pause();
    }
    shim.send_raw(b"\n");
    assert_eq!(
        text(&shim.response(&json!("split"), Duration::from_secs(10))),
        "whole"
    );

    // 10,000 bytes in five pieces, then the next request in the same write as the end.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "y".repeat(10_000)
    );
    for piece in big.as_bytes().chunks(2_000) {
        shim.send_raw(piece);
        pause();
    }
    let after = r#"{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"echo","arguments":{"text":"after","message":"x"}}}"#;
    shim.send_raw(format!("\n{after}\n").as_bytes());
    let answer = shim.response(&json!("after"), Duration::from_secs(10));
    assert_eq!(text(&answer), "after");
    let errors: Vec<_> = shim
        .stray
        .iter()
        .filter(|m| m["error"]["code"] == -32600)
        .collect();
    assert_eq!(errors.len(), 1, "{:?}", shim.stray);
    assert!(
        errors[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("4096"),
        "{}",
        errors[0]
    );
    assert!(
        !shim.stray.iter().any(|m| m["id"] == "big"),
        "the long line's tail was read as a message: {:?}",
        shim.stray
    );
}

/// A daemon that stops reading the session (busy, stopped, or only slow) while the client
/// writes a line larger than the socket holds: the shim keeps the rest of that line, and the
/// answers the daemon already sent still reach the client meanwhile. A shim that waited in the
/// write passed nothing on until the daemon read again. What the daemon then reads is the
/// client's lines, whole and in order, to the last one before stdin closed: the shim exits
/// only once the daemon has taken it.
#[test]
fn answers_reach_the_client_while_the_daemon_is_not_reading() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::DirBuilderExt;
    let env = Env::new();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(env.socket.parent().unwrap())
        .unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&env.socket).unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let daemon = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let mut hello = String::new();
        reader.read_line(&mut hello).unwrap();
        assert!(hello.contains("\"coogle\""), "{hello}");
        writer.write_all(b"{\"coogle\":1,\"ok\":true}\n").unwrap();
        // Not reading: the client's large line fills the socket. Then an answer goes out.
        go_rx.recv().unwrap();
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"early\",\"result\":{}}\n")
            .unwrap();
        // Reading again, once the client has had that answer.
        go_rx.recv().unwrap();
        let mut lines = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            lines.push(line);
        }
        for id in ["big", "later"] {
            let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{{}}}}\n");
            writer.write_all(answer.as_bytes()).unwrap();
        }
        // The client's last words, a notification larger than the socket holds and ended by
        // the end of its stdin rather than a newline: read only after a pause.
        go_rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        lines.push(line);
        lines
    });
    let mut shim = env.shim();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "b".repeat(4 << 20)
    );
    let later = r#"{"jsonrpc":"2.0","id":"later","method":"ping"}"#;
    shim.send_raw(format!("{big}\n").as_bytes());
    // The shim has written what the socket takes by now, and holds the rest.
    std::thread::sleep(Duration::from_millis(300));
    shim.send_raw(format!("{later}\n").as_bytes());
    go_tx.send(()).unwrap();
    let early = shim.response(&json!("early"), Duration::from_secs(10));
    assert_eq!(early["result"], json!({}), "{early}");
    go_tx.send(()).unwrap();
    for id in ["big", "later"] {
        shim.response(&json!(id), Duration::from_secs(10));
    }
    let last = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{}"}}}}"#,
        "n".repeat(4 << 20)
    );
    // Without its newline: the end of stdin ends it, and the shim sends it on as a line.
    shim.send_raw(last.as_bytes());
    shim.close_stdin();
    go_tx.send(()).unwrap();
    let lines = daemon.join().unwrap();
    assert_eq!(
        lines[0].trim_end(),
        big,
        "the large line did not arrive whole"
    );
    assert_eq!(lines[1].trim_end(), later);
    assert_eq!(
        lines[2].trim_end(),
        last,
        "the shim exited before the daemon took the client's last line"
    );
    let status = shim.child.wait().unwrap();
    assert!(status.success(), "{status}");
}
