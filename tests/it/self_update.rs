//! `coogle self-update` against a fake GitHub releases API and download server on 127.0.0.1,
//! serving archives built here: a newer version is verified, run, swapped in, and the running
//! daemon is restarted from it; the same version is a no-op; a checksum mismatch refuses and
//! leaves the old binary intact; a Homebrew path refuses before any request; --check, --dry-run
//! and --version; GH_TOKEN reaches the server.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::Env;
use support::fake_github::{FakeGithub, patched_coogle, patched_version, release, release_of};

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
    support::copy_executable(Path::new(support::COOGLE), &exe);
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
    let mut cmd = w.env.cmd();
    cmd.arg("self-update")
        .env("COOGLE_SELF_UPDATE_EXE", &w.exe)
        .env("COOGLE_UPDATE_API_URL", &github.base)
        .env("GH_TOKEN", "test-token")
        .env_remove("HOMEBREW_PREFIX");
    support::Output::of(cmd, args)
}

/// `coogle` at `exe` with this env's settings (the updated binary, say).
fn cmd_at(env: &Env, exe: &Path) -> Command {
    let template = env.cmd();
    let mut c = Command::new(exe);
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.stdin(std::process::Stdio::null());
    c
}

/// The whole path with a real binary: the release holds coogle itself patched to say the next
/// version (see `patched_coogle`), a daemon of the old version is serving, and after the update
/// the daemon that answers is the new version, started from the swapped-in file.
#[test]
fn a_newer_version_is_verified_swapped_in_and_the_daemon_restarted() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let new = patched_version();
    let github = FakeGithub::start(vec![
        release_of(&dir, &new, &patched_coogle(&dir), false),
        release(&dir, "0.1.0", &w.log, false),
    ]);
    let daemon = w.env.daemon();
    w.env.wait_ready();
    let old_pid = daemon.pid();
    let before = w.env.run(&["status", "--json"]);
    let before: serde_json::Value = serde_json::from_str(&before.stdout).unwrap();
    assert_eq!(before["daemon"]["version"], "0.1.0");

    let out = self_update(&w, &github, &["--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout.contains(&format!("verified coogle-{new}-")),
        "{out}"
    );
    assert!(
        out.stdout
            .contains(&format!("the new binary runs: coogle {new}")),
        "{out}"
    );
    assert!(
        out.stdout.contains(&format!("from 0.1.0 to {new}")),
        "{out}"
    );
    assert!(out.stdout.contains(&format!("pid {old_pid} →")), "{out}");

    // The new binary is in place, executable, and runs.
    let v = Command::new(&w.exe).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&v.stdout).starts_with(&format!("coogle {new}")),
        "{v:?}"
    );
    assert_eq!(
        fs::metadata(&w.exe).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let mut leftovers: Vec<_> = fs::read_dir(w.exe.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    leftovers.sort();
    assert_eq!(
        leftovers,
        ["coogle", "coogle-mcp"],
        "temporary files left beside the binary"
    );
    // The shim's small executable came with it (see `cli::shim_exe`).
    let shim = fs::read_to_string(w.exe.with_file_name("coogle-mcp")).unwrap();
    assert!(shim.contains(&format!("coogle-mcp {new}")), "{shim}");

    // The daemon now serving is the new version, and `coogle status` (the new one) says so.
    let status = cmd_at(&w.env, &w.exe).arg("status").output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.starts_with(&format!("coogle daemon {new} · pid ")),
        "{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(!text.contains(&format!("pid {old_pid} ")), "{text}");
    let new_pid = support::control(&w.env.socket, "info", serde_json::Value::Null).unwrap()["pid"]
        .as_u64()
        .unwrap();
    let running = support::exe_of(new_pid as u32);
    assert_eq!(
        running,
        fs::canonicalize(&w.exe).unwrap(),
        "the new daemon runs another binary"
    );
    assert!(!w.log.exists(), "the 0.1.0 release was run");

    // The token went along with every request.
    let requests = github.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.path.starts_with(&format!("/assets/v{new}/coogle-{new}")))
    );
    assert!(
        requests
            .iter()
            .all(|r| r.authorization.as_deref() == Some("token test-token")),
        "{requests:?}"
    );
}

