//! Taking over in place: the old daemon, its children stopped, execs the verified binary with
//! `serve --inherit <listener>,<lock>`, keeping its pid, its listening socket and its lock
//! across the exec; the new daemon adopts both after checking they are what they claim to be.
//!
//! The listener never closes, so a client that connects meanwhile waits in its backlog and is
//! served by the new daemon; the lock (an `flock` on the open file, which the exec keeps) is
//! never free, so no other daemon can start in between. Both descriptors are close-on-exec
//! again as soon as the new daemon has them: no child ever inherits them.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
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
        let flags = os::set_cloexec(&self.listener, false)
            .and_then(|()| os::set_cloexec(&self.lock, false));
        let err = match flags {
            Ok(()) => std::process::Command::new(&self.exe)
                .args(own_args(
                    &self.socket,
                    &["--inherit".into(), inherit.into()],
                ))
                .exec(),
            Err(e) => e,
        };
        let _ = os::set_cloexec(&self.listener, true);
        let _ = os::set_cloexec(&self.lock, true);
        let back = Inherited {
            listener: self.listener,
            lock: self.lock,
            refused: Some(self.id),
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
        })
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
