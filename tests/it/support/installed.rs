//! A daemon run from a copy of this build that a test replaces on disk, as `brew upgrade`,
//! the pkg or `self-update` replace the installed binary.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::fake_github::patched_coogle;
use super::{COOGLE, Env};

/// A daemon running from a copy of this build, which the test can replace on disk as an
/// upgrade would.
pub fn installed_daemon(env: &Env) -> (Child, PathBuf) {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("coogle");
    std::fs::copy(COOGLE, &installed).unwrap();
    // Another test's fork may briefly hold the fresh copy open for writing ("text file busy").
    let mut tries = 0;
    let child = loop {
        let spawned = env
            .sealed(&installed)
            .args(["serve", "--log-stderr"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match spawned {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    env.wait_ready();
    (child, installed)
}

/// Put `bytes` in place of `installed`, atomically, as an upgrade does.
pub fn install(installed: &Path, bytes: &[u8]) {
    let tmp = installed.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, installed).unwrap();
}

/// The next release: this build, reporting `fake_github::patched_version`.
pub fn newer_coogle(env: &Env) -> Vec<u8> {
    let dir = env.path("patch");
    std::fs::create_dir_all(&dir).unwrap();
    patched_coogle(&dir)
}
