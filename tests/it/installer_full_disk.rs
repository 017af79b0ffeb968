//! A full config disk: coogle's config directory (config.json and the state file) is a small
//! tmpfs, filled to leave from nothing to a few pages free, in a private mount namespace
//! (`unshare -m`, as root). At every fill level, `share` (and `setup --share-all`) either
//! finishes or says what it could not do and exits non-zero, never changing a client file it
//! could not record; once space is freed, `unshare` (`uninstall`) gives back the original
//! bytes and removes every upstream that was added.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "sk-live-full-disk-token-1234";

/// Runs as root inside `unshare -m`: $1 the config directory, $2 the output directory, $3 the
/// coogle binary, $4 the bytes to leave free, $5 and $6 the command and its undo (words split
/// by the shell). The tmpfs exists only in this namespace, so what it holds is copied out.
const SCRIPT: &str = r#"
set -u
CFG=$1; OUT=$2; COOGLE=$3; FREE=$4; DO=$5; UNDO=$6
cp "$CFG/config.json" "$OUT/config.before" || exit 90
mount -t tmpfs -o size=96k,mode=0700 tmpfs "$CFG" || exit 91
cp "$OUT/config.before" "$CFG/config.json" || exit 92
cat /dev/zero > "$CFG/filler" 2>/dev/null
size=$(stat -c %s "$CFG/filler")
keep=$(( size > FREE ? size - FREE : 0 ))
truncate -s "$keep" "$CFG/filler" || exit 93
df -B1 "$CFG" | tail -1 > "$OUT/df"
timeout 60 "$COOGLE" $DO > "$OUT/do.out" 2> "$OUT/do.err"; echo $? > "$OUT/do.code"
cp "$CFG/config.json" "$OUT/config.after-do" 2>/dev/null
cp "$HOME/.claude.json" "$OUT/claude.after-do"
cp "$HOME/.cursor/mcp.json" "$OUT/cursor.after-do"
rm -f "$CFG/filler"
timeout 60 "$COOGLE" $UNDO > "$OUT/undo.out" 2> "$OUT/undo.err"; echo $? > "$OUT/undo.code"
cp "$CFG/config.json" "$OUT/config.after-undo" 2>/dev/null
ls -la "$CFG" > "$OUT/ls.after-undo"
exit 0
"#;

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn json_of(dir: &Path, name: &str) -> Value {
    serde_json::from_str(&read(dir, name)).unwrap_or(Value::Null)
}

