//! Doctor's checks of the running daemon: it answers on the socket and runs this version, and
//! the socket's directory and file are private. Asking is bounded; nothing here starts a
//! daemon.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use super::Doctor;
use crate::wire::{Info, Status};
use crate::{client, wire};

/// The daemon's `info` and `status`, each bounded; `None` when it does not answer.
pub(super) fn ask(socket: &Path) -> (Option<Info>, Option<Status>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return (None, None);
    };
    rt.block_on(async {
        let limit = Duration::from_secs(10);
        let info = tokio::time::timeout(limit, client::info(socket)).await;
        let status = tokio::time::timeout(limit, client::status(socket)).await;
        (
            info.ok().and_then(Result::ok),
            status.ok().and_then(Result::ok),
        )
    })
}

impl Doctor<'_> {
    /// A daemon answers, and runs this binary's version.
    pub(super) fn daemon(&mut self, socket: &Path, info: Option<&Info>, service_installed: bool) {
        match info {
            Some(info) => {
                let v = &info.version;
                if v == wire::VERSION {
                    self.ok(&format!(
                        "daemon {v} answers on {} (pid {})",
                        socket.display(),
                        info.pid
                    ))
                } else {
                    self.fail(
                        &format!(
                            "daemon on {} runs coogle {v}, this binary is {}",
                            socket.display(),
                            wire::VERSION
                        ),
                        "`systemctl --user restart coogle.service` (macOS: `launchctl kickstart -k gui/$UID/dev.coogle.daemon`), or `coogle stop` when no service runs it (the next `coogle mcp` starts this version)",
                    )
                }
            }
            None if service_installed => self.fail(
                &format!("no daemon answers on {}", socket.display()),
                "start the service, or run `coogle serve`",
            ),
            None => self.warn(
                &format!(
                    "no daemon answers on {} (it starts on demand)",
                    socket.display()
                ),
                "",
            ),
        }
    }

    /// The socket's directory is 0700 and ours; the socket itself is not open to others.
    pub(super) fn socket_permissions(&mut self, socket: &Path) {
        let dir = socket.parent().unwrap_or(Path::new("/"));
        let me = crate::paths::uid();
        match std::fs::symlink_metadata(dir) {
            Ok(m) => {
                let mode = m.permissions().mode() & 0o777;
                if m.file_type().is_symlink() || m.uid() != me || mode != 0o700 {
                    self.fail(
                        &format!(
                            "socket directory {} is mode {mode:o}, owner uid {} (want 0700, uid {me})",
                            dir.display(),
                            m.uid(),
                        ),
                        &format!("`chmod 700 {}`", dir.display()),
                    );
                } else {
                    self.ok(&format!(
                        "socket directory {} is private (0700)",
                        dir.display()
                    ));
                }
            }
            Err(_) => self.warn(
                &format!("socket directory {} does not exist yet", dir.display()),
                "",
            ),
        }
        if let Ok(m) = std::fs::symlink_metadata(socket) {
            let mode = m.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                self.fail(
                    &format!("socket {} is mode {mode:o}", socket.display()),
                    "`coogle restart` recreates it with 0600",
                );
            }
        }
    }
}