/// With a service installed and running, the updater restarts the daemon through the service
/// manager and says so: `systemctl --user restart` on Linux, `launchctl kickstart -k` on macOS,
/// each a stand-in here that restarts it the way the real one would: stop, then start the
/// service's program.
#[test]
fn an_installed_service_is_restarted_through_the_service_manager() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let github = FakeGithub::start(vec![release(&dir, "9.9.9", &w.log, false)]);
    let service = w.env.service_file();
    fs::create_dir_all(service.parent().unwrap()).unwrap();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let (text, restart, said) = if cfg!(target_os = "macos") {
        (
            format!(
                "<plist version=\"1.0\"><dict><key>ProgramArguments</key><array><string>{}</string><string>serve</string></array></dict></plist>\n",
                w.exe.display()
            ),
            format!("kickstart -k gui/{uid}/dev.coogle.daemon"),
            format!("launchctl kickstart -k gui/{uid}/dev.coogle.daemon"),
        )
    } else {
        (
            format!("[Service]\nExecStart={} serve\n", w.exe.display()),
            "--user restart coogle.service".to_owned(),
            "systemctl --user restart coogle.service".to_owned(),
        )
    };
    fs::write(&service, text).unwrap();
    let calls = w.env.path("manager.log");
    let manager = w.env.path("manager");
    let daemon = w.env.daemon();
    let old_pid = daemon.pid();
    // Loaded and running (launchctl `print` says `state = running`; systemctl's `is-active`
    // exits 0). The restart does what systemd and launchd do: stop the daemon, wait until its
    // process has exited (`coogle stop` returns once the socket is gone, while the old daemon
    // may still hold its lock for a moment), then start the service's program detached.
    support::write_executable(
        &manager,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{calls}'\ncase \"$*\" in\n\
             'print gui/'*/dev.coogle.daemon) echo 'state = running' ;;\n\
             '{restart}') '{exe}' stop >/dev/null 2>&1\n\
             i=0; while [ $i -lt 400 ] && ps -o stat= -p {old_pid} 2>/dev/null | grep -q '^[^Z]'; do sleep 0.05; i=$((i + 1)); done\n\
             '{exe}' serve </dev/null >/dev/null 2>&1 &\n;;\nesac\nexit 0\n",
            calls = calls.display(),
            exe = w.exe.display()
        ),
    );

    let out = w
        .env
        .cmd()
        .args(["self-update", "--yes"])
        .env("COOGLE_SELF_UPDATE_EXE", &w.exe)
        .env("COOGLE_UPDATE_API_URL", &github.base)
        .env("COOGLE_SYSTEMCTL", &manager)
        .env("COOGLE_LAUNCHCTL", &manager)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("restarted the daemon through {said}")),
        "{stdout}{stderr}"
    );
    let calls = fs::read_to_string(&calls).unwrap();
    assert!(calls.lines().any(|l| l == restart), "{calls}");
    // The daemon the service manager started came from the new file (it logs each call).
    support::wait_control(
        &w.env.socket,
        "info",
        "the restarted daemon",
        Duration::from_secs(20),
        |i| i["pid"].as_u64() != Some(u64::from(old_pid)),
    );
    let ran = fs::read_to_string(&w.log).unwrap();
    assert!(ran.lines().any(|l| l == "serve"), "{ran}");
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
    support::copy_executable(Path::new(support::COOGLE), &cellar);
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

/// The daemon runs the very file updated: it becomes the new version in place (same pid), and
/// the server child a session had is the one that answers it after.
#[test]
fn a_daemon_running_the_updated_file_upgrades_in_place_keeping_its_children() {
    let w = world();
    let dir = w.env.path("releases");
    fs::create_dir_all(&dir).unwrap();
    let new = patched_version();
    let github = FakeGithub::start(vec![release_of(&dir, &new, &patched_coogle(&dir), false)]);
    let mut daemon = cmd_at(&w.env, &w.exe)
        .args(["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    w.env.wait_ready();
    let mut s = w.env.shim();
    s.initialize();
    let child = support::text(&s.call("pid", serde_json::json!({})));

    let out = self_update(&w, &github, &["--yes"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout.contains(&format!(
            "restarted the coogle daemon in place: coogle 0.1.0 → {new}, pid {} kept, 1 running server kept",
            daemon.id()
        )),
        "{out}"
    );
    assert!(!out.stderr.contains("warning"), "{out}");
    assert_eq!(support::text(&s.call("pid", serde_json::json!({}))), child);
    let info = support::control(&w.env.socket, "info", serde_json::Value::Null).unwrap();
    assert_eq!(info["version"], new.as_str(), "{info}");
    drop(s);
    let _ = w.env.run(&["stop"]);
    support::wait_for("the daemon to exit", Duration::from_secs(30), || {
        daemon.try_wait().unwrap().is_some()
    });
}
