//! Socket squatting: with `XDG_RUNTIME_DIR` unset the socket is `/tmp/coogle-$UID/coogle.sock`,
//! and another local user can create that directory first and listen there. Every client
//! checks the directory and the listening peer's uid before it sends a byte, refuses loudly
//! with a hint, and `coogle doctor` names it.
//!
//! The victim is this (root) test process's uid; the squatter runs as `nobody` through
//! `setpriv`, inside a private mount namespace with its own /tmp, so the real /tmp is never
//! touched. Every wait is bounded (`timeout`).

use crate::support;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use support::*;

/// Listens on argv[1] (creating its directory, open to all), and prints how many bytes each
/// connection sent before closing or going quiet for 3 s.
const SQUATTER: &str = r#"
import os, socket, sys
path = sys.argv[1]
d = os.path.dirname(path)
os.makedirs(d, exist_ok=True)
os.chmod(d, 0o777)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(3)
    got = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    print("received", len(got), got[:120], flush=True)
    c.close()
"#;

/// Runs as root inside `unshare -m`: a private /tmp, then both scenarios, each victim command
/// bounded by `timeout`. $1 is the output directory, $2 the coogle binary, $3 the squatter.
const SCRIPT: &str = r#"
set -u
OUT=$1; COOGLE=$2; SQUAT=$3
# A checkout under /tmp (CI clones anywhere) would vanish under the fresh /tmp: the old /tmp is
# first bound onto a directory outside it (in this private namespace only), and the checkout's
# top directory bound back from there.
OLD=""
for d in /mnt /srv /media /opt; do [ -d "$d" ] && OLD=$d && break; done
[ -n "$OLD" ] && mount --bind /tmp "$OLD" || exit 93
mount -t tmpfs -o mode=1777 tmpfs /tmp || exit 90
keep() {
    case "$1" in
        /tmp/*) top="/tmp/$(printf '%s' "${1#/tmp/}" | cut -d/ -f1)"
                [ -d "$top" ] && return 0
                mkdir -p "$top" && mount --bind "$OLD/${top#/tmp/}" "$top" || exit 94 ;;
    esac
}
keep "$OUT"
keep "$COOGLE"
ME=$(id -u)
SOCK=/tmp/coogle-$ME/coogle.sock
victim() {
    timeout 20 env -u XDG_RUNTIME_DIR -u COOGLE_SOCKET -u CI HOME="$OUT/home" \
        XDG_CONFIG_HOME="$OUT/home/.config" XDG_STATE_HOME="$OUT/home/.local/state" \
        COOGLE_CLAUDE_CLI=none RUST_LOG=coogle=warn "$COOGLE" "$@"
}
wait_socket() {
    for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done
    echo "no squatter socket at $1" >&2; exit 91
}
run_victim() {
    victim mcp < "$OUT/init.jsonl" > "$OUT/$1.mcp.out" 2> "$OUT/$1.mcp.err"; echo $? > "$OUT/$1.mcp.code"
    victim status > "$OUT/$1.status.out" 2> "$OUT/$1.status.err"; echo $? > "$OUT/$1.status.code"
    victim call echo '{"text":"the secret argument"}' > "$OUT/$1.call.out" 2> "$OUT/$1.call.err"; echo $? > "$OUT/$1.call.code"
    victim doctor > "$OUT/$1.doctor.out" 2> "$OUT/$1.doctor.err"; echo $? > "$OUT/$1.doctor.code"
}

# a: the squatter created the victim's directory and listens in it.
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "$SQUAT" "$SOCK" > "$OUT/a.squatter" 2>&1 &
SQ=$!
wait_socket "$SOCK"
run_victim a
sleep 0.5; kill $SQ; wait $SQ 2>/dev/null

# b: the directory is the victim's own and private, but a socket listened on by the squatter
# was moved into it (a listening socket keeps its listener when renamed).
rm -rf "/tmp/coogle-$ME"
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "$SQUAT" /tmp/sq/coogle.sock > "$OUT/b.squatter" 2>&1 &
SQ=$!
wait_socket /tmp/sq/coogle.sock
mkdir -m 700 "/tmp/coogle-$ME" && mv /tmp/sq/coogle.sock "$SOCK" || exit 92
run_victim b
sleep 0.5; kill $SQ; wait $SQ 2>/dev/null
# Nothing may have started a daemon for the squatted socket.
pgrep -f "serve --socket $SOCK" > "$OUT/daemons" || true
exit 0
"#;

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

#[test]
fn a_squatter_receives_nothing_and_every_client_refuses() {
    if !can_run_as_another_user() {
        return;
    }
    // Outside /tmp: the script mounts its own /tmp over it.
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = out.path();
    std::fs::create_dir_all(dir.join("home/.config/coogle")).unwrap();
    std::fs::write(
        dir.join("home/.config/coogle/config.json"),
        serde_json::to_vec(&json!({"servers": {"google": {
            "command": fake_mcp(), "credentials": {"source": "none"}}}}))
        .unwrap(),
    )
    .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "victim", "version": "1"}}});
    std::fs::write(dir.join("init.jsonl"), format!("{init}\n")).unwrap();

    let run = Command::new("/usr/bin/timeout")
        .args(["120", "/usr/bin/unshare", "-m", "--propagation", "private"])
        .args(["sh", "-c", SCRIPT, "squat"])
        .arg(dir)
        .arg(COOGLE)
        .arg(SQUATTER)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "the script failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );

    for (case, refusal) in [
        ("a", "/tmp/coogle-0 is owned by uid 65534"),
        ("b", "runs as uid 65534"),
    ] {
        let squatter = read(dir, &format!("{case}.squatter"));
        assert!(squatter.starts_with("listening"), "{case}: {squatter}");
        for line in squatter.lines().skip(1) {
            assert!(
                line.starts_with("received 0 "),
                "{case}: the squatter received something: {line}"
            );
        }
        if case == "a" {
            // The directory check comes before connecting: not even a connection.
            assert_eq!(squatter.lines().count(), 1, "{case}: {squatter}");
        }
        for cmd in ["mcp", "status", "call"] {
            let code = read(dir, &format!("{case}.{cmd}.code"));
            let stderr = read(dir, &format!("{case}.{cmd}.err"));
            let stdout = read(dir, &format!("{case}.{cmd}.out"));
            let what = format!(
                "{case}: coogle {cmd} exited {code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
            );
            assert_eq!(code.trim(), "2", "{what}");
            assert!(
                stderr.contains("refusing to use the daemon socket"),
                "{what}"
            );
            assert!(stderr.contains(refusal), "{what}");
            assert!(stderr.contains("XDG_RUNTIME_DIR"), "the hint: {what}");
            assert!(!stderr.contains("the secret argument"), "{what}");
        }
        // The agent's client is told too, as the answer to its initialize: nothing else.
        let mcp_out = read(dir, &format!("{case}.mcp.out"));
        let answers: Vec<serde_json::Value> = mcp_out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            answers.len() == 1
                && answers[0]["id"] == 1
                && answers[0]["error"]["message"].as_str().is_some_and(|m| m
                    .contains("refusing to use the daemon socket")
                    && m.contains(refusal)),
            "{case}: mcp stdout: {mcp_out}"
        );
        let doctor = read(dir, &format!("{case}.doctor.out"));
        assert_eq!(
            read(dir, &format!("{case}.doctor.code")).trim(),
            "1",
            "{doctor}"
        );
        let named = doctor
            .lines()
            .skip_while(|l| !(l.contains('✗') && l.contains("refusing to use the daemon socket")))
            .take(2)
            .collect::<Vec<_>>();
        assert!(
            named.len() == 2
                && named[0].contains(refusal)
                && named[1].contains("fix:")
                && named[1].contains("XDG_RUNTIME_DIR"),
            "{case}: doctor must name it with the fix:\n{doctor}"
        );
    }
    assert_eq!(
        read(dir, "daemons"),
        "",
        "a daemon was started for the squatted socket"
    );
}
