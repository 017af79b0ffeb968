//! The shim's one thread serves both directions from one `poll`: neither direction waits on
//! the other, and a line is read whole however it arrives. Several tests stand a fake daemon
//! on the socket (the hello, then whatever the test needs it to do wrong).

use crate::support;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Env, fake_mcp, text};

/// A listener on the session's socket, in a private directory as the daemon's is.
fn listen(env: &Env) -> UnixListener {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(env.socket.parent().unwrap())
        .unwrap();
    UnixListener::bind(&env.socket).unwrap()
}

/// Accept a shim and answer its hello as a daemon does.
fn accept_hello(l: &UnixListener) -> (BufReader<UnixStream>, UnixStream) {
    let (s, _) = l.accept().unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut hello = String::new();
    r.read_line(&mut hello).unwrap();
    assert!(hello.contains("\"coogle\""), "{hello}");
    let mut w = s;
    w.write_all(b"{\"coogle\":1,\"ok\":true}\n").unwrap();
    (r, w)
}

/// Until `stop`: accept each connection and close it unanswered (no daemon yet), so the shim
/// keeps reconnecting and buffers what the client sends meanwhile.
fn refuse_until(l: &UnixListener, stop: &mpsc::Receiver<()>) {
    l.set_nonblocking(true).unwrap();
    while stop.try_recv().is_err() {
        match l.accept() {
            Ok((s, _)) => drop(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e}"),
        }
    }
    l.set_nonblocking(false).unwrap();
}

const HANDOVER: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/coogle/handover\"}\n";

fn big_call(id: &str, bytes: usize) -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "r".repeat(bytes)}}})
}

