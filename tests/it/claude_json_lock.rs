//! Writing `~/.claude.json` under Claude Code's own lock: the final re-read and the rename
//! happen while coogle holds `~/.claude.json.lock` (an mkdir lock, as Claude Code 2.1.328 and
//! npm's proper-lockfile take it), a stale lock is taken over, a held one waited for, and a
//! write that another program's rename undid is never reported as done.

use crate::support;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use coogle::fsutil::{FsError, Moment, Written};
use coogle::setup::client_config::{self, ClientKind, Shim, Upstream};
use serde_json::{Value, json};
use support::{Env, Output};

const SECRET: &str = "GOCSPX-lock-test-secret-0123456789";

/// Plays Claude Code: for as long as `stop` does not exist, take the mkdir lock, re-read the
/// file, bump its own counter, write `<file>.tmp.<pid>.<hex>` (0600, O_EXCL), rename, rmdir.
/// Prints `lost ...` whenever a value it wrote (its counter, or coogle's entry once seen) is
/// gone at its next read, and `wrote N` at the end.
const WRITER: &str = r#"
import json, os, sys, time, secrets
path, stop = sys.argv[1], sys.argv[2]
lock = path + ".lock"
n, seen_coogle = 0, False
deadline = time.time() + 60
while not os.path.exists(stop) and time.time() < deadline:
    while True:
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            time.sleep(0.001)
    try:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("writerCounter", 0) != n:
            print("lost counter", n, doc.get("writerCounter"), flush=True)
        entry = doc.get("mcpServers", {}).get("google-workspace", {})
        is_coogle = entry.get("command", "").endswith("/coogle")
        if seen_coogle and not is_coogle:
            print("lost coogle's entry", flush=True)
        seen_coogle = seen_coogle or is_coogle
        n += 1
        doc["writerCounter"] = n
        tmp = "%s.tmp.%d.%s" % (path, os.getpid(), secrets.token_hex(4))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2)
        os.rename(tmp, path)
    finally:
        os.rmdir(lock)
    time.sleep(0.002)
print("wrote", n, "seen", seen_coogle, flush=True)
"#;

fn setup_env() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    let claude = env.home.join(".claude.json");
    fs::write(&claude, support::client_fixture("claude.json")).unwrap();
    (env, claude)
}

fn run_setup(env: &Env) -> Output {
    let mut cmd = env.cmd();
    cmd.env("SETUP_TEST_SECRET", SECRET)
        .env("COOGLE_SYSTEMCTL", env.path("no-systemctl"))
        .env("CI", "true");
    Output::of(
        cmd,
        &[
            "setup",
            "--yes",
            "--no-service",
            "--skip-verify",
            "--skip-test",
            "--client-id",
            "999999999999-lock.apps.googleusercontent.com",
            "--client-secret-env",
            "SETUP_TEST_SECRET",
        ],
    )
}

fn patched(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

fn is_coogle(doc: &Value) -> bool {
    doc["mcpServers"]["google-workspace"]["command"]
        .as_str()
        .is_some_and(|c| c.ends_with("/coogle"))
}

/// Regression: setup's re-read and rename were not under Claude Code's lock, so a Claude Code
/// writing meanwhile could lose setup's entry or have its own write rolled back.
#[test]
fn a_writer_rewriting_continuously_under_the_lock_loses_nothing() {
    let (env, claude) = setup_env();
    let stop = env.path("stop-writer");
    // However the test ends, the writer stops (it also gives up by itself after 60 s).
    struct Stop(std::path::PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = fs::write(&self.0, b"");
        }
    }
    let stop_guard = Stop(stop.clone());
    let writer = Command::new("python3")
        .args(["-c", WRITER])
        .arg(&claude)
        .arg(&stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it get going, then run setup in the middle of its writes.
    support::wait_file(
        "the writer's first write",
        &claude,
        Duration::from_secs(10),
        |t| serde_json::from_str::<Value>(t).is_ok_and(|v| v.get("writerCounter").is_some()),
    );
    let out = run_setup(&env);
    // A few more rounds of the writer after setup finished.
    std::thread::sleep(Duration::from_millis(300));
    drop(stop_guard);
    let said = writer.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.status.success(),
        "{report} {}",
        String::from_utf8_lossy(&said.stderr)
    );
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        !report.contains("lost"),
        "the writer lost a write: {report}"
    );
    assert!(report.contains("seen True"), "{report}");
    let doc = patched(&claude);
    assert!(is_coogle(&doc), "setup's change did not survive: {doc}");
    assert!(doc["writerCounter"].as_u64().unwrap() > 0);
    assert!(!claude.with_extension("json.lock").exists());
}

