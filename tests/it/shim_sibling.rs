//! `coogle mcp` hands its session to the `coogle-mcp` beside it only after reading that file
//! and finding it whole and of this build; anything else there (an interrupted copy leaves an
//! empty or cut file; another program; `coogle` itself; another build's) is not run: `coogle`
//! serves the session itself and says why on the shim's stderr.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use support::{COOGLE, Env, Shim, exe_of};

const SHIM_EXE: &str = env!("CARGO_BIN_EXE_coogle-mcp");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A version as long as this one, and not it.
fn other_version() -> String {
    VERSION
        .chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from_digit((d + 1) % 10, 10).unwrap(),
            None => c,
        })
        .collect()
}

/// The real `coogle-mcp` as another build of it would be: the same, but for the version in its
/// identity.
fn of_another_version(mut image: Vec<u8>) -> Vec<u8> {
    let identity = format!("\0dev.coogle.shim-identity:{VERSION}\0");
    let at = memchr::memmem::find(&image, identity.as_bytes()).expect("the identity");
    let version_at = at + identity.len() - 1 - VERSION.len();
    image[version_at..version_at + VERSION.len()].copy_from_slice(other_version().as_bytes());
    image
}

/// A directory holding `coogle` (a hard link to the one built) and `coogle-mcp` as `make`
/// leaves it; returns `coogle`'s path there.
fn install(env: &Env, name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    let coogle = dir.join("coogle");
    link_or_copy(Path::new(COOGLE), &coogle);
    make(&dir.join("coogle-mcp"));
    coogle
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        support::copy_executable(from, to);
    }
}

/// What a case puts at `coogle-mcp`'s path.
type MakeSibling = Box<dyn FnOnce(&Path)>;

fn write_exe(path: &Path, bytes: &[u8]) {
    support::write_executable(path, bytes);
}

/// A session through `exe mcp` works, from `expected_exe`'s image; returns what it logged.
fn served(env: &Env, mut cmd: std::process::Command, expected_exe: &Path) -> String {
    cmd.arg("mcp");
    let mut shim: Shim = env.stdio_server(cmd, &[]);
    shim.initialize();
    let r = shim.call("echo", json!({"text": "still served"}));
    assert_eq!(support::text(&r), "still served");
    assert_eq!(
        exe_of(shim.child.id()),
        std::fs::canonicalize(expected_exe).unwrap()
    );
    shim.close_stdin();
    support::wait_for("the shim to exit", Duration::from_secs(10), || {
        shim.child.try_wait().unwrap().is_some()
    });
    shim.stderr()
}

/// Regression (issue 18): an empty or foreign `coogle-mcp` beside `coogle` made `coogle mcp`
/// exit 0 with no answer and nothing on stderr (an empty file runs as an empty shell script);
/// a copy of `coogle` under that name made it exec itself forever.
#[test]
fn a_broken_or_foreign_sibling_is_not_run() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    // The first part of the real one, as an interrupted copy leaves it.
    let real = std::fs::read(SHIM_EXE).unwrap();
    let cut = real[..(real.len() / 2).min(2 << 20)].to_vec();
    let cut_too = cut.clone();
    let cases: Vec<(&str, MakeSibling, String)> = vec![
        (
            "empty",
            Box::new(|p: &Path| write_exe(p, b"")),
            "is empty".into(),
        ),
        (
            "script",
            Box::new(|p: &Path| {
                let mut s = b"#!/bin/sh\nexit 0\n".to_vec();
                s.resize(100_000, b'#');
                write_exe(p, &s)
            }),
            "is a script".into(),
        ),
        (
            "cut",
            Box::new(move |p: &Path| write_exe(p, &cut)),
            "is truncated".into(),
        ),
        (
            "other-version",
            Box::new(move |p: &Path| write_exe(p, &of_another_version(real))),
            format!("is coogle-mcp {}, not {VERSION}", other_version()),
        ),
        (
            "coogle-itself",
            Box::new(|p: &Path| link_or_copy(Path::new(COOGLE), p)),
            "is not coogle's shim".into(),
        ),
        (
            "not-executable",
            Box::new(move |p: &Path| {
                use std::os::unix::fs::PermissionsExt;
                write_exe(p, &cut_too);
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
            }),
            "is not executable".into(),
        ),
    ];
    for (name, make, reason) in cases {
        let coogle = install(&env, name, make);
        let log = served(&env, env.sealed(&coogle), &coogle);
        assert!(
            log.contains(&format!("coogle-mcp {reason}"))
                && log.contains("coogle serves this session itself"),
            "{name}: {log}"
        );
    }
}

/// A `coogle-mcp` that is really `coogle`, started by a `coogle` that did not look (an older
/// one), does not exec itself again: it serves the session and says what it is.
#[test]
fn coogle_under_the_shims_name_does_not_loop() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let coogle = install(&env, "copied", |p| link_or_copy(Path::new(COOGLE), p));
    let posing = coogle.with_file_name("coogle-mcp");
    let mut cmd = env.sealed(&posing);
    cmd.env("COOGLE_SHIM", env!("CARGO_PKG_VERSION"));
    let log = served(&env, cmd, &posing);
    assert!(log.contains("is a copy of coogle itself"), "{log}");
}

/// `coogle doctor` names a broken sibling, and the fix; the one built beside coogle passes.
#[test]
fn doctor_names_a_broken_sibling() {
    let env = Env::new();
    let good = env.run(&["doctor"]);
    assert!(
        good.stdout.contains("coogle-mcp (the small shim)"),
        "{good}"
    );
    let coogle = install(&env, "emptied", |p| write_exe(p, b""));
    let out = support::Output::of(env.sealed(&coogle), &["doctor"]);
    assert!(
        out.stdout
            .contains("coogle-mcp is empty: sessions run in coogle's larger image")
            && out.stdout.contains("reinstall coogle"),
        "{out}"
    );
}
