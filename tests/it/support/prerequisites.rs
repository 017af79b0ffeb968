//! The one gate for tests that need what a machine may lack: third-party servers and clients
//! (server-everything, workspace-mcp, mcp-server-time, the Python SDK, Claude Code), build
//! tools the distribution checks run (ruby, shellcheck), and root with `setpriv` and
//! `unshare -m` for the multi-user tests. One variable decides what a lack means:
//! [`REQUIRE_ALL`] set (CI sets it in `.ci/run`, which installs everything), the test fails;
//! unset, it prints `SKIPPED: <test>: <what is missing>` and passes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set (non-empty), every gated test must run.
pub const REQUIRE_ALL: &str = "COOGLE_TEST_REQUIRE_ALL";

/// `available`, else a failure under [`REQUIRE_ALL`], else a SKIPPED line; returns `available`.
pub fn prerequisite(available: bool, missing: &str) -> bool {
    if available {
        return true;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    assert!(
        std::env::var_os(REQUIRE_ALL).is_none_or(|v| v.is_empty()),
        "{test}: {missing}, and {REQUIRE_ALL} is set: every test must run (.ci/run installs \
         what they need)"
    );
    // Straight to the process's stderr, past libtest's capture of a passing test's output: a
    // skip is seen where the test results are, and `.ci/run` looks for it. One write, so
    // parallel tests do not interleave inside the line.
    let line = format!("SKIPPED: {test}: {missing}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    false
}

/// `program` on PATH, with no verdict: for what the test cannot do without (say so with
/// `expect`), or a check of its own.
pub fn find_program(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// A program a gated test needs on PATH (see [`prerequisite`]).
pub fn require_program(program: &str) -> Option<PathBuf> {
    let found = find_program(program);
    prerequisite(
        found.is_some(),
        &format!("{program} is not on PATH (install it as .ci/run does)"),
    );
    found
}

/// The official Python SDK (`mcp` 2.x) importable by `python3` (see [`prerequisite`]).
pub fn python_sdk() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp, mcp.client.client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    prerequisite(
        ok,
        "the Python MCP SDK is not installed (pip install mcp==2.3.0, as .ci/run does)",
    )
}

/// Whether this test can run a process as another user (`setpriv`, as root) in a private
/// mount namespace (`unshare -m`) (see [`prerequisite`]).
pub fn can_run_as_another_user() -> bool {
    let root = unsafe { libc::getuid() } == 0;
    let tools = ["/usr/bin/setpriv", "/usr/bin/unshare"]
        .iter()
        .all(|p| Path::new(p).exists());
    let namespaces = tools
        && root
        && Command::new("/usr/bin/unshare")
            .args(["-m", "--propagation", "private", "true"])
            .status()
            .is_ok_and(|s| s.success());
    prerequisite(
        namespaces,
        "needs root, /usr/bin/setpriv and a working `unshare -m`",
    )
}

/// [`can_run_as_another_user`], and `nsenter` to act inside the mount namespace a test's
/// process made for itself (see [`prerequisite`]).
pub fn can_enter_its_mount_namespace() -> bool {
    can_run_as_another_user()
        && prerequisite(
            Path::new("/usr/bin/nsenter").exists(),
            "needs /usr/bin/nsenter (util-linux, beside unshare)",
        )
}

/// Claude Code's binary for the tests that need the real client: `COOGLE_TEST_CLAUDE`, else
/// `claude` on PATH (see [`prerequisite`]).
pub fn claude_cli() -> Option<PathBuf> {
    let path = std::env::var_os("COOGLE_TEST_CLAUDE")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if path.is_some() {
        return path;
    }
    require_program("claude")
}
