//! Doctor's checks of the running daemon: it answers on the socket and runs this version, and
//! the socket's directory and file are private (the checks every client makes before it
//! sends a byte). Asking is bounded; nothing here starts a daemon.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use super::Doctor;
use crate::client::{self, ClientError, Untrusted};
use crate::paths::{self, PathError};
use crate::service_manager::{Manager, ServiceStatus};
use crate::wire;
use crate::wire::{Info, Status};

/// The daemon's `info` (or why not) and `status`, each bounded.
pub(super) fn ask(socket: &Path) -> (Result<Info, ClientError>, Option<Status>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return (Err(ClientError::Io(e)), None),
    };
    rt.block_on(async {
        let limit = Duration::from_secs(10);
        let timed_out = || ClientError::Io(std::io::ErrorKind::TimedOut.into());
        let info = tokio::time::timeout(limit, client::info(socket))
            .await
            .unwrap_or_else(|_| Err(timed_out()));
        let status = match &info {
            Ok(_) => tokio::time::timeout(limit, client::status(socket))
                .await
                .ok()
                .and_then(Result::ok),
            Err(_) => None,
        };
        (info, status)
    })
}

impl Doctor<'_> {
    /// A daemon answers, and runs this binary's version.
    pub(super) fn daemon(
        &mut self,
        socket: &Path,
        info: &Result<Info, ClientError>,
        service: &Option<ServiceStatus>,
    ) {
        match info {
            // The directory's own check below names that problem and its fix.
            Err(ClientError::Untrusted {
                problem: Untrusted::Dir(_),
                ..
            }) => self.warn(
                &format!(
                    "did not ask a daemon on {}: its directory is not safe (below)",
                    socket.display()
                ),
                "",
            ),
            Err(e @ ClientError::Untrusted { .. }) => {
                self.fail(&e.to_string(), &e.hint().unwrap_or_default())
            }
            Ok(info) => {
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
            Err(e @ ClientError::SocketPath(_)) => {
                self.fail(&e.to_string(), &e.hint().unwrap_or_default())
            }
            // The manager says the service runs, yet nothing answers where clients look: a
            // daemon on another socket, or one that cannot listen. Restarting it shows which.
            Err(_) if matches!(service, Some(ServiceStatus::Running)) => {
                let manager = Manager::current();
                self.fail(
                    &format!(
                        "the service runs, but no daemon answers on {}",
                        socket.display()
                    ),
                    &format!(
                        "`coogle logs` says why; `{}` restarts it",
                        manager.restart_command()
                    ),
                )
            }
            // Without a running service (none installed, stopped: that is the service check's
            // ✗, or no manager here), the first session starts the daemon: nothing is broken.
            Err(_) => self.warn(
                &format!(
                    "no daemon answers on {} (it starts on demand)",
                    socket.display()
                ),
                "",
            ),
        }
    }

    /// The socket's directory passes the check every client makes (ours, private, no
    /// symlink); the socket itself is not open to others.
    pub(super) fn socket_permissions(&mut self, socket: &Path) {
        let dir = socket.parent().unwrap_or(Path::new("/"));
        match paths::verify_private_dir(dir) {
            Ok(()) => {
                let mode = std::fs::metadata(dir).map_or(0, |m| m.permissions().mode() & 0o777);
                self.ok(&if mode == 0o700 {
                    format!("socket directory {} is private (0700)", dir.display())
                } else {
                    // A socketPath in a directory of the user's own (their home, say).
                    format!(
                        "socket directory {} is yours and only you can write in it ({mode:03o})",
                        dir.display()
                    )
                })
            }
            Err(PathError::Inspect { error, .. })
                if error.kind() == std::io::ErrorKind::NotFound =>
            {
                self.warn(
                    &format!("socket directory {} does not exist yet", dir.display()),
                    "",
                )
            }
            Err(e) => {
                let refused = ClientError::Untrusted {
                    socket: socket.to_path_buf(),
                    problem: Untrusted::Dir(e),
                };
                // The socket in it is not worth a second ✗: the directory is the problem.
                return self.fail(&refused.to_string(), &refused.hint().unwrap_or_default());
            }
        }
        // Whoever can rename a directory above it can swap the socket directory for their own.
        for (path, why) in paths::replaceable_parents(dir) {
            let fix = "choose a socketPath below directories only you or root can change, or set XDG_RUNTIME_DIR";
            let what = format!(
                "{}, above the socket directory, {why}: the socket directory can be replaced under every client",
                path.display()
            );
            match why {
                paths::Replaceable::GroupWrite(_) => self.warn(&what, fix),
                _ => self.fail(&what, fix),
            }
        }
        // Someone else's socket here is a foreign listener, which the daemon check names.
        if let Ok(m) = std::fs::symlink_metadata(socket)
            && m.uid() == crate::os::uid()
        {
            let mode = m.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                self.fail(
                    &format!("socket {} is mode {mode:o}", socket.display()),
                    "`coogle stop` (or restart the service); the next daemon creates it 0600",
                );
            }
        }
    }
}
