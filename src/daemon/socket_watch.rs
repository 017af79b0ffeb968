//! Whether the daemon's socket can still be reached at its path: a daemon nobody can reach
//! stops (with its children) rather than run on unseen, so the next session starts one it can
//! reach. The OS tells where it can (`os::PathWatch`); the daemon looks now and then anyway.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::{Instant, Interval};

use crate::os;

/// How often the daemon looks where the OS cannot tell it when the way to its socket changes
/// (no watch, or parts of the way it may not watch: a directory it cannot read).
const LOOK: Duration = Duration::from_secs(2);
/// How often it looks anyway where the OS tells: for what a watch cannot see (a directory on
/// the way made unreadable, more symlinks than the OS follows).
const LOOK_WATCHED: Duration = Duration::from_secs(60);
/// How long a socket seen gone may take to be back (a path swapped in two steps, a directory
/// moved aside and a symlink put in its place) before the daemon stops.
const GRACE: Duration = Duration::from_millis(250);

/// The socket's (device, inode): ours is the one bound. A symlink put in its place is not
/// ours, even one to it: the path must lead to the socket itself.
pub(super) type Identity = (u64, u64);

pub(super) struct SocketWatch {
    socket: PathBuf,
    ours: Option<Identity>,
    watch: Option<os::PathWatch>,
    look: Interval,
    look_every: Duration,
    /// When a socket seen gone is given up on, unless it is back by then.
    gone_at: Option<Instant>,
    /// Why the next look is made, if one is due: said in the log when the socket is found gone.
    look_now: Option<Why>,
}

/// What made a look.
#[derive(Clone, Copy, Debug)]
enum Why {
    Start,
    /// The OS said the way changed.
    Told,
    /// The look every [`LOOK`] or [`LOOK_WATCHED`].
    Now,
    /// The end of the grace.
    Grace,
}

impl Why {
    fn words(self) -> &'static str {
        match self {
            Why::Start => "at start",
            Why::Told => "told by the OS",
            Why::Now => "looked now and then",
            Why::Grace => "after the grace",
        }
    }
}

impl SocketWatch {
    /// Watch `socket`, bound as `ours`; the first look is at the first [`lost`](Self::lost).
    pub(super) fn new(socket: &Path, ours: Option<Identity>) -> SocketWatch {
        SocketWatch {
            socket: socket.to_path_buf(),
            ours,
            watch: None,
            look: tokio::time::interval(LOOK),
            look_every: Duration::ZERO,
            gone_at: None,
            look_now: Some(Why::Start),
        }
    }

    /// Resolves once the socket is lost for good: gone or not ours at a look, and still so
    /// [`GRACE`] later. Cancel-safe: what it learnt is kept for the next call.
    pub(super) async fn lost(&mut self) {
        loop {
            if let Some(why) = self.look_now.take()
                && self.look(why)
            {
                tracing::warn!(socket = %self.socket.display(), "the socket was removed or replaced, or its path leads elsewhere; shutting down");
                return;
            }
            let gone_at = self.gone_at;
            self.look_now = Some(tokio::select! {
                changed = changed(&mut self.watch) => {
                    if let Err(e) = changed {
                        tracing::debug!("the watch of the socket's path failed ({e}); watching it anew");
                    }
                    Why::Told
                }
                _ = self.look.tick() => Why::Now,
                () = until(gone_at) => Why::Grace,
            });
        }
    }

    /// Watch the way again, then look: a change after the look is the new watch's to tell
    /// (looking first would leave a change made between the two unseen). True once the socket
    /// is lost for good.
    fn look(&mut self, why: Why) -> bool {
        // The old watch goes first: where the OS allows one watch at a time, the new one needs
        // its place.
        self.watch = None;
        let watched = watch_socket(&self.socket);
        let lost = socket_lost(self.ours, socket_identity(&self.socket));
        let every = match &watched {
            Ok(Some(w)) if w.left_out().is_empty() => LOOK_WATCHED,
            _ => LOOK,
        };
        if every != self.look_every {
            // Said when the cadence changes, not at every look; and only while the socket is
            // there (once it is gone, its path cannot be watched).
            match &watched {
                Err(e) if !lost => {
                    tracing::debug!(socket = %self.socket.display(), "cannot watch the socket's path ({e}); looking every {LOOK:?}")
                }
                Ok(None) if !lost => {
                    tracing::debug!(
                        "this OS cannot watch the socket's path; looking every {LOOK:?}"
                    )
                }
                Ok(Some(w)) if !w.left_out().is_empty() => {
                    tracing::debug!(left_out = ?w.left_out(), "parts of the socket's path cannot be watched; looking every {LOOK:?}")
                }
                _ => {}
            }
            // From now, not at once: a look was just made. A daemon stopped for a while looks
            // once when it runs again, not once per look it missed.
            self.look = tokio::time::interval_at(Instant::now() + every, every);
            self.look
                .set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            self.look_every = every;
        }
        self.watch = watched.ok().flatten();
        if !lost {
            self.gone_at = None;
            return false;
        }
        let now = Instant::now();
        match self.gone_at {
            Some(at) => at <= now,
            None => {
                tracing::debug!(socket = %self.socket.display(), "the socket is not where it was ({}); looking again in {GRACE:?}", why.words());
                self.gone_at = Some(now + GRACE);
                false
            }
        }
    }
}

/// The watch of the socket's path (see `os::PathWatch`): `Ok(None)` where the OS cannot tell,
/// an error where the way is not there to watch (the caller then looks every [`LOOK`]).
fn watch_socket(socket: &Path) -> std::io::Result<Option<os::PathWatch>> {
    match socket.parent().zip(socket.file_name()) {
        Some((dir, name)) => os::PathWatch::new(dir, name),
        None => Ok(None),
    }
}

/// What the watch says changed; never, without one.
async fn changed(watch: &mut Option<os::PathWatch>) -> std::io::Result<()> {
    match watch {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

/// At `at`; never, without one.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// True when the socket file is gone or is not ours any more. Ours being unknown (`None`: the
/// file vanished between bind and the first look, its directory deleted under a starting
/// daemon) counts as gone, or such a daemon would run unreachable forever.
fn socket_lost(ours: Option<Identity>, now: Option<Identity>) -> bool {
    now.is_none() || now != ours
}

/// The socket file's identity, to tell ours from a replacement.
pub(super) fn socket_identity(path: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_or_changed_socket_is_lost() {
        assert!(socket_lost(None, None));
        assert!(socket_lost(Some((1, 2)), None));
        assert!(socket_lost(Some((1, 2)), Some((1, 3))));
        assert!(!socket_lost(Some((1, 2)), Some((1, 2))));
    }
}
