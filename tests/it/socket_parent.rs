//! A socket directory whose parent someone else could rename is refused by the daemon and named
//! by doctor; a group-writable parent is warned about.
//!
//! Regression (third adversarial review): a socket whose parent directory another user owned
//! was accepted without a word; by swapping the socket directory, that user made 300 of 300
//! `coogle status` runs fail.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

#[allow(clippy::print_stderr)]
fn as_root() -> bool {
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    if !root {
        assert!(
            std::env::var_os("CI").is_none(),
            "needs root (to give a directory to another user), and CI is set"
        );
        eprintln!("SKIPPED: needs root");
    }
    root
}

fn chown(path: &Path, uid: u32) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; chown changes only that file's owner.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), uid, uid) }, 0);
}

#[test]
fn a_socket_directory_below_another_users_directory_is_refused() {
    if !as_root() {
        return;
    }
    let env = Env::with_fake(json!({}));
    let shared = env.path("shared");
    std::fs::create_dir(&shared).unwrap();
    chown(&shared, 65534);
    let socket = shared.join("coogle/coogle.sock");
    let mut serve = env
        .cmd()
        .env("COOGLE_SOCKET", &socket)
        .args(["serve", "--log-stderr"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    wait_for("serve to refuse and exit", Duration::from_secs(20), || {
        status = serve.try_wait().unwrap();
        if status.is_none() && control(&socket, "ping", Value::Null).is_ok() {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!("the daemon serves on {}", socket.display());
        }
        status.is_some()
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut serve.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.unwrap().code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}, above the socket directory, is owned by uid 65534",
            shared.display()
        )) && stderr.contains("XDG_RUNTIME_DIR"),
        "{stderr}"
    );
    assert!(!socket.exists(), "it listened anyway");

    let mut doctor = env.cmd();
    doctor.env("COOGLE_SOCKET", &socket).arg("doctor");
    let out = Output::of(doctor, &[]);
    assert_eq!(out.status, Some(1), "{out}");
    let named: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| !(l.contains('✗') && l.contains("above the socket directory")))
        .take(2)
        .collect();
    assert!(
        named.len() == 2 && named[0].contains("uid 65534") && named[1].contains("fix:"),
        "doctor must name it with the fix:\n{out}"
    );
}

#[test]
fn a_group_writable_parent_is_warned_about() {
    let env = Env::with_fake(json!({}));
    let shared = env.path("team");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).unwrap();
    let socket = shared.join("coogle/coogle.sock");
    let mut cmd = env.cmd();
    let mut daemon = cmd
        .env("COOGLE_SOCKET", &socket)
        .args(["serve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the daemon to answer", Duration::from_secs(20), || {
        control(&socket, "ping", Value::Null).is_ok()
    });
    let log = std::fs::read_to_string(&env.log).unwrap();
    assert!(
        log.contains(&format!(
            "{} (above the socket directory) is mode 0775, writable by its group",
            shared.display()
        )),
        "{log}"
    );
    let mut doctor = env.cmd();
    doctor.env("COOGLE_SOCKET", &socket).arg("doctor");
    let out = Output::of(doctor, &[]);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("above the socket directory") && !l.contains('✗')),
        "{out}"
    );
    let _ = control(&socket, "shutdown", Value::Null);
    let _ = daemon.wait();
}