fn lock_dir(claude: &Path) -> std::path::PathBuf {
    claude.with_file_name(".claude.json.lock")
}

#[test]
fn a_stale_lock_is_taken_over() {
    let (env, claude) = setup_env();
    let lock = lock_dir(&claude);
    fs::create_dir(&lock).unwrap();
    // Left by a Claude Code that died a minute ago.
    fs::File::open(&lock)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    let started = Instant::now();
    let out = run_setup(&env);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(started.elapsed() < Duration::from_secs(10), "{out}");
    assert!(is_coogle(&patched(&claude)));
    assert!(!lock.exists());
}

#[test]
fn a_held_lock_makes_setup_wait_then_succeed() {
    let (env, claude) = setup_env();
    let original = fs::read(&claude).unwrap();
    let lock = lock_dir(&claude);
    fs::create_dir(&lock).unwrap();
    // Held until setup is at its final step (its backup and temp file are written), and a
    // second longer: the file must not change while the lock is held.
    let holder = {
        let (lock, claude, home) = (lock.clone(), claude.clone(), env.home.clone());
        std::thread::spawn(move || {
            // (A setup that ignores the lock shows up as a changed file instead.)
            let at_final_step = || {
                fs::read(&claude).unwrap() != original
                    || fs::read_dir(&home).unwrap().flatten().any(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with(".claude.json.coogle-tmp")
                    })
            };
            support::wait_for("setup's temp file", Duration::from_secs(60), at_final_step);
            std::thread::sleep(Duration::from_secs(1));
            let untouched = fs::read(&claude).unwrap() == original;
            fs::remove_dir(&lock).unwrap();
            untouched
        })
    };
    let out = run_setup(&env);
    let untouched = holder.join().unwrap();
    assert_eq!(out.status, Some(0), "{out}");
    assert!(untouched, "setup renamed while the lock was held: {out}");
    assert!(is_coogle(&patched(&claude)));
    assert!(!lock.exists());
}

fn shim() -> Shim {
    Shim::new(
        Upstream::Google,
        Path::new("/opt/homebrew/opt/coogle/bin/coogle"),
    )
}

/// Regression: a rename by another program right after setup's (one that does not take the
/// lock, writing what it had read before) undid setup's change, and setup reported success.
#[test]
fn a_write_undone_by_another_rename_is_never_reported_as_done() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude.json");
    let original = support::client_fixture("claude.json");

    // Undone every time: an error, and the file is as the other program left it.
    fs::write(&path, &original).unwrap();
    let err = client_config::patch_file_with_hook(
        &path,
        ClientKind::ClaudeCode,
        &shim(),
        &mut |moment, target| {
            if moment == Moment::AfterRename {
                fs::write(target, &original).unwrap();
            }
        },
    )
    .unwrap_err();
    assert!(matches!(err, FsError::Changed { .. }), "{err:?}");
    assert!(!is_coogle(&patched(&path)));

    // Undone once: written again, and reported with its changes.
    fs::write(&path, &original).unwrap();
    let mut undone = false;
    let p = client_config::patch_file_with_hook(
        &path,
        ClientKind::ClaudeCode,
        &shim(),
        &mut |moment, target| {
            if moment == Moment::AfterRename && !undone {
                undone = true;
                fs::write(target, &original).unwrap();
            }
        },
    )
    .unwrap();
    assert!(is_coogle(&patched(&path)));
    assert_eq!(p.changes.len(), 2);
    assert!(matches!(p.written, Written::Replaced { .. }));

    // Replaced by a write that kept setup's change (and added its own key): done, with the
    // changes recorded, so uninstall can revert them.
    fs::write(&path, &original).unwrap();
    let p = client_config::patch_file_with_hook(
        &path,
        ClientKind::ClaudeCode,
        &shim(),
        &mut |moment, target| {
            if moment == Moment::AfterRename {
                let mut doc = patched(target);
                if doc.get("merged").is_none() {
                    doc["merged"] = json!(true);
                    fs::write(target, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
                }
            }
        },
    )
    .unwrap();
    let doc = patched(&path);
    assert!(is_coogle(&doc) && doc["merged"] == true, "{doc}");
    assert_eq!(p.changes.len(), 2);
    assert!(matches!(p.written, Written::Replaced { .. }));
}

