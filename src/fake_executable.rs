//! Tests' executables (fake tools, copies of coogle), written so that the test process never
//! holds them open for writing. Unit tests use it as `crate::fake_executable`; the integration
//! tests include this file as `support::fake_executable`.
//!
//! Tests run as threads of one process. A child that another test forks while this process has
//! a file open for writing keeps that descriptor until it execs, and exec of the file fails
//! meanwhile with ETXTBSY ("text file busy"). So `sh` writes the file: it has closed it when it
//! exits, and no process of the test's ever had it open.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// `bytes` at `path`, mode 755, replacing what is there.
pub fn write_executable(path: &Path, bytes: impl AsRef<[u8]>) {
    let mut sh = Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("running /bin/sh");
    let mut stdin = sh.stdin.take().expect("sh's stdin");
    stdin.write_all(bytes.as_ref()).expect("writing to sh");
    drop(stdin);
    let status = sh.wait().expect("waiting for sh");
    assert!(
        status.success(),
        "writing {} failed: {status}",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What it is for: a fake written while other threads fork runs at once. (With
    /// `std::fs::write` and `set_permissions` instead, a few in 300 fail with ETXTBSY here.)
    #[test]
    fn an_executable_written_while_others_fork_runs() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let forkers: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _ = Command::new("/bin/true").status();
                    }
                })
            })
            .collect();
        let busy = (0..300)
            .filter(|i| {
                let exe = dir.path().join(format!("fake-{i}"));
                write_executable(&exe, "#!/bin/sh\nexit 0\n");
                match Command::new(&exe).status() {
                    Ok(status) => {
                        assert!(status.success());
                        false
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => true,
                    Err(e) => panic!("running {}: {e}", exe.display()),
                }
            })
            .count();
        stop.store(true, Ordering::Relaxed);
        for f in forkers {
            f.join().unwrap();
        }
        assert_eq!(busy, 0, "{busy} of 300 fakes were busy at exec");
    }
}
