//! `coogle uninstall`: the service removed, each client entry setup replaced restored (the
//! file's exact bytes when nothing else changed), keys it did not write untouched, and
//! config.json removed only with --remove-config.

use crate::support;

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use support::{Env, fake_mcp};

fn fixture(name: &str) -> Vec<u8> {
    support::client_fixture(name)
}

fn installed() -> (Env, PathBuf, PathBuf, Vec<u8>, Vec<u8>) {
    let env = Env::new();
    env.write_config(
        &json!({"servers": {"google": {"command": fake_mcp(), "credentials": {"source": "none"}}}}),
    );
    let claude = env.home.join(".claude.json");
    let original = fixture("claude.json");
    fs::write(&claude, &original).unwrap();
    let cursor = env.home.join(".cursor/mcp.json");
    fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    let cursor_original = fixture("cursor_mcp.json");
    fs::write(&cursor, &cursor_original).unwrap();
    let out = env
        .cmd()
        .args([
            "setup",
            "--yes",
            "--skip-test",
            "--skip-verify",
            "--client",
            "claude-code",
            "--client",
            "cursor",
        ])
        .env("COOGLE_SYSTEMCTL", env.path("none"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_ne!(fs::read(&claude).unwrap(), original);
    (env, claude, cursor, original, cursor_original)
}

fn uninstall(env: &Env, extra: &[&str]) -> support::Output {
    let mut args = vec!["uninstall", "--yes"];
    args.extend_from_slice(extra);
    let mut cmd = env.cmd();
    cmd.env("COOGLE_SYSTEMCTL", env.path("none"));
    support::Output::of(cmd, &args)
}

#[test]
fn restores_the_exact_bytes_and_removes_the_service() {
    let (env, claude, cursor, original, cursor_original) = installed();
    let unit = env.service_file();
    assert!(unit.exists());
    let out = uninstall(&env, &[]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(fs::read(&claude).unwrap(), original, "{out}");
    assert_eq!(fs::read(&cursor).unwrap(), cursor_original, "{out}");
    assert!(!unit.exists());
    assert!(env.config.exists(), "config kept without --remove-config");
    assert!(!env.home.join(".config/coogle/setup-state.json").exists());
    // Twice is harmless.
    let again = uninstall(&env, &[]);
    assert_eq!(again.status, Some(0), "{again}");
    assert_eq!(fs::read(&claude).unwrap(), original);
}

#[test]
fn keys_written_by_others_since_setup_are_kept() {
    let (env, claude, _, original, _) = installed();
    let mut doc: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    doc["numStartups"] = json!(500);
    doc["mcpServers"]["added-later"] = json!({"command": "x"});
    fs::write(&claude, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = uninstall(&env, &["--remove-config"]);
    assert_eq!(out.status, Some(0), "{out}");
    let after: Value = serde_json::from_slice(&fs::read(&claude).unwrap()).unwrap();
    let before: Value = serde_json::from_slice(&original).unwrap();
    assert_eq!(after["numStartups"], 500);
    assert_eq!(after["mcpServers"]["added-later"], json!({"command": "x"}));
    assert_eq!(
        after["mcpServers"]["google-workspace"],
        before["mcpServers"]["google-workspace"]
    );
    assert_eq!(
        after["projects"]["/home/grace/src/mail-triage"],
        before["projects"]["/home/grace/src/mail-triage"]
    );
    let order: Vec<_> = after["mcpServers"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        order,
        ["filesystem", "google-workspace", "sentry", "added-later"]
    );
    assert!(!env.config.exists(), "--remove-config");
}

#[test]
fn without_a_record_nothing_is_touched() {
    let env = Env::new();
    let claude = env.home.join(".claude.json");
    let bytes = br#"{"mcpServers": {"coogle": {"command": "/usr/bin/coogle", "args": ["mcp"]}}}"#;
    fs::write(&claude, bytes).unwrap();
    let out = uninstall(&env, &[]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(fs::read(&claude).unwrap(), bytes);
}

#[test]
fn needs_yes_without_a_terminal() {
    let env = Env::new();
    let out = env.run(&["uninstall"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("--yes"), "{out}");
}

/// Every file under `dir`, with its bytes (directories as `None`).
fn tree(dir: &std::path::Path) -> std::collections::BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                out.insert(p.clone(), None);
                todo.push(p);
            } else {
                out.insert(p.clone(), Some(fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out
}

/// Installed (service file, client entries), a daemon running with its upstream started (so
/// it has written its cache and log), and a `coogle mcp` session open, as Claude Code keeps
/// one.
fn in_use() -> (Env, PathBuf, Vec<u8>, support::Shim) {
    let (env, claude, _, original, _) = installed();
    let mut shim = env.shim();
    shim.initialize();
    env.wait_upstream_ready();
    (env, claude, original, shim)
}

fn daemon_pid(env: &Env) -> Option<u64> {
    support::control(&env.socket, "info", Value::Null)
        .ok()
        .and_then(|i| i["pid"].as_u64())
}

/// Regression: uninstall stopped the daemon first; the open session's shim started a new one
/// at once, which outlived the session. Now uninstall refuses while sessions are open, naming
/// them and changing nothing; with --force it gives the entries back, ends the sessions' coogle
/// connections, stops the daemon last and waits until it has exited, and no daemon comes back.
#[test]
fn uninstall_with_a_session_open_refuses_or_with_force_leaves_no_daemon() {
    let (env, claude, original, mut shim) = in_use();
    let pid = daemon_pid(&env).expect("a daemon runs");
    let patched = fs::read(&claude).unwrap();

    let out = uninstall(&env, &[]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stdout.contains("test-client 9.9.9"), "names it: {out}");
    assert!(
        out.stdout.contains(&format!("pid {}", shim.child.id())),
        "{out}"
    );
    assert!(out.stderr.contains("--force"), "{out}");
    assert_eq!(
        fs::read(&claude).unwrap(),
        patched,
        "nothing changed: {out}"
    );
    assert_eq!(daemon_pid(&env), Some(pid), "{out}");

    let out = uninstall(&env, &["--force"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert_eq!(fs::read(&claude).unwrap(), original, "{out}");
    assert!(
        !support::pid_alive(pid as u32),
        "waited for the daemon to exit: {out}"
    );
    let said = out.stdout.find("stopped the daemon").expect("said");
    let gave_back = out.stdout.find("restored").expect("said");
    assert!(gave_back < said, "entries first, daemon last: {out}");
    // The session's shim was ended and started nothing.
    support::wait_until(
        "the shim to exit",
        std::time::Duration::from_secs(10),
        || match shim.child.try_wait().unwrap() {
            Some(_) => Ok(()),
            None => Err(support::describe_process(shim.child.id())),
        },
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(daemon_pid(&env), None, "a daemon came back: {out}");
}

/// Regression: backups (those of config.json hold the OAuth secret), the cache, the log and
/// an empty `~/.config/systemd/user` stayed after uninstall, none of them mentioned. Without
/// --purge uninstall lists them; with it (and --remove-config) nothing of coogle's is left.
#[test]
fn purge_leaves_nothing_and_without_it_uninstall_says_what_stays() {
    for purge in [false, true] {
        let (env, claude, original, shim) = in_use();
        drop(shim);
        let cache = env.home.join(".cache/coogle");
        let logs = env.log.parent().unwrap().to_path_buf();
        let units = env.home.join(".config/systemd/user");
        assert!(cache.is_dir() && logs.is_dir() && units.is_dir());
        let args: &[&str] = if purge {
            &["--purge", "--remove-config"]
        } else {
            &[]
        };
        let out = uninstall(&env, args);
        assert_eq!(out.status, Some(0), "{out}");
        assert_eq!(fs::read(&claude).unwrap(), original, "{out}");
        let left: Vec<PathBuf> = tree(&env.home)
            .into_keys()
            .filter(|p| {
                let s = p.to_string_lossy();
                s.contains("coogle") || s.contains("systemd")
            })
            .collect();
        if purge {
            assert!(left.is_empty(), "left behind: {left:#?}\n{out}");
            assert!(out.stdout.contains("removed the cache"), "{out}");
        } else {
            for what in [
                format!("backups of {}", claude.display()),
                format!("backup of {}", env.config.display()),
                format!("the cache {}", cache.display()),
                format!("the log directory {}", logs.display()),
                format!("{} (empty; setup created it)", units.display()),
                "--purge".to_owned(),
            ] {
                assert!(out.stdout.contains(&what), "{what} not listed: {out}");
            }
            assert!(cache.is_dir() && units.is_dir(), "{out}");
        }
    }
}

/// `uninstall --dry-run --purge --force` says what it would do, and changes nothing: not a
/// file under HOME, not the daemon.
#[test]
fn uninstall_dry_run_changes_nothing() {
    let (env, _claude, _, _shim) = in_use();
    let pid = daemon_pid(&env).expect("a daemon runs");
    let before = tree(&env.home);
    let mut cmd = env.cmd();
    cmd.env("COOGLE_SYSTEMCTL", env.path("none"));
    // No --yes: a dry run never asks, terminal or not.
    let out = support::Output::of(
        cmd,
        &[
            "uninstall",
            "--dry-run",
            "--purge",
            "--force",
            "--remove-config",
        ],
    );
    assert_eq!(out.status, Some(0), "{out}");
    for what in [
        "would be restored",
        "would stop, disable and remove",
        &format!("would stop the daemon (pid {pid})"),
        "would end the coogle connections of 1 agent session",
        "would remove the cache",
        "dry run: nothing changed",
    ] {
        assert!(out.stdout.contains(what), "{what}: {out}");
    }
    let after = tree(&env.home);
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .filter(|p| !p.starts_with(env.log.parent().unwrap()))
        .collect();
    assert!(changed.is_empty(), "changed: {changed:#?}\n{out}");
    assert_eq!(daemon_pid(&env), Some(pid));
}
