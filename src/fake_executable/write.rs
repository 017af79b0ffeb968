//! Tests' executables (fake tools, copies of coogle), written so that the test process never
//! holds them open for writing. Unit tests use it as `crate::fake_executable`; the integration
//! tests include this file as `support::fake_executable`.
//!
//! Tests run as threads of one process. A child that another test forks while this process has
//! a file open for writing keeps that descriptor until it execs, and exec of the file fails
//! meanwhile with ETXTBSY ("text file busy"). So `sh` writes the file, beside it, and renames it
//! into place: no process of the test's ever had it open, and a file already at the path (a
//! hard link to the build's own binary, one being run) is replaced, never written through.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Write what `sh` reads on stdin (`bytes`), or the file `from`, to a new file beside `to`,
/// make it executable and rename it to `to`.
fn by_sh(to: &Path, from: Option<&Path>, bytes: &[u8]) {
    let mut sh = Command::new("/bin/sh")
        .args([
            "-c",
            "tmp=\"$1.tmp$$\"; cat ${2:+\"$2\"} > \"$tmp\" && chmod 755 \"$tmp\" && mv -f \"$tmp\" \"$1\" || { rm -f \"$tmp\"; exit 1; }",
            "sh",
        ])
        .arg(to)
        .args(from)
        .stdin(Stdio::piped())
        .spawn()
        .expect("running /bin/sh");
    let mut stdin = sh.stdin.take().expect("sh's stdin");
    // A failed `cat` closes the pipe early: its status, below, says why.
    let wrote = stdin.write_all(bytes);
    drop(stdin);
    let status = sh.wait().expect("waiting for sh");
    assert!(
        status.success() && wrote.is_ok(),
        "writing {} failed: {status} ({wrote:?})",
        to.display()
    );
}

/// `bytes` at `path`, mode 755, replacing what is there.
pub fn write_executable(path: &Path, bytes: impl AsRef<[u8]>) {
    by_sh(path, None, bytes.as_ref());
}

/// A copy of the executable `from` at `to`, mode 755, replacing what is there.
pub fn copy_executable(from: &Path, to: &Path) {
    by_sh(to, Some(from), b"");
}