/// A world with one user-scope stdio entry to share.
fn share_env() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write_fake_config(json!({}));
    let claude = env.home.join(".claude.json");
    let fake = support::fake_mcp();
    let doc = json!({"mcpServers": {"memory": {"type": "stdio", "command": fake,
                                               "args": ["memory"], "env": {}}}});
    fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    (env, claude)
}

/// `coogle share` killed while it holds `~/.claude.json.lock`: the lock stays, with coogle's
/// record of who made it beside it.
fn kill_while_locked(env: &Env, claude: &Path) {
    let mut cmd = env.cmd();
    cmd.env("COOGLE_CRASH_AT", "locked");
    let out = Output::of(cmd, &["share", "--all", "--yes"]);
    assert_eq!(out.status, None, "killed while holding the lock: {out}");
    assert!(lock_dir(claude).is_dir(), "{out}");
    assert!(
        claude
            .with_file_name(".claude.json.lock.coogle-owner")
            .exists()
    );
}

/// Regression: a SIGKILLed coogle left `~/.claude.json.lock` behind, and every later write
/// (coogle's own, Claude Code's) waited out the 10 s stale time. The next coogle proves the
/// lock is its own dead process's and takes it over at once.
#[test]
fn a_lock_a_killed_coogle_left_is_taken_over_at_once() {
    let (env, claude) = share_env();
    kill_while_locked(&env, &claude);
    let started = Instant::now();
    let out = env.run(&["share", "--all", "--yes"]);
    let took = started.elapsed();
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        took < Duration::from_secs(5),
        "took {took:?}: the lock was waited out instead of taken over\n{out}"
    );
    assert!(
        out.stdout.contains("removed the lock"),
        "the takeover is said: {out}"
    );
    assert_eq!(
        patched(&claude)["mcpServers"]["memory"]["command"],
        support::COOGLE
    );
    assert!(!lock_dir(&claude).exists());
}

/// The same with Claude Code's own CLI doing the writes (`claude mcp remove`, `add-json`):
/// coogle clears its dead process's lock before it runs the CLI, so Claude Code, which waits
/// its stale time (10 s and more) for any lock it finds, is not held up. Each `claude`
/// invocation is timed by a wrapper.
#[test]
fn a_killed_coogles_lock_does_not_hold_up_claude_mcp_add_json() {
    let Some(claude_bin) = support::claude_cli() else {
        return;
    };
    let (env, claude) = share_env();
    kill_while_locked(&env, &claude);
    let times = env.path("claude-times");
    let wrapper = env.path("claude-timed");
    support::write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\nstart=$(date +%s%N)\n'{}' \"$@\"\nrc=$?\necho \"$1 $2 $(( ($(date +%s%N) - start) / 1000000 ))\" >> '{}'\nexit $rc\n",
            claude_bin.display(),
            times.display()
        ),
    );
    let mut cmd = env.cmd();
    cmd.env("COOGLE_CLAUDE_CLI", &wrapper);
    let out = Output::of(cmd, &["share", "--all", "--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout.contains("claude mcp add-json --scope user"),
        "{out}"
    );
    let log = fs::read_to_string(&times).unwrap();
    let calls: Vec<(String, u64)> = log
        .lines()
        .map(|l| {
            let (what, ms) = l.rsplit_once(' ').unwrap();
            (what.to_owned(), ms.parse().unwrap())
        })
        .collect();
    assert!(
        calls.iter().any(|(w, _)| w == "mcp add-json"),
        "{log}\n{out}"
    );
    for (what, ms) in &calls {
        // Claude Code waits 10 s and more for a lock it finds; a cold start takes a second or
        // two, more on a loaded machine.
        assert!(
            *ms < 8_000,
            "`claude {what}` took {ms} ms: held up by the lock\n{log}"
        );
    }
    let stored = &patched(&claude)["mcpServers"]["memory"];
    assert_eq!(stored["command"], support::COOGLE, "{stored}");
    assert!(!lock_dir(&claude).exists());
}