fn answer(id: &str) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{{}}}}\n").into_bytes()
}

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
    let env = Env::new();
    let listener = listen(&env);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let daemon = std::thread::spawn(move || {
        let (mut reader, mut writer) = accept_hello(&listener);
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

/// After a reconnect, what the client sent meanwhile is replayed to the new daemon as any line
/// is written: a replay larger than the socket holds does not stop the new daemon's answers
/// from reaching the client while it waits to be read.
#[test]
fn answers_flow_while_a_large_replay_is_written() {
    let env = Env::new();
    let l = listen(&env);
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (wrote_tx, wrote_rx) = mpsc::channel::<Instant>();
    let daemon = std::thread::spawn(move || {
        let first = accept_hello(&l);
        go_rx.recv().unwrap();
        drop(first);
        refuse_until(&l, &stop_rx);
        let (mut r, mut w) = accept_hello(&l);
        w.write_all(&answer("q0")).unwrap();
        wrote_tx.send(Instant::now()).unwrap();
        // Busy for a while: not reading.
        std::thread::sleep(Duration::from_secs(3));
        let mut ids = Vec::new();
        for _ in 0..8 {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            ids.push(v["id"].as_str().unwrap().to_string());
        }
        for id in &ids[1..] {
            w.write_all(&answer(id)).unwrap();
        }
        ids
    });
    let mut shim = env.shim();
    go_tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..8 {
        shim.send(&big_call(&format!("q{i}"), 200_000));
    }
    std::thread::sleep(Duration::from_millis(500));
    stop_tx.send(()).unwrap();
    shim.response(&json!("q0"), Duration::from_secs(20));
    let late = wrote_rx
        .recv_timeout(Duration::from_secs(1))
        .unwrap()
        .elapsed();
    let ids = daemon.join().unwrap();
    assert_eq!(ids, (0..8).map(|i| format!("q{i}")).collect::<Vec<_>>());
    for i in 1..8 {
        shim.response(&json!(format!("q{i}")), Duration::from_secs(10));
    }
    assert!(
        late < Duration::from_millis(1000),
        "the daemon's answer waited {late:?} in the shim behind the replay"
    );
}

/// A replay the new daemon does not take (it closes the session part way: it died, or a line
/// is over a cap lowered since) is not sent again and again to each next daemon: the requests
/// in it were sent, and are answered with an error the agent can retry on, as when any
/// connection is lost. (Each try once sent the whole replay again, every 50 ms.)
#[test]
fn a_failing_replay_is_not_sent_again_and_again() {
    let env = Env::new();
    let l = listen(&env);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let daemon = std::thread::spawn(move || {
        let (mut r, mut w) = accept_hello(&l);
        // Read the client's eight requests, answer none, then hand over.
        for _ in 0..8 {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
        }
        go_rx.recv().unwrap();
        w.write_all(HANDOVER).unwrap();
        drop((r, w));
        // Each new "daemon" reads the replay's first line, then closes the session.
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut firsts = Vec::new();
        l.set_nonblocking(true).unwrap();
        while Instant::now() < deadline {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_millis(300)))
                        .unwrap();
                    let mut r = BufReader::new(s.try_clone().unwrap());
                    let mut hello = String::new();
                    if r.read_line(&mut hello).is_err() {
                        continue;
                    }
                    let mut w = s;
                    w.write_all(b"{\"coogle\":1,\"ok\":true}\n").unwrap();
                    let mut line = String::new();
                    let first = match r.read_line(&mut line) {
                        Ok(n) if n > 0 => serde_json::from_str::<serde_json::Value>(&line)
                            .map(|v| v["id"].to_string())
                            .unwrap_or_default(),
                        _ => "nothing".into(),
                    };
                    firsts.push(first);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        firsts
    });
    let mut shim = env.shim();
    for i in 0..8 {
        shim.send(&big_call(&format!("q{i}"), 200_000));
    }
    std::thread::sleep(Duration::from_millis(500));
    go_tx.send(()).unwrap();
    let firsts = daemon.join().unwrap();
    let resent = firsts.iter().filter(|f| f.as_str() == "\"q0\"").count();
    assert!(
        resent <= 1,
        "q0 was sent to {resent} daemons in 3 s ({} connections): {firsts:?}",
        firsts.len()
    );
    // The agent is told, once per request.
    for i in 0..8 {
        let a = shim.response(&json!(format!("q{i}")), Duration::from_secs(10));
        assert_eq!(a["result"]["isError"], true, "{a}");
    }
}

/// stdin closes while the shim is reaching a new daemon (one that accepted and never answers
/// the hello): with nothing owed, the shim exits at once, as it did when a thread of its own
/// read stdin; the connecting is done on a short-lived thread meanwhile.
#[test]
fn stdin_closing_during_a_reconnect_ends_the_shim() {
    let env = Env::new();
    let l = listen(&env);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let daemon = std::thread::spawn(move || {
        let first = accept_hello(&l);
        go_rx.recv().unwrap();
        drop(first);
        let (s, _) = l.accept().unwrap();
        // Accepted, never answered (for 6 s).
        std::thread::sleep(Duration::from_secs(6));
        drop(s);
    });
    let mut shim = env.shim();
    go_tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    shim.close_stdin();
    let t0 = Instant::now();
    let mut exited = None;
    while t0.elapsed() < Duration::from_secs(8) {
        if let Ok(Some(_)) = shim.child.try_wait() {
            exited = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = exited.expect("the shim did not exit");
    daemon.join().unwrap();
    assert!(
        took < Duration::from_secs(2),
        "the shim took {took:?} to exit after stdin closed (it was waiting for a hello)"
    );
}

/// A request sent again after a hand-over, and not answered before a second hand-over, is sent
/// again to the third daemon too (its copy was once taken by the first resend, and the second
/// resent an empty line: the client never had an answer).
#[test]
fn a_request_survives_two_hand_overs() {
    let env = Env::new();
    let l = listen(&env);
    let daemon = std::thread::spawn(move || {
        let mut firsts = Vec::new();
        for round in 0..3 {
            let (mut r, mut w) = accept_hello(&l);
            r.get_ref()
                .set_read_timeout(Some(Duration::from_secs(3)))
                .unwrap();
            let mut line = String::new();
            let got = match r.read_line(&mut line) {
                Ok(n) if n > 0 => line.trim_end().to_string(),
                _ => "nothing".to_string(),
            };
            firsts.push(got.clone());
            if round == 2 {
                if got.contains("\"q0\"") {
                    w.write_all(&answer("q0")).unwrap();
                }
                std::thread::sleep(Duration::from_millis(500));
                break;
            }
            w.write_all(HANDOVER).unwrap();
        }
        firsts
    });
    let mut shim = env.shim();
    shim.send(
        &json!({"jsonrpc": "2.0", "id": "q0", "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}}}),
    );
    let firsts = daemon.join().unwrap();
    assert!(
        firsts.iter().all(|f| f.contains("\"q0\"")),
        "what each daemon got first: {firsts:?}"
    );
    shim.response(&json!("q0"), Duration::from_secs(10));
}

/// stdin a regular file (which `poll` always calls readable), CRLF line ends, a blank line, the
/// last line without its newline: every request is answered, then the shim exits 0.
#[test]
fn stdin_from_a_regular_file() {
    let env = Env::with_fake(json!({}));
    let _daemon = env.daemon();
    let path = env.path("requests.jsonl");
    let mut text = String::new();
    text.push_str(r#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    text.push_str("\r\n");
    text.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n\r\n");
    for i in 0..200 {
        text.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n"
        ));
    }
    text.push_str(r#"{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"echo","arguments":{"text":"end"}}}"#);
    std::fs::write(&path, &text).unwrap();
    let out = env
        .cmd()
        .args(["mcp"])
        .stdin(std::fs::File::open(&path).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].clone())
        .collect();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ids.len(), 202, "{stdout}");
    assert!(ids.contains(&json!("last")));
}

/// A daemon that writes without pause does not starve stdin: a request the client writes
/// meanwhile reaches the daemon at once (each pass reads each side once).
#[test]
fn a_chatty_daemon_does_not_starve_stdin() {
    let env = Env::new();
    let l = listen(&env);
    let daemon = std::thread::spawn(move || {
        let (r, mut w) = accept_hello(&l);
        let (tx, rx) = mpsc::channel::<(Instant, String)>();
        std::thread::spawn(move || {
            let mut r = r;
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let _ = tx.send((Instant::now(), line));
        });
        let note = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"data\":\"{}\"}}}}\n",
            "m".repeat(3000)
        );
        let start = Instant::now();
        loop {
            if let Ok(got) = rx.try_recv() {
                return Some(got);
            }
            if start.elapsed() > Duration::from_secs(10) || w.write_all(note.as_bytes()).is_err() {
                return None;
            }
        }
    });
    let mut shim = env.shim();
    // Let the flood run, while the test's reader thread drains stdout.
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    shim.send(&json!({"jsonrpc": "2.0", "id": "q", "method": "ping"}));
    let (at, line) = daemon
        .join()
        .unwrap()
        .expect("the daemon never got the client's request");
    assert!(line.contains("\"q\""), "{line}");
    let took = at.duration_since(sent);
    // Starved, it would wait for the whole 10 s flood.
    assert!(took < Duration::from_secs(3), "stdin waited {took:?}");
}

/// (pid, state) of every process whose parent is `ppid`.
#[cfg(target_os = "linux")]
fn children_of(ppid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if f.next().and_then(|p| p.parse().ok()) == Some(ppid) {
            out.push((pid, state));
        }
    }
    out
}

#[cfg(target_os = "linux")]
fn zombies_of(pid: u32) -> Vec<(u32, char)> {
    children_of(pid)
        .into_iter()
        .filter(|(_, s)| *s == 'Z')
        .collect()
}

/// A daemon the shim started on a reconnect whose hello is then refused (the server it serves
/// was renamed in config.json) is reaped once it ends, not left a zombie of the shim for the
/// session's life: the daemon process comes back from `open` whatever the hello said, and the
/// shim looks for its end once a second while it waits between attempts.
#[cfg(target_os = "linux")]
#[test]
fn a_daemon_started_by_a_refused_reconnect_is_reaped() {
    let env = Env::with_fake(json!({}));
    let mut shim = env.shim_with(&["--server", "google"]);
    shim.initialize();
    let pid = shim.child.id();
    env.write_config(&json!({"servers": {"other": {
        "command": fake_mcp(), "credentials": {"source": "none"}}}}));
    let _ = env.run(&["stop"]);
    let t0 = Instant::now();
    loop {
        let a = shim.request("ping", json!({}));
        let said = a["error"]["message"].as_str().unwrap_or("");
        if said.contains("google") || said.contains("other") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(40), "{a}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // By now the shim's backoff between attempts is several seconds: the daemon that ends next
    // is reaped within a second anyway, not at the next attempt.
    std::thread::sleep(Duration::from_secs(8));
    let _ = env.run(&["stop"]);
    std::thread::sleep(Duration::from_secs(3));
    let zombies = zombies_of(pid);
    drop(shim);
    assert!(zombies.is_empty(), "zombies of the shim: {zombies:?}");
}

/// A daemon the shim started, stopped while the session is busy (a call every 300 ms, so the
/// shim never has 2 s of quiet to settle), is reaped within a second or so, not at the next
/// settle.
#[cfg(target_os = "linux")]
#[test]
fn a_started_daemon_that_exits_while_busy_is_reaped() {
    let env = Env::with_fake(json!({}));
    let mut shim = env.shim();
    shim.initialize();
    let pid = shim.child.id();
    let _ = env.run(&["stop"]);
    let t0 = Instant::now();
    let (mut first, mut last) = (None, None);
    while t0.elapsed() < Duration::from_secs(10) {
        let _ = shim.request("ping", json!({}));
        if !zombies_of(pid).is_empty() {
            first = first.or(Some(t0.elapsed()));
            last = Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(shim);
    let _ = env.run(&["stop"]);
    // How long the ended daemon stayed a zombie (not when it ended: a loaded machine stops
    // it later).
    let lasted = last.zip(first).map(|(l, f)| l - f);
    assert!(
        lasted.is_none_or(|l| l < Duration::from_secs(3)),
        "a zombie for {lasted:?} while busy"
    );
}

/// The hello carries the session's environment, which may be more than the socket holds. A
/// daemon that accepted and never reads (stopped, wedged) is given up on after the hello's time
/// limit, for writing as for reading, and the next daemon is tried; meanwhile the shim waits
/// on stdin and the connect thread alone, without a timer.
#[cfg(target_os = "linux")]
#[test]
fn a_large_hello_to_a_wedged_daemon_is_tried_again() {
    let env = Env::new();
    let l = listen(&env);
    let (got_tx, got_rx) = mpsc::channel::<()>();
    let daemon = std::thread::spawn(move || {
        let first = accept_hello(&l);
        std::thread::sleep(Duration::from_millis(300));
        drop(first);
        // The second: accepted, never read.
        let (wedged, _) = l.accept().unwrap();
        let (mut r, mut w) = accept_hello(&l);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        w.write_all(&answer("p")).unwrap();
        let _ = got_tx.send(());
        std::thread::sleep(Duration::from_secs(1));
        drop(wedged);
    });
    let mut cmd = env.cmd();
    for i in 0..6 {
        cmd.env(format!("COOGLE_TEST_BIG_{i}"), "e".repeat(100_000));
    }
    let mut shim = env.stdio_server(cmd, &["mcp"]);
    let pid = shim.child.id();
    std::thread::sleep(Duration::from_secs(2));
    shim.send(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
    std::thread::sleep(Duration::from_secs(1));
    let switches = || proc_status(pid, "voluntary_ctxt_switches");
    let before = switches();
    std::thread::sleep(Duration::from_secs(3));
    let woken = switches() - before;
    assert!(
        woken < 20,
        "the shim woke {woken} times in 3 s while connecting"
    );
    assert!(
        got_rx.recv_timeout(Duration::from_secs(50)).is_ok(),
        "the shim never tried the next daemon"
    );
    let a = shim.response(&json!("p"), Duration::from_secs(5));
    assert_eq!(a["result"], json!({}), "{a}");
    daemon.join().unwrap();
}

/// A field of the main thread's `/proc/<pid>/task/<pid>/status`.
#[cfg(target_os = "linux")]
fn proc_status(pid: u32, name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} for {pid}"))
}

/// A fake daemon that goes away after `go`, and from then on accepts each connection and closes
/// it unanswered until `stop`. When `hand_over`, it first reads one request and says it hands
/// over, so the shim keeps that request to send again.
fn vanish_after(
    l: UnixListener,
    go: mpsc::Receiver<()>,
    stop: mpsc::Receiver<()>,
    hand_over: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (mut r, mut w) = accept_hello(&l);
        if hand_over {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            w.write_all(HANDOVER).unwrap();
        }
        go.recv().unwrap();
        drop((r, w));
        refuse_until(&l, &stop);
    })
}

/// `coogle mcp` on this env with its stdio piped, as a client starts it.
fn bare_shim(env: &Env) -> std::process::Child {
    env.cmd()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// How long `child` took to exit, within `limit`; killed (and `None`) if it did not.
fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut exited = None;
    while t0.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            exited = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    exited
}

/// A shim whose daemon goes away, then owes the answer to a request it buffered, and whose
/// client then closes its stdout (and its stdin too, unless `keep_stdin`): how long the shim
/// took to exit, or `None` if it was still retrying 15 s later.
fn orphaned_shim_exits_after(keep_stdin: bool) -> Option<Duration> {
    let env = Env::new();
    let (go_tx, go_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    let daemon = vanish_after(listen(&env), go_rx, stop_rx, false);
    let mut child = bare_shim(&env);
    std::thread::sleep(Duration::from_millis(300));
    go_tx.send(()).unwrap();
    // The daemon has gone: this request waits for the next one.
    std::thread::sleep(Duration::from_millis(500));
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"q1\",\"method\":\"tools/list\"}\n")
        .unwrap();
    let held = keep_stdin.then_some(stdin);
    drop(child.stdout.take());
    let took = exit_within(&mut child, Duration::from_secs(15));
    drop(held);
    stop_tx.send(()).unwrap();
    daemon.join().unwrap();
    took
}

/// The client is gone (stdin and stdout closed) while the shim owes an answer and no daemon
/// answers: the shim exits within a step of its backoff instead of retrying, and starting
/// daemons, for ever as an orphan.
#[test]
fn a_shim_whose_client_has_gone_stops_retrying() {
    let took = orphaned_shim_exits_after(false)
        .expect("the shim was still retrying 15 s after its client had gone");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// stdin closed while the client still reads, a request kept to send again after a hand-over
/// and one buffered, and no daemon answers: after the time it gives a daemon to start, the
/// shim answers both, in the order they were sent, with why, and exits.
#[test]
fn a_closed_session_that_no_daemon_answers_is_told_why_and_ends() {
    let env = Env::new();
    let (go_tx, go_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel();
    let daemon = vanish_after(listen(&env), go_rx, stop_rx, true);
    let mut shim = env.shim();
    shim.send(&json!({"jsonrpc": "2.0", "id": "kept", "method": "tools/list"}));
    std::thread::sleep(Duration::from_millis(300));
    go_tx.send(()).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    shim.send(
        &json!({"jsonrpc": "2.0", "id": "buffered", "method": "tools/call",
        "params": {"name": "echo", "arguments": {}}}),
    );
    shim.close_stdin();
    let t0 = Instant::now();
    let first = shim.recv(Duration::from_secs(45)).expect("no answer");
    let second = shim.recv(Duration::from_secs(5)).expect("no second answer");
    let waited = t0.elapsed();
    let status = shim.child.wait().unwrap();
    stop_tx.send(()).unwrap();
    daemon.join().unwrap();
    assert_eq!(first["id"], "kept", "{first}");
    assert_eq!(second["id"], "buffered", "{second}");
    let said = |v: &serde_json::Value| {
        v["error"]["message"]
            .as_str()
            .or_else(|| v["result"]["content"][0]["text"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    for v in [&first, &second] {
        assert!(said(v).contains("stopped retrying"), "{v}");
    }
    assert_eq!(second["result"]["isError"], true, "{second}");
    assert!(status.success(), "{status:?}");
    assert!(waited > Duration::from_secs(25), "gave up after {waited:?}");
}

/// stdin ended long (over the 30 s the shim gives a daemon) before a hand-over, and the new
/// daemon's first connection fails once: the shim still tries again (the clock starts at the
/// first failed attempt, not at the end of stdin), and the client, still reading, gets its
/// answer. (A review found the answer refused after that one failure.)
#[test]
fn a_hand_over_long_after_stdin_ended_is_still_retried() {
    let env = Env::new();
    let l = listen(&env);
    let daemon = std::thread::spawn(move || {
        let (mut r, mut w) = accept_hello(&l);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        std::thread::sleep(Duration::from_secs(32));
        w.write_all(HANDOVER).unwrap();
        drop((r, w));
        // One failed attempt, then a daemon that answers.
        drop(l.accept().unwrap());
        let (mut r, mut w) = accept_hello(&l);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        w.write_all(&answer("r1")).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    let mut shim = env.shim();
    shim.send(&json!({"jsonrpc": "2.0", "id": "r1", "method": "tools/list"}));
    shim.close_stdin();
    let a = shim.recv(Duration::from_secs(45)).expect("no answer");
    // Before the join: a shim that gave up leaves the fake daemon waiting for it.
    assert!(a["result"].is_object(), "{a}");
    daemon.join().unwrap();
}

/// The client's stdout has gone while its stdin stays open (another process holds its write
/// end): no answer can reach anyone, and the shim stops retrying instead of starting daemons
/// for ever.
#[test]
fn a_client_whose_stdout_has_gone_is_not_retried_for() {
    let took = orphaned_shim_exits_after(true)
        .expect("still retrying 15 s after its client's stdout went away");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}
