//! Puts the git revision into `COOGLE_GIT_REV` for `coogle --version` (`abc1234`, with
//! `-dirty` when the work tree had changes), or leaves it empty when this is not a git checkout
//! (a release tarball) or git is missing. It never fails the build.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    // Rebuild when HEAD moves: HEAD itself, and the ref it points at.
    if let Some(git_dir) = git(&["rev-parse", "--git-dir"]) {
        let head = Path::new(&git_dir).join("HEAD");
        println!("cargo:rerun-if-changed={}", head.display());
        if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&git_dir).join(reference).display()
            );
        }
        println!(
            "cargo:rerun-if-changed={}",
            Path::new(&git_dir).join("index").display()
        );
    }
    let rev = git(&["rev-parse", "--short=7", "HEAD"])
        .map(|rev| {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{rev}-dirty") } else { rev }
        })
        .unwrap_or_default();
    let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_default();
    println!("cargo:rustc-env=COOGLE_GIT_REV={rev}");
    println!("cargo:rustc-env=COOGLE_GIT_DATE={date}");
}
