//! Telling a running daemon that config.json changed: `reload`, so it serves the new
//! upstreams at once while every session keeps its calls (and a daemon run by systemd or
//! launchd keeps running). Only a daemon older than `reload` is stopped after a share, so the
//! next session starts one that knows the new upstreams. It never stops a daemon that could
//! reload, and never fails the share: config.json is already written.

use std::path::Path;

use crate::client::{self, ClientError};
use crate::config::GlobalPaths;
use crate::fsutil;
use crate::setup::ui::Ui;
use crate::setup::uninstall::shutdown_daemon;

/// What changed in config.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// `share` added upstreams: an old daemon is stopped so a new one serves them.
    Added,
    /// `unshare` removed upstreams: they stay served until the daemon's next start anyway.
    Removed,
}

/// Ask the daemon on this invocation's socket to reload, and say what it did.
pub(super) fn tell_daemon(ui: &Ui, paths: &GlobalPaths, change: Change) {
    let socket = paths.socket_loading_config();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    match rt.block_on(client::reload(&socket)) {
        // No daemon: the next session starts one, which reads the file as it is now.
        Err(ClientError::NotRunning { .. }) => {}
        Err(e) => ui.warn(&format!(
            "the daemon on {} did not reload the config: {e}; `coogle reload` retries",
            socket.display()
        )),
        Ok(Some(r)) => {
            ui.ok(&format!(
                "the daemon on {} reloaded its config without stopping",
                socket.display()
            ));
            for line in client::reload_lines(&r) {
                ui.info(&line);
            }
            let ours = paths.config_file();
            if let Some(theirs) = r.file.as_deref().filter(|f| !same_file(f, &ours)) {
                ui.warn(&format!(
                    "that daemon reads {}, not {}: start it with --config {} to serve these upstreams",
                    theirs.display(),
                    ours.display(),
                    ours.display()
                ));
            }
        }
        Ok(None) => old_daemon(ui, paths, &socket, change),
    }
}

/// A daemon older than `reload`: after a share, stop it (sessions reconnect to a new one);
/// after an unshare, leave it, since it could only stop serving the removed upstreams.
fn old_daemon(ui: &Ui, paths: &GlobalPaths, socket: &Path, change: Change) {
    match change {
        Change::Added => {
            if shutdown_daemon(paths).is_some() {
                ui.ok(&format!(
                    "stopped the daemon on {} (it predates `coogle reload`) so the next session starts one that knows the new upstreams (sessions reconnect by themselves)",
                    socket.display()
                ));
            }
        }
        Change::Removed => ui.info(&format!(
            "the daemon on {} predates `coogle reload`: it serves the removed upstreams until its next start",
            socket.display()
        )),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    fsutil::resolve(a) == fsutil::resolve(b)
}
