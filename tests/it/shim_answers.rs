//! `coogle mcp` answers its client whatever happens: a daemon that cannot start (a broken
//! config.json, a socket path too long), an upstream the daemon does not have, or stdin closing
//! right after a request. Each arrives as an MCP answer the client shows, at once; none is a
//! silent exit or a 20 s wait.

use crate::support;

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::pty::Pty;
use support::*;

/// Far below the 20 s the shim used to wait, far above any honest start on a loaded machine.
const AT_ONCE: Duration = Duration::from_secs(10);

/// `config.json` cut off in the middle, as an editor crash or a full disk leaves it.
const TRUNCATED: &[u8] = br#"{"servers": {"time": {"command": "uvx", "args": ["mcp-ser"#;

fn initialize_params() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test-client", "version": "1"}
    })
}

/// The error message of the answer to `id`.
fn error_message(answer: &Value) -> String {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error answer: {answer}"))
        .to_owned()
}

/// Regression (issue 20, item 3): with a truncated config.json, the daemon `coogle mcp`
/// started exited at once, and the shim waited 20 s to say only that it "did not answer".
/// Now Claude Code's `server/discover` and `initialize` are answered at once with an error
/// naming the file, the parse error and the fix, and no daemon is left behind.
#[test]
fn a_broken_config_is_an_mcp_error_at_once() {
    let env = Env::new();
    std::fs::write(&env.config, TRUNCATED).unwrap();
    let started = Instant::now();
    let mut s = env.shim();
    for method in ["server/discover", "initialize"] {
        let answer = s.request(method, initialize_params());
        let message = error_message(&answer);
        assert!(
            message.contains(&env.config.display().to_string())
                && message.contains("EOF while parsing")
                && message.contains("fix the file"),
            "{method}: {message}"
        );
    }
    assert!(
        started.elapsed() < AT_ONCE,
        "answered after {:?}",
        started.elapsed()
    );
    s.close_stdin();
    let stderr = s.stderr();
    assert!(stderr.contains("EOF while parsing"), "{stderr}");
    assert!(
        !env.socket.exists(),
        "a daemon is listening on {}",
        env.socket.display()
    );
}

/// Regression (issue 24, item 12): a socket path over the platform's limit was explained by
/// `serve` alone; `status` said "is the daemon running?" and `coogle mcp` waited 20 s. Every
/// command now names it at once, with the fix.
#[test]
fn a_socket_path_too_long_is_named_by_every_command() {
    let env = Env::with_fake(json!({}));
    let long = env.path(&format!("{}/coogle.sock", "d".repeat(110)));
    let run = |args: &[&str]| {
        let mut cmd = env.cmd();
        cmd.env("COOGLE_SOCKET", &long);
        let started = Instant::now();
        let out = Output::of(cmd, args);
        assert!(
            started.elapsed() < AT_ONCE,
            "took {:?}: {out}",
            started.elapsed()
        );
        out
    };
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["stop"],
        &["reload"],
        &["restart"],
        &["tools"],
        &["call", "echo", r#"{"text":"x"}"#],
        &["serve"],
    ] {
        let out = run(args);
        assert_eq!(out.status, Some(2), "{out}");
        assert!(
            out.stderr.contains("is 1") && out.stderr.contains("bytes, longer than"),
            "{out}"
        );
        assert!(
            out.stderr.contains("hint: choose a shorter socket path"),
            "{out}"
        );
        assert!(!out.stderr.contains("is the daemon running"), "{out}");
    }

    let mut cmd = env.cmd();
    cmd.env("COOGLE_SOCKET", &long);
    let started = Instant::now();
    let mut s = env.stdio_server(cmd, &["mcp"]);
    let message = error_message(&s.request("initialize", initialize_params()));
    assert!(started.elapsed() < AT_ONCE, "took {:?}", started.elapsed());
    assert!(
        message.contains(&long.display().to_string()) && message.contains("shorter socket path"),
        "{message}"
    );
}

/// Regression (issue 20, item 4): a shim for an upstream the daemon does not have exited with
/// the reason on its stderr, which no client shows. Its client now gets the reason, and what
/// to do, as the answer to its handshake.
#[test]
fn an_unknown_upstream_is_an_mcp_error() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut s = env.shim_with(&["--server", "nosuch"]);
    let message = error_message(&s.request("initialize", initialize_params()));
    assert!(
        message.contains(r#"no upstream named "nosuch""#)
            && message.contains("configured: google")
            && message.contains("coogle unshare nosuch"),
        "{message}"
    );
    // A tool call (a client that skipped the handshake) gets a tool result the agent reads.
    let call = s.call("echo", json!({"text": "x"}));
    assert_eq!(call["result"]["isError"], true, "{call}");
    assert!(text(&call).contains("no upstream named"), "{call}");
}

