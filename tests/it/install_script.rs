//! `scripts/install.sh` (POSIX sh) end to end against a fake release download server on
//! 127.0.0.1 serving archives built here: the newest or a chosen version is verified and
//! installed into `$COOGLE_INSTALL_DIR`, and runs; a checksum mismatch installs nothing and
//! leaves an existing binary intact. The script is shellcheck-clean.

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::fake_github::{FakeGithub, release};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install.sh")
}

fn install(github: &FakeGithub, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("sh")
        .arg(script())
        .args(args)
        .env("COOGLE_DOWNLOAD_BASE", &github.base)
        .env("COOGLE_INSTALL_DIR", dir)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env_remove("COOGLE_VERSION")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn version_of(bin: &Path) -> String {
    let out = Command::new(bin).arg("--version").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn installs_the_newest_or_a_chosen_version() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("calls.log");
    let github = FakeGithub::start(vec![
        release(tmp.path(), "9.9.9", &log, false),
        release(tmp.path(), "9.9.8", &log, false),
    ]);
    let dir = tmp.path().join("home/.local/bin");
    let (code, out, err) = install(&github, &dir, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("verified coogle-9.9.9-"), "{out}");
    assert!(out.contains("coogle setup"), "{out}");
    assert!(out.contains("is not on your PATH"), "{out}");
    assert_eq!(version_of(&dir.join("coogle")), "coogle 9.9.9 (test build)");
    assert!(
        github
            .requests()
            .iter()
            .any(|r| r.path == "/latest/download/SHA256SUMS")
    );

    let (code, out, err) = install(&github, &dir, &["--version", "v9.9.8"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(version_of(&dir.join("coogle")), "coogle 9.9.8 (test build)");
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["coogle", "coogle-mcp"],
        "temporary files left behind"
    );
    // The shim's small executable is installed with it, from the same release.
    let shim = fs::read_to_string(dir.join("coogle-mcp")).unwrap();
    assert!(shim.contains("coogle-mcp 9.9.8"), "{shim}");
}

#[test]
fn a_checksum_mismatch_installs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("calls.log");
    let github = FakeGithub::start(vec![release(tmp.path(), "9.9.9", &log, true)]);
    let dir = tmp.path().join("bin");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("coogle"), b"the old binary").unwrap();
    let (code, out, err) = install(&github, &dir, &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(err.contains("nothing was installed"), "{err}");
    assert_eq!(fs::read(dir.join("coogle")).unwrap(), b"the old binary");
    assert!(!log.exists(), "the unverified binary was run");
}

#[test]
fn a_missing_release_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let github = FakeGithub::start(vec![]);
    let (code, _, err) = install(&github, &tmp.path().join("bin"), &["--version", "1.2.3"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("could not download"), "{err}");
}
