//! `coogle mcp` runs as `coogle-mcp`, a small executable installed beside `coogle`.
//!
//! There is one shim per agent session and server, so N servers and M sessions make N×M of
//! them, and what one costs is paid by the image it runs in, not by the code it executes: the
//! dynamic loader writes every relocation of a position-independent executable at start
//! (hundreds of KiB of private pages for a binary holding the daemon, TLS, HTTP, clap and
//! rmcp), and the code a pump touches is spread over megabytes of text. `coogle-mcp` links
//! only the shim, so `coogle mcp` replaces itself with it (`exec`, before anything else runs)
//! and the big image is gone. Client configs keep saying `coogle mcp`.
//!
//! Both must come from one build, and the file must be whole: before handing a session over,
//! `coogle` reads `coogle-mcp` without running it (see [`crate::shim_identity`]: a regular
//! executable of this machine, not truncated, carrying this version's identity). An empty,
//! cut, foreign or other-version file is not run: `coogle` serves the session itself and says
//! why in the shim's log (its stderr, which the agent's client keeps). A missing one is fine
//! (an install that only copied `coogle`), and so is said nothing about. `coogle` also passes
//! its version in [`HANDOFF_VAR`], so a `coogle-mcp` started by an older `coogle`, which did not
//! look, hands back when the versions differ (the variable set to [`IN_PROCESS`]).
//!
//! This file must never call into clap or anything the shim does not use.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::shim_identity::{self, Verdict};

/// The main executable, beside `coogle-mcp`.
const MAIN_EXE: &str = "coogle";
use crate::client::HANDOFF_VAR;
use crate::shim::SHIM_EXE;
/// [`HANDOFF_VAR`]'s value asking `coogle` to run the shim itself.
const IN_PROCESS: &str = "in-process";

/// Why this `coogle mcp` did not become `coogle-mcp`, when that is worth a warning: logged
/// once the shim's logging is set up (see [`sibling_warning`]).
static WARNING: OnceLock<String> = OnceLock::new();

/// This executable's directory, through the " (deleted)" suffix of one replaced on disk.
fn exe_dir() -> Option<PathBuf> {
    let exe = crate::process::live_exe(&std::env::current_exe().ok()?);
    Some(exe.parent()?.to_path_buf())
}

/// In `coogle`, for a plain `coogle mcp`: become `coogle-mcp` with the same arguments.
/// Returns only when that cannot or must not be done; the caller then runs the shim in this
/// process, and [`sibling_warning`] says why when it is worth saying.
pub fn become_small_shim(args: &[OsString]) {
    match std::env::var_os(HANDOFF_VAR) {
        None => {}
        Some(v) if v == IN_PROCESS => return,
        // We were handed a session as `coogle-mcp`, yet this is `coogle`: the file is a copy
        // of `coogle` (which carries no shim identity, so an older `coogle`, which did not
        // look, ran it). Never exec again, which would loop.
        Some(_) => {
            warn(format!(
                "{SHIM_EXE} beside {MAIN_EXE} is a copy of {MAIN_EXE} itself, not its shim"
            ));
            return;
        }
    }
    let Some(shim) = exe_dir().map(|d| d.join(SHIM_EXE)) else {
        return;
    };
    match shim_identity::check(&shim, crate::wire::VERSION) {
        Verdict::Trusted => {}
        Verdict::Missing => return,
        Verdict::Refused(why) => {
            warn(format!("{} {why}", shim.display()));
            return;
        }
    }
    // `exec` returns only on failure (the file went, a mount that forbids running it).
    let e = Command::new(&shim)
        .args(args)
        .env(HANDOFF_VAR, crate::wire::VERSION)
        .exec();
    warn(format!("{} could not be run ({e})", shim.display()));
}

fn warn(what: String) {
    let _ = WARNING.set(what);
}

/// Why the session is served by `coogle` itself rather than `coogle-mcp`, when something is
/// wrong with that file: for the shim to log once its logging is up.
pub fn sibling_warning() -> Option<String> {
    WARNING.get().map(|w| {
        format!(
            "{w}; coogle serves this session itself (reinstall coogle to restore its small shim)"
        )
    })
}

/// In `coogle-mcp`: when `coogle` sent us and expects another version (the two files come from
/// different installs), hand the session back to `coogle` to run in-process. Returns when
/// this executable should serve the session itself.
pub fn hand_back_if_mismatched(args: &[OsString]) {
    match std::env::var_os(HANDOFF_VAR) {
        Some(v) if v != crate::wire::VERSION && v != IN_PROCESS => {}
        _ => return,
    }
    if let Some(main) = exe_dir().map(|d| d.join(MAIN_EXE)) {
        let _ = Command::new(main)
            .args(args)
            .env(HANDOFF_VAR, IN_PROCESS)
            .exec();
    }
}

/// In a statically linked `coogle-mcp` (scripts/static-shim): users are looked up in
/// /etc/passwd alone, since a static glibc must not load the system's name-service modules.
/// A session without an absolute HOME would need the full database for its own home, so it is
/// handed to `coogle` (dynamic), which serves it in-process. Returns when this executable
/// should serve the session itself.
pub fn statically_linked(args: &[OsString]) {
    crate::os::password_file_only();
    // Handed here by `coogle` to run in-process already: a second hand-back would loop.
    let handed = std::env::var_os(HANDOFF_VAR).is_some_and(|v| v == IN_PROCESS);
    if crate::paths::env_home().is_some() || handed {
        return;
    }
    if let Some(main) = exe_dir().map(|d| d.join(MAIN_EXE)) {
        let e = Command::new(&main)
            .args(args)
            .env(HANDOFF_VAR, IN_PROCESS)
            .exec();
        // Said on stderr (the shim's logging is not up yet; stdout is the MCP channel).
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!(
                "warning: HOME is not set and {} could not be run ({e}), so this session's home comes from /etc/passwd alone; set HOME, or reinstall coogle\n",
                main.display()
            )
            .as_bytes(),
        );
    }
}

/// The executable that runs `coogle serve`: this one, or `coogle` beside `coogle-mcp`.
pub fn main_exe() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(MAIN_EXE));
    let live = crate::process::live_exe(&exe);
    if live.file_name().is_some_and(|n| n == SHIM_EXE) {
        return live.parent().unwrap_or(Path::new("")).join(MAIN_EXE);
    }
    exe
}
