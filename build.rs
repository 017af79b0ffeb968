//! Puts what `coogle --version` says after the package version into `COOGLE_VERSION_DETAIL`:
//! the git revision (`abc1234`, with `-dirty` when tracked files had changes) and its commit
//! date, when this is a git checkout of coogle itself (not a release tarball, nor a crate
//! unpacked inside some other repository) and git runs; and `pgo` when the build is given a
//! profile for profile-guided optimization (`-Cprofile-use`, as `scripts/pgo` does), so an
//! archive says which build it holds: ` (abc1234 2026-11-22, pgo)`, ` (pgo)`, or nothing. It
//! never fails the build.

#[path = "src/build_flags.rs"]
mod build_flags;

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/build_flags.rs");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // Only this package's own checkout counts: a source tarball unpacked inside another
    // repository must not claim that repository's revision.
    let own_checkout = git(&manifest_dir, &["rev-parse", "--show-toplevel"])
        .and_then(|top| std::fs::canonicalize(top).ok())
        .is_some_and(|top| std::fs::canonicalize(&manifest_dir).is_ok_and(|m| m == top));
    let (mut rev, mut date) = (String::new(), String::new());
    if own_checkout {
        // Rebuild when HEAD moves: HEAD itself, the branch it points at (loose or packed; in a
        // worktree these live in the common directory, which `--git-path` resolves), and the
        // index (a commit or `git add` changes it).
        let mut watch = vec![
            "HEAD".to_owned(),
            "packed-refs".to_owned(),
            "index".to_owned(),
        ];
        if let Some(branch) = git(&manifest_dir, &["symbolic-ref", "-q", "HEAD"]) {
            watch.push(branch);
        }
        for item in watch {
            if let Some(path) = git(&manifest_dir, &["rev-parse", "--git-path", &item]) {
                let path = manifest_dir.join(path);
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
        if let Some(short) = git(&manifest_dir, &["rev-parse", "--short=7", "HEAD"]) {
            let dirty = git(
                &manifest_dir,
                &["status", "--porcelain", "--untracked-files=no"],
            )
            .is_some_and(|s| !s.is_empty());
            rev = if dirty {
                format!("{short}-dirty")
            } else {
                short
            };
            date = git(&manifest_dir, &["log", "-1", "--format=%cs"]).unwrap_or_default();
        }
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let mut parts = Vec::new();
    if !rev.is_empty() {
        parts.push(format!("{rev} {date}"));
    }
    if build_flags::given_profile(&flags) {
        parts.push("pgo".to_owned());
    }
    let detail = if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    };
    println!("cargo:rustc-env=COOGLE_VERSION_DETAIL={detail}");
}