/// One fill level: a fresh world, the command run on the full disk, then its undo with space.
fn run_level(free: u64, command: &str, undo: &str) {
    let env = Env::new();
    let fake = fake_mcp().to_string_lossy().into_owned();
    env.write_config(&json!({"servers": {"google": {"command": fake,
        "credentials": {"source": "none"}}}}));
    let claude = env.home.join(".claude.json");
    let cursor = env.home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    let doc = json!({
        "numStartups": 3,
        "mcpServers": {
            "memory": {"type": "stdio", "command": fake, "args": ["memory"], "env": {}},
            "tokens": {"type": "stdio", "command": fake, "args": ["tokens"],
                       "env": {"API_TOKEN": TOKEN}},
        },
        "projects": {"/home/ada/alpha": {"mcpServers": {
            "notes": {"type": "stdio", "command": fake, "args": ["notes"], "env": {}}}}},
    });
    std::fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    std::fs::write(
        &cursor,
        serde_json::to_vec(&json!({"mcpServers": {"api": {"command": fake, "args": ["cursor"]}}}))
            .unwrap(),
    )
    .unwrap();
    let (claude0, cursor0) = (
        std::fs::read(&claude).unwrap(),
        std::fs::read(&cursor).unwrap(),
    );
    let out = env.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let status = env
        .sealed("/usr/bin/unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", SCRIPT, "sh"])
        .arg(env.config.parent().unwrap())
        .arg(&out)
        .arg(COOGLE)
        .arg(free.to_string())
        .args([command, undo])
        .status()
        .unwrap();
    let report = format!(
        "{free} bytes free ({})\n--- {command}: exit {}\n{}\n{}\n--- {undo}: exit {}\n{}\n{}\n--- config dir after\n{}",
        read(&out, "df").trim(),
        read(&out, "do.code").trim(),
        read(&out, "do.out"),
        read(&out, "do.err"),
        read(&out, "undo.code").trim(),
        read(&out, "undo.out"),
        read(&out, "undo.err"),
        read(&out, "ls.after-undo"),
    );
    assert_eq!(status.code(), Some(0), "the script failed: {report}");

    // On the full disk: done, or said and exit 1; never a client entry behind an upstream
    // config.json lacks.
    let code = read(&out, "do.code").trim().to_owned();
    assert!(code == "0" || code == "1", "{report}");
    if code == "1" {
        let said = read(&out, "do.out").contains('✗') || read(&out, "do.err").contains("error:");
        assert!(said, "a failure is said: {report}");
    }
    let config = json_of(&out, "config.after-do");
    let mut shared = 0;
    for file in ["claude.after-do", "cursor.after-do"] {
        let doc = json_of(&out, file);
        assert!(doc.is_object(), "{file} is whole JSON: {report}");
        for (_, e) in entries(&doc) {
            if e["command"] == COOGLE {
                shared += 1;
                let args: Vec<&str> = e["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                let server = args
                    .iter()
                    .position(|a| *a == "--server")
                    .map_or("google", |i| args[i + 1]);
                assert!(
                    config["servers"][server].is_object(),
                    "an entry runs upstream {server}, which config.json lacks: {report}"
                );
            }
        }
    }
    if code == "0" && command.starts_with("share") {
        assert_eq!(shared, 4, "exit 0 means all shared: {report}");
    }

    // With space again, the undo gives everything back.
    assert_eq!(read(&out, "undo.code").trim(), "0", "{report}");
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(&claude).unwrap()),
        String::from_utf8_lossy(&claude0),
        "{report}"
    );
    assert_eq!(std::fs::read(&cursor).unwrap(), cursor0, "{report}");
    let config = json_of(&out, "config.after-undo");
    let names: Vec<&String> = config["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["google"], "{report}");
    let ls = read(&out, "ls.after-undo");
    assert!(
        !ls.contains("setup-state.json") && !ls.contains("coogle-tmp"),
        "nothing left recorded, no temp file: {report}"
    );
}

/// Every `mcpServers` entry, top level and per project.
fn entries(doc: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (k, v) in doc["mcpServers"].as_object().into_iter().flatten() {
        out.push((k.clone(), v.clone()));
    }
    for (_, p) in doc["projects"].as_object().into_iter().flatten() {
        for (k, v) in p["mcpServers"].as_object().into_iter().flatten() {
            out.push((k.clone(), v.clone()));
        }
    }
    out
}

/// From nothing free to enough for everything, a page at a time.
const LEVELS: [u64; 10] = [
    0, 2_048, 4_096, 8_192, 12_288, 16_384, 20_480, 24_576, 32_768, 65_536,
];

/// Regression: when the state file could not be written, share only warned, still rewrote the
/// client files and exited 0; once space was freed, unshare left them pointing at upstreams
/// it removed.
#[test]
fn share_on_a_full_config_disk_changes_nothing_it_cannot_record() {
    if !can_run_as_another_user() {
        return;
    }
    for free in LEVELS {
        run_level(free, "share --all --yes", "unshare --all --yes");
    }
}

#[test]
fn setup_on_a_full_config_disk_changes_nothing_it_cannot_record() {
    if !can_run_as_another_user() {
        return;
    }
    let setup = "setup --yes --credentials-source none --no-service --skip-test --skip-verify --client claude-code --client cursor --share-all";
    for free in LEVELS {
        run_level(free, setup, "uninstall --yes");
    }
}
