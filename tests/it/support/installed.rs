//! A daemon run from a copy of this build that a test replaces on disk, as `brew upgrade`,
//! the pkg or `self-update` replace the installed binary.

use std::path::{Path, PathBuf};
use std::process::Child;

use super::fake_github::patched_coogle;
use super::{COOGLE, Env};

/// A daemon running from a copy of this build, which the test can replace on disk as an
/// upgrade would.
pub fn installed_daemon(env: &Env) -> (Child, PathBuf) {
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("coogle");
    super::copy_executable(Path::new(COOGLE), &installed);
    let child = env
        .sealed(&installed)
        .args(["serve", "--log-stderr"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    env.wait_ready();
    (child, installed)
}

/// Put `bytes` in place of `installed`, atomically, as an upgrade does.
pub fn install(installed: &Path, bytes: &[u8]) {
    let tmp = installed.with_extension("new");
    super::write_executable(&tmp, bytes);
    std::fs::rename(&tmp, installed).unwrap();
}

/// The next release: this build, reporting `fake_github::patched_version`.
pub fn newer_coogle(env: &Env) -> Vec<u8> {
    let dir = env.path("patch");
    std::fs::create_dir_all(&dir).unwrap();
    patched_coogle(&dir)
}
