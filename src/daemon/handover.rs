//! Handing over to a newer coogle: after `brew upgrade` or `self-update`, the first shim of
//! the new version says so in its hello, and the daemon steps down once no call is queued or in
//! flight, so the new version serves.
//!
//! A hello is only a claim, and any local client can make one. The daemon acts on it only when
//! the binary it was started from, as it is on disk now, really is newer than itself (it runs
//! that file's `--version`), checks each claimed version once, and then waits until it is idle.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::wire;

/// Claims looked at, at the most: past this, no more are checked (nothing is lost but a
/// hand-over a `coogle stop` can do by hand).
const MAX_CLAIMS: usize = 16;

#[derive(Default)]
pub(crate) struct Handover {
    checked: Mutex<HashSet<String>>,
    /// A newer binary is on disk: stop once idle.
    pending: AtomicBool,
}

impl Handover {
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// A client of `claimed` version said hello; check the claim in the background.
    pub fn claim(self: &std::sync::Arc<Self>, claimed: &str) {
        if !wire::version_newer(claimed, wire::VERSION) || self.pending() {
            return;
        }
        {
            let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
            if checked.len() >= MAX_CLAIMS || !checked.insert(claimed.to_string()) {
                return;
            }
        }
        let this = self.clone();
        let claimed = claimed.to_string();
        tokio::task::spawn_blocking(move || match version_on_disk() {
            Some(on_disk) if wire::version_newer(&on_disk, wire::VERSION) => {
                tracing::info!(client_version = %claimed, on_disk = %on_disk, "a newer coogle is installed; this daemon ({}) will stop once idle so it serves", wire::VERSION);
                this.pending.store(true, Ordering::Relaxed);
            }
            on_disk => {
                tracing::info!(client_version = %claimed, on_disk = ?on_disk, "a client claims a newer coogle, but the binary on disk is not newer; staying");
            }
        });
    }
}

/// The version the daemon's own binary, as it is on disk now, reports.
fn version_on_disk() -> Option<String> {
    let exe = crate::process::live_exe(&std::env::current_exe().ok()?);
    let out = crate::process::run_bounded(&exe, &["--version"], Duration::from_secs(5)).ok()?;
    // `coogle 0.1.0 (abc1234 2026-11-22)`
    out.split_whitespace().nth(1).map(String::from)
}
