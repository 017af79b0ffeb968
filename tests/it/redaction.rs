//! Redaction by value: a configured `env` value is a secret whatever its name, and it never
//! leaves the daemon in any common form (plain, split across lines or around `\r`, URL-encoded,
//! JSON-escaped, hex, base64): not in the log, not in `coogle logs`, not in `status --json`,
//! not in the error an agent gets (which quotes the child's last stderr line).
//!
//! Regression (third adversarial review): `DB_URL=postgres://app:hunter2-db-pass@…` appeared
//! verbatim in all four, because only secret-looking names were redacted.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

const SECRET: &str = "postgres://app:hunter2-db-pass@db.internal:5432/app";

fn base64(bytes: &[u8]) -> String {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn url_encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every form the child writes, each on its own line(s), labelled; and the pieces that must
/// never be seen.
fn forms() -> (String, Vec<String>) {
    let (head, tail) = SECRET.split_at(SECRET.find("-db-pass").unwrap() + 2);
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    let b64 = base64(format!("user:{SECRET}").as_bytes());
    let url = url_encoded(SECRET);
    let json_escaped = SECRET.replace('/', "\\/").replace('@', "\\u0040");
    let text = format!(
        "plain: {SECRET}\n\
         split: {head}\n{tail} (end)\n\
         redrawn: {head}\r{tail}\n\
         url: dsn={url}&x=1\n\
         json: {{\"dsn\":\"{json_escaped}\"}}\n\
         hex: {hex}\n\
         basic: Authorization Basic {b64}\n"
    );
    let never = vec![
        SECRET.to_string(),
        "hunter2".to_string(),
        head.to_string(),
        tail.to_string(),
        url.clone(),
        json_escaped.clone(),
        hex.clone(),
        b64[8..40].to_string(),
    ];
    (text, never)
}

fn assert_clean(what: &str, text: &str, never: &[String]) {
    for piece in never {
        assert!(
            !text.contains(piece.as_str()),
            "{what} holds {piece:?}:\n{text}"
        );
    }
}

#[test]
fn a_configured_value_never_leaves_the_daemon_in_any_form() {
    let env = Env::new();
    let (stderr_text, never) = forms();
    let said = env.path("stderr.txt");
    std::fs::write(&said, &stderr_text).unwrap();
    // The same stderr twice: from a child that then serves, and from one that then dies (its
    // last stderr line, the base64 one, is quoted in its error).
    let serving = format!(
        "cat '{}' >&2; exec '{}'",
        said.display(),
        fake_mcp().display()
    );
    // Its command line holds the value too (configured args are quoted in errors and status).
    let dying = format!("cat '{}' >&2; exit 3 # {SECRET}", said.display());
    let server = |script: &str| {
        json!({
            "command": "sh",
            "args": ["-c", script],
            "env": {"DB_URL": SECRET, "PLAIN_FLAG": "true"},
            "credentials": {"source": "none"},
        })
    };
    env.write_config(&json!({"servers": {
        "google": server(&serving),
        "broken": server(&dying),
    }}));
    let mut d = env.daemon();

    // An agent on the serving child, and one whose child dies at start.
    let mut s = env.shim();
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "up"}))), "up");
    let mut b = env.shim_with(&["--server", "broken"]);
    let answer = b.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    let agent_error = answer.to_string();
    assert!(
        agent_error.contains("last stderr line") && agent_error.contains("[redacted]"),
        "the agent is told why, with the secret taken out: {agent_error}"
    );
    assert_clean("the agent's error", &agent_error, &never);

    // The CLI's errors, through control requests: a call, and a restart that cannot start it.
    for args in [
        &["call", "--server", "broken", "echo", "{\"text\":\"x\"}"][..],
        &["restart", "--server", "broken"][..],
    ] {
        let out = env.run(args);
        assert_ne!(out.status, Some(0), "{out}");
        assert!(
            out.stderr.contains("[redacted]") || out.stdout.contains("[redacted]"),
            "{out}"
        );
        assert_clean(&format!("coogle {args:?}"), &out.to_string(), &never);
    }
    // status --json: the dying child's lastError quotes the same line.
    let status = env.run(&["status", "--json"]);
    let parsed: Value = serde_json::from_str(&status.stdout).unwrap_or_else(|_| panic!("{status}"));
    let broken = parsed["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "broken")
        .unwrap_or_else(|| panic!("{parsed}"));
    assert!(
        broken["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("[redacted]")),
        "{broken}"
    );
    assert_clean("status --json", &status.stdout, &never);

    // The log, as written and as `coogle logs` shows it: every labelled line is there, with
    // its secret taken out, and the short value ("true") is left alone.
    wait_for(
        "the stderr lines in the log",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&env.log)
                .is_ok_and(|l| l.matches("basic: Authorization").count() >= 2)
        },
    );
    drop(s);
    drop(b);
    let (_, daemon_stderr) = d.signal_and_wait(libc::SIGTERM);
    let log = std::fs::read_to_string(&env.log).unwrap();
    for label in [
        "plain: [redacted]",
        "split: [redacted]",
        "[redacted] (end)",
        "redrawn: [redacted]\r[redacted]",
        "url: dsn=[redacted]&x=1",
        "hex: [redacted]",
        "basic: Authorization Basic ",
    ] {
        assert!(log.contains(label), "{label:?} not in the log:\n{log}");
    }
    assert!(log.contains(r#"json: {"dsn":"[redacted]"}"#), "{log}");
    assert_clean("the log file", &log, &never);
    assert_clean("the daemon's stderr", &daemon_stderr, &never);
    let logs = env.run(&["logs"]);
    assert!(logs.stdout.contains("plain: [redacted]"), "{logs}");
    assert_clean("coogle logs", &logs.stdout, &never);
}
