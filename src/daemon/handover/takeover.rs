//! Taking over in place: the old daemon, its children stopped, execs the verified binary with
//! `serve --inherit <listener>,<lock>`, keeping its pid, its listening socket and its lock
//! across the exec; the new daemon adopts both after checking they are what they claim to be.
//!
//! The listener never closes, so a client that connects meanwhile waits in its backlog and is
//! served by the new daemon; the lock (an `flock` on the open file, which the exec keeps) is
//! never free, so no other daemon can start in between. Both descriptors are close-on-exec
//! again as soon as the new daemon has them: no child ever inherits them.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;

use super::{FileId, own_args};
use crate::os::{self, FdKind};
use crate::paths::RuntimePaths;

/// What the old daemon execs into.
pub(crate) struct Replacement {
    pub exe: PathBuf,
    /// The socket it serves (the one the listener listens on).
    pub socket: PathBuf,
    pub version: String,
    pub id: FileId,
    pub listener: OwnedFd,
    pub lock: File,
    /// The running children, carried over (see `carried`).
    pub carry: Option<Carry>,
}

/// What an upgrade in place carries: the state file, and every descriptor it names.
pub(crate) struct Carry {
    pub file: File,
    pub fds: Vec<OwnedFd>,
}

impl std::fmt::Debug for Replacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replacement")
            .field("exe", &self.exe)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Replacement {
    /// Become the new binary. Returns only when the exec failed: the error, and what to go
    /// on serving with (this binary is then never tried again by this process).
    pub fn exec(self) -> (std::io::Error, Inherited) {
        use std::os::unix::process::CommandExt;
        let (listener, lock) = (self.listener.as_raw_fd(), self.lock.as_raw_fd());
        let inherit = format!("{listener},{lock}");
        let mut args: Vec<std::ffi::OsString> = vec!["--inherit".into(), inherit.into()];
        if let Some(carry) = &self.carry {
            args.push("--carry".into());
            args.push(carry.file.as_raw_fd().to_string().into());
        }
        let err = {
            let mut kept: Vec<BorrowedFd> = vec![self.listener.as_fd(), self.lock.as_fd()];
            if let Some(carry) = &self.carry {
                kept.push(carry.file.as_fd());
                kept.extend(carry.fds.iter().map(AsFd::as_fd));
            }
            let flags = kept.iter().try_for_each(|fd| os::set_cloexec(fd, false));
            let err = match flags {
                Ok(()) => std::process::Command::new(&self.exe)
                    .args(own_args(&self.socket, &args))
                    .exec(),
                Err(e) => e,
            };
            for fd in kept {
                let _ = os::set_cloexec(fd, true);
            }
            err
        };
        // Serving on with this version: the carried children are taken back as the new
        // version would have taken them, their descriptors from what this process still owns.
        let carry = self.carry;
        let back = Inherited {
            listener: self.listener,
            lock: self.lock,
            refused: Some(self.id),
            exec_failed: Some(format!(
                "could not become coogle {} ({}): {err}",
                self.version,
                self.exe.display()
            )),
            carry,
        };
        (err, back)
    }
}

/// A listening socket and a held lock, from the daemon this one replaced (or from this
/// process's own failed exec).
pub(crate) struct Inherited {
    listener: OwnedFd,
    lock: File,
    /// A binary not to hand over to again.
    pub refused: Option<FileId>,
    /// Why this process is still the old version: its exec of the new one failed.
    pub exec_failed: Option<String>,
    /// The carried state of an upgrade in place (`--carry`), when there was one.
    carry: Option<Carry>,
}

