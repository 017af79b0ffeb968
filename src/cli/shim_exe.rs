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
//! Both must come from one build: `coogle` passes its version in [`HANDOFF_VAR`], and a
//! `coogle-mcp` of another version hands back to `coogle` (the variable set to
//! [`IN_PROCESS`]), which then runs the shim itself. So does a `coogle` with no sibling (an
//! install that only copied `coogle`). Behaviour is the same either way; only memory differs.
//!
//! This file must never call into clap or anything the shim does not use.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The main executable, beside `coogle-mcp`.
const MAIN_EXE: &str = "coogle";
use crate::shim::{HANDOFF_VAR, SHIM_EXE};
/// [`HANDOFF_VAR`]'s value asking `coogle` to run the shim itself.
const IN_PROCESS: &str = "in-process";

/// This executable's directory, through the " (deleted)" suffix of one replaced on disk.
fn exe_dir() -> Option<PathBuf> {
    let exe = crate::process::live_exe(&std::env::current_exe().ok()?);
    Some(exe.parent()?.to_path_buf())
}

/// In `coogle`, for a plain `coogle mcp`: become `coogle-mcp` with the same arguments.
/// Returns only when that cannot be done; the caller then runs the shim in this process.
pub fn become_small_shim(args: &[OsString]) {
    if std::env::var_os(HANDOFF_VAR).is_some_and(|v| v == IN_PROCESS) {
        return;
    }
    let Some(shim) = exe_dir().map(|d| d.join(SHIM_EXE)) else {
        return;
    };
    // `exec` returns only on failure (no sibling, not executable): fall back quietly.
    let _ = Command::new(&shim)
        .args(args)
        .env(HANDOFF_VAR, crate::wire::VERSION)
        .exec();
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

/// The executable that runs `coogle serve`: this one, or `coogle` beside `coogle-mcp`.
pub fn main_exe() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(MAIN_EXE));
    let live = crate::process::live_exe(&exe);
    if live.file_name().is_some_and(|n| n == SHIM_EXE) {
        return live.parent().unwrap_or(Path::new("")).join(MAIN_EXE);
    }
    exe
}