/// The same, through the real Claude Code: `claude mcp list` showed only "✘ Failed to connect
/// — CONNECTION_CLOSED" for a shared entry whose upstream config.json lacks.
#[test]
fn claude_code_shows_why_an_upstream_is_unknown() {
    let Some(claude) = claude_cli() else {
        return;
    };
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let entry = json!({"type": "stdio", "command": COOGLE, "args": ["mcp", "--server", "nosuch"]});
    let add = [
        "mcp",
        "add-json",
        "--scope",
        "user",
        "gone",
        &entry.to_string(),
    ];
    let (code, text) = env.run_claude(&claude, &add);
    assert_eq!(code, Some(0), "{text}");
    let (_, text) = env.run_claude(&claude, &["mcp", "list"]);
    let line = text.lines().find(|l| l.starts_with("gone:")).unwrap_or("");
    assert!(line.contains("Failed to connect"), "{text}");
    assert!(!line.contains("CONNECTION_CLOSED"), "{text}");
    // Claude Code redacts the entry's own arguments (the name among them) from what it shows.
    assert!(
        line.contains("no upstream named") && line.contains("configured: google"),
        "{text}"
    );
}

/// Regression (issue 20, item 9): given a request and then EOF (`echo '…' | coogle mcp`), the
/// shim exited without answering the request in flight. Run directly, a server answers first.
#[test]
fn a_request_before_eof_is_answered() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut child = env
        .cmd()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "sleep", "arguments": {"ms": 500, "text": "slept through EOF"}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    // EOF right behind the call, long before its answer can come.
    drop(stdin);
    let out = wait_output(child, Duration::from_secs(60));
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out.status.code(), Some(0), "{answers:?}");
    let call = answers
        .iter()
        .find(|a| a["id"] == 2)
        .unwrap_or_else(|| panic!("the call was not answered: {answers:?}"));
    assert_eq!(text(call), "slept through EOF");
    assert!(answers.iter().any(|a| a["id"] == 1), "{answers:?}");
}

/// Wait for a child to exit (bounded) and collect what it wrote.
fn wait_output(child: std::process::Child, limit: Duration) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: signalling the child we started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("coogle mcp did not exit within {limit:?} after stdin closed");
        }
    }
}

/// Regression (issue 20, item 12): `coogle mcp` typed at a terminal waited in silence. It now
/// says in one line what it is and that the person wants `coogle setup`.
#[test]
fn coogle_mcp_at_a_terminal_says_what_it_is() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut cmd = env.cmd();
    cmd.arg("mcp");
    let mut pty = Pty::spawn(cmd);
    let t = Duration::from_secs(30);
    pty.expect("coogle mcp is the MCP server an agent starts", 0, t);
    pty.expect("run `coogle setup`", 0, t);
    // Ctrl-D: the end of its input, and so of the session.
    pty.send("\x04");
    assert_eq!(pty.wait(t), Some(0), "{}", pty.text());
}

/// The same, through the real Claude Code: a broken config.json was "Failed to connect" after
/// a 20 s wait; it is now the parse error and its fix, at once.
#[test]
fn claude_code_shows_a_broken_config_at_once() {
    let Some(claude) = claude_cli() else {
        return;
    };
    let env = Env::new();
    std::fs::write(&env.config, TRUNCATED).unwrap();
    let entry = json!({"type": "stdio", "command": COOGLE, "args": ["mcp"]});
    let add = [
        "mcp",
        "add-json",
        "--scope",
        "user",
        "google",
        &entry.to_string(),
    ];
    let (code, text) = env.run_claude(&claude, &add);
    assert_eq!(code, Some(0), "{text}");
    let started = Instant::now();
    let (_, text) = env.run_claude(&claude, &["mcp", "list"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("google:"))
        .unwrap_or("");
    assert!(line.contains("Failed to connect"), "{text}");
    assert!(
        line.contains("EOF while parsing") && line.contains("fix the file"),
        "{text}"
    );
    // Claude Code itself takes a moment to start; the 20 s wait would be well past this.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
}

/// A session that outlives its daemon, whose config.json broke meanwhile: the shim's
/// reconnect starts a daemon that cannot start. The request waiting for it is answered with
/// why, at once, instead of waiting on retries that cannot succeed.
#[test]
fn a_request_waiting_for_a_daemon_that_cannot_start_is_told_why() {
    let env = Env::with_fake(json!({}));
    let d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    std::fs::write(&env.config, TRUNCATED).unwrap();
    drop(d);
    wait_for("the daemon to go", Duration::from_secs(20), || {
        control(&env.socket, "ping", Value::Null).is_err()
    });
    let started = Instant::now();
    let answer = s.request("tools/list", json!({}));
    let message = error_message(&answer);
    assert!(
        message.contains("EOF while parsing")
            && message.contains(&env.config.display().to_string()),
        "{message}"
    );
    assert!(started.elapsed() < AT_ONCE, "took {:?}", started.elapsed());
}