impl std::fmt::Debug for Inherited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inherited")
            .field("listener", &self.listener.as_raw_fd())
            .field("lock", &self.lock.as_raw_fd())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum InheritError {
    #[error("--inherit takes two descriptors, <listener>,<lock>, not {0:?}")]
    Syntax(String),
    #[error("descriptor {fd} is {what}")]
    Bad { fd: RawFd, what: &'static str },
    #[error("the inherited listener does not serve {socket}")]
    OtherSocket { socket: PathBuf },
    #[error("the inherited lock is not {lock}, or is not held")]
    NotTheLock { lock: PathBuf },
    #[error("could not use an inherited descriptor")]
    Io(#[from] std::io::Error),
}

impl Inherited {
    /// The descriptors `--inherit <listener>,<lock>` names: open, a socket and a regular
    /// file, and close-on-exec from now on.
    pub fn from_arg(arg: &str) -> Result<Inherited, InheritError> {
        let syntax = || InheritError::Syntax(arg.to_string());
        let (l, k) = arg.split_once(',').ok_or_else(syntax)?;
        let listener: RawFd = l.trim().parse().map_err(|_| syntax())?;
        let lock: RawFd = k.trim().parse().map_err(|_| syntax())?;
        if listener == lock {
            return Err(syntax());
        }
        let kind = |fd: RawFd| -> Result<FdKind, InheritError> {
            if fd <= 2 {
                return Err(InheritError::Bad {
                    fd,
                    what: "stdin, stdout or stderr",
                });
            }
            os::fd_kind(fd).map_err(|_| InheritError::Bad {
                fd,
                what: "not open",
            })
        };
        if kind(listener)? != FdKind::Socket {
            return Err(InheritError::Bad {
                fd: listener,
                what: "not a socket",
            });
        }
        if kind(lock)? != FdKind::File {
            return Err(InheritError::Bad {
                fd: lock,
                what: "not a regular file",
            });
        }
        // Both open (fstat said so), distinct, not stdio, and handed to this process for it to
        // own by the daemon it replaced; close-on-exec from now on.
        let listener = os::adopt_inherited_fd(listener)?;
        let lock = File::from(os::adopt_inherited_fd(lock)?);
        Ok(Inherited {
            listener,
            lock,
            refused: None,
            exec_failed: None,
            carry: None,
        })
    }

    /// The carried state's descriptor, `--carry <fd>`: a regular file, close-on-exec from now
    /// on.
    pub fn with_carry(mut self, arg: &str) -> Result<Inherited, InheritError> {
        let fd: RawFd = arg
            .trim()
            .parse()
            .map_err(|_| InheritError::Syntax(arg.to_string()))?;
        if fd <= 2 {
            return Err(InheritError::Bad {
                fd,
                what: "stdin, stdout or stderr",
            });
        }
        if os::fd_kind(fd).ok() != Some(FdKind::File) {
            return Err(InheritError::Bad {
                fd,
                what: "not a regular file",
            });
        }
        self.carry = Some(Carry {
            file: File::from(os::adopt_inherited_fd(fd)?),
            fds: Vec::new(),
        });
        Ok(self)
    }

    /// The running children carried over, ready to be adopted; those whose descriptors are
    /// not there are stopped.
    pub fn carried(&mut self) -> Vec<crate::daemon::upstream::Adopted> {
        let Some(Carry { file, mut fds }) = self.carry.take() else {
            return Vec::new();
        };
        let instances = match super::carried::read(file) {
            Ok(i) => i,
            Err(e) => {
                tracing::error!(
                    "the state the replaced daemon carried over does not read ({e}); its children are reaped and start again"
                );
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for mut instance in instances {
            let pid = instance.child.pid;
            let Some([stdin, stdout, stderr]) = super::carried::take_fds(&instance.child, &mut fds)
            else {
                tracing::warn!(upstream = %instance.server, pid, "a carried child's pipes are not there; stopping it");
                let _ = os::signal_group(pid, libc::SIGKILL);
                continue;
            };
            let pipes = crate::daemon::upstream::DetachedPipes {
                pid,
                started_at: crate::daemon::upstream::started_at(instance.child.started_at_ms),
                stdin,
                stdout,
                stderr,
                stdout_pending: std::mem::take(&mut instance.child.stdout_pending),
                stderr_pending: std::mem::take(&mut instance.child.stderr_pending),
            };
            out.push(crate::daemon::upstream::Adopted { instance, pipes });
        }
        out
    }

    /// The listener and the lock, once checked: the listener serves `rt`'s socket, and the
    /// lock is `rt`'s lock file, held by this process. Also what not to hand over to again.
    pub fn adopt(
        self,
        rt: &RuntimePaths,
    ) -> Result<(std::os::unix::net::UnixListener, File, Option<FileId>), InheritError> {
        use std::os::unix::fs::MetadataExt;
        let not_the_lock = || InheritError::NotTheLock {
            lock: rt.lock.clone(),
        };
        let held = self.lock.metadata()?;
        let named = std::fs::metadata(&rt.lock).map_err(|_| not_the_lock())?;
        if (held.dev(), held.ino()) != (named.dev(), named.ino()) {
            return Err(not_the_lock());
        }
        // The same open file holds it already: taking it again only confirms that.
        if !matches!(os::try_lock(&self.lock), Ok(true)) {
            return Err(not_the_lock());
        }
        let listener = std::os::unix::net::UnixListener::from(self.listener);
        if listener.local_addr()?.as_pathname() != Some(rt.socket.as_path()) {
            return Err(InheritError::OtherSocket {
                socket: rt.socket.clone(),
            });
        }
        listener.set_nonblocking(true)?;
        Ok((listener, self.lock, self.refused))
    }
}
