//! Tests' executables, written so that exec never meets "text file busy" (see `write.rs`,
//! which the integration tests include on its own; the test below is the unit tests').

mod write;

pub use write::{copy_executable, write_executable};

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

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

    /// A file already at the path is replaced, not written through: a hard link to the build's
    /// own binary (a test's "copy" of coogle) keeps the build's bytes.
    #[test]
    fn a_copy_replaces_a_hard_link_without_writing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let (original, linked, source) = (
            dir.path().join("original"),
            dir.path().join("linked"),
            dir.path().join("source"),
        );
        std::fs::write(&original, "#!/bin/sh\necho original\n").unwrap();
        std::fs::hard_link(&original, &linked).unwrap();
        std::fs::write(&source, "#!/bin/sh\necho copy\n").unwrap();
        copy_executable(&source, &linked);
        let run = |p: &std::path::Path| Command::new(p).output().unwrap().stdout;
        assert_eq!(run(&linked), b"copy\n");
        assert_eq!(
            std::fs::read(&original).unwrap(),
            b"#!/bin/sh\necho original\n"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 3, "{leftovers:?}");
    }
}
