//! `coogle self-update` against a fake GitHub releases API and download server on 127.0.0.1,
//! serving archives built here: a newer version is verified, run, swapped in, and the running
//! daemon is restarted from it; the same version is a no-op; a checksum mismatch refuses and
//! leaves the old binary intact; a Homebrew path refuses before any request; --check, --dry-run
//! and --version; GH_TOKEN reaches the server.

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use support::Env;
use support::fake_github::{FakeGithub, release};

struct World {
    env: Env,
    exe: PathBuf,
    original: Vec<u8>,
    log: PathBuf,
}

fn world() -> World {
    let env = Env::with_fake(serde_json::json!({}));
    let exe = env.path("bin/coogle");
    fs::create_dir_all(exe.parent().unwrap()).unwrap();
    fs::copy(support::COOGLE, &exe).unwrap();
    let original = fs::read(&exe).unwrap();
    let log = env.path("new-binary.log");
    World {
        env,
        exe,
        original,
        log,
    }
}

fn self_update(w: &World, github: &FakeGithub, args: &[&str]) -> support::Output {
    let out = w
        .env
        .cmd()
        .arg("self-update")
        .args(args)
        .env("COOGLE_SELF_UPDATE_EXE", &w.exe)
        .env("COOGLE_UPDATE_API_URL", &github.base)
        .env("GH_TOKEN", "test-token")
        .env_remove("HOMEBREW_PREFIX")
        .output()
        .unwrap();
    support::Output {
        args: args.iter().map(|s| s.to_string()).collect(),
        status: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_newer_version_is_verified_swapped_in_and_the_daemon_restarted() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![
        release(&dir, "9.9.9", &w.log, false),
        release(&dir, "0.1.0", &w.log, false),
    ]);
    let daemon = w.env.daemon();
    w.env.wait_ready();
    let old_pid = daemon.pid();

    let out = self_update(&w, &github, &["--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("verified coogle-9.9.9-"), "{out}");
    assert!(
        out.stdout.contains("the new binary runs: coogle 9.9.9"),
        "{out}"
    );
    assert!(out.stdout.contains("from 0.1.0 to 9.9.9"), "{out}");
    assert!(out.stdout.contains(&format!("pid {old_pid} →")), "{out}");

    // The new binary is in place, executable, and runs.
    let v = Command::new(&w.exe).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        "coogle 9.9.9 (test build)"
    );
    assert_eq!(
        fs::metadata(&w.exe).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let leftovers: Vec<_> = fs::read_dir(w.exe.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        leftovers,
        ["coogle"],
        "temporary files left beside the binary"
    );

    // The daemon now running was started from the new binary.
    let calls = fs::read_to_string(&w.log).unwrap();
    assert!(calls.lines().any(|l| l.starts_with("serve")), "{calls}");
    let status = w.env.run(&["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_ne!(
        status["daemon"]["pid"],
        serde_json::json!(old_pid),
        "{status}"
    );

    // The token went along with every request.
    let requests = github.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.path.starts_with("/assets/v9.9.9/coogle-9.9.9"))
    );
    assert!(
        requests
            .iter()
            .all(|r| r.authorization.as_deref() == Some("token test-token")),
        "{requests:?}"
    );
}

#[test]
fn the_same_version_is_a_no_op() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![release(&dir, "0.1.0", &w.log, false)]);
    let out = self_update(&w, &github, &["--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("coogle 0.1.0 is up to date"), "{out}");
    assert_eq!(fs::read(&w.exe).unwrap(), w.original);
    assert!(
        !github
            .requests()
            .iter()
            .any(|r| r.path.starts_with("/assets/"))
    );
}

#[test]
fn a_checksum_mismatch_refuses_and_keeps_the_old_binary() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![release(&dir, "9.9.9", &w.log, true)]);
    let out = self_update(&w, &github, &["--yes"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stderr.contains("checksum mismatch"), "{out}");
    assert!(out.stderr.contains("nothing was replaced"), "{out}");
    assert_eq!(fs::read(&w.exe).unwrap(), w.original);
    assert!(!w.log.exists(), "the unverified binary was run");
}

#[test]
fn a_homebrew_install_refuses_before_asking_github() {
    let w = world();
    let github = FakeGithub::start(vec![]);
    let cellar = w.env.path("homebrew/Cellar/coogle/0.1.0/bin/coogle");
    fs::create_dir_all(cellar.parent().unwrap()).unwrap();
    fs::copy(support::COOGLE, &cellar).unwrap();
    let out = w
        .env
        .cmd()
        .args(["self-update", "--yes"])
        .env("COOGLE_SELF_UPDATE_EXE", &cellar)
        .env("COOGLE_UPDATE_API_URL", &github.base)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("managed by Homebrew"), "{stderr}");
    assert!(stderr.contains("brew upgrade coogle"), "{stderr}");
    assert!(github.requests().is_empty());
}

#[test]
fn check_dry_run_and_a_chosen_version() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![
        release(&dir, "9.9.9", &w.log, false),
        release(&dir, "9.9.8", &w.log, false),
    ]);
    let out = self_update(&w, &github, &["--check"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout
            .contains("coogle 9.9.9 is available (this is 0.1.0)"),
        "{out}"
    );
    assert!(
        !github
            .requests()
            .iter()
            .any(|r| r.path.starts_with("/assets/"))
    );

    let out = self_update(&w, &github, &["--dry-run"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stdout.contains("dry run: would replace"), "{out}");
    assert_eq!(fs::read(&w.exe).unwrap(), w.original);

    let out = self_update(&w, &github, &["--version", "9.9.8", "--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    let v = Command::new(&w.exe).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        "coogle 9.9.8 (test build)"
    );
    assert!(out.stdout.contains("no daemon was running"), "{out}");

    let out = self_update(&w, &github, &["--version", "7.0.0", "--yes"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(out.stderr.contains("no release 7.0.0"), "{out}");
}

#[test]
fn without_yes_and_without_a_terminal_it_asks_for_yes() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![release(&dir, "9.9.9", &w.log, false)]);
    let out = self_update(&w, &github, &[]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("--yes"), "{out}");
    assert_eq!(fs::read(&w.exe).unwrap(), w.original);
}
