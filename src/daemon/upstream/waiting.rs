//! The waiting room: every request that is not with the child yet. A call waits for a free
//! slot (`maxConcurrent`), fairly across sessions; any request may wait for the child to be
//! ready, or for its era to be known (a first start with nothing cached); a handshake-era
//! session's call waits for that session's input when a 2026-07-28 child asked for some (the
//! rounds themselves are `mrtr`'s).
//!
//! One type holds them all, as [`super::inflight`] holds what the child works on, so that
//! what must hold for every waiting request holds in one place: the bounds (per session, per
//! upstream, whatever it waits for), cancelling one, forgetting a session's, answering them all
//! when the child cannot come, and the counts `status` and the hand-over read. Nothing here
//! decides what a request means; the actor does.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::Origin;
use super::mrtr::Rounds;
use super::request::Request;
use crate::daemon::SessionId;
use crate::daemon::scheduler::{FairQueue, QueueKey};
use crate::wire::id_key;

/// Calls one session may have waiting for a free slot; past this, a call is answered at once
/// with an error instead of growing the daemon without bound.
pub(super) const MAX_CALLS_PER_SESSION: usize = 256;

/// Requests of everyone that may wait at once, whatever for; past this, a request is answered
/// at once with an error.
pub(super) const MAX_WAITING: usize = 4096;

/// What a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WaitsFor {
    /// A free slot under `maxConcurrent` (calls only).
    Slot,
    /// The child to be ready.
    Child,
    /// The child's era to be known.
    Era,
}

/// A request that waits, and for whom.
pub(super) struct Waiting {
    /// Whose turn it takes: the session's id, or a control request's own key.
    pub key: QueueKey,
    pub origin: Origin,
    pub req: Request,
    pub since: Instant,
}

impl Waiting {
    pub fn new(key: QueueKey, origin: Origin, req: Request) -> Waiting {
        Waiting {
            key,
            origin,
            req,
            since: Instant::now(),
        }
    }

    /// The session's own id for it, by which its cancel finds it.
    fn tag(&self) -> Option<String> {
        match &self.origin {
            Origin::Session { client_id, .. } => Some(id_key(client_id)),
            _ => None,
        }
    }
}

/// Why a request may not wait.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Full {
    /// This session has [`MAX_CALLS_PER_SESSION`] calls waiting for a slot.
    Session,
    /// [`MAX_WAITING`] requests of everyone wait.
    Upstream,
}

#[derive(Default)]
pub(super) struct WaitingRoom {
    slot: FairQueue<Waiting>,
    child: VecDeque<Waiting>,
    era: VecDeque<Waiting>,
    /// Calls waiting for their session's input (see `mrtr`).
    pub input: Rounds,
    /// Requests waiting for the child or its era, per key (the slot queue counts its own).
    others_of: HashMap<QueueKey, usize>,
}

impl WaitingRoom {
    /// Whether a request of `key` may wait for `what` now.
    pub fn admit(&self, key: QueueKey, what: WaitsFor) -> Result<(), Full> {
        if self.len() >= MAX_WAITING {
            return Err(Full::Upstream);
        }
        if what == WaitsFor::Slot && self.slot.len_of(key) >= MAX_CALLS_PER_SESSION {
            return Err(Full::Session);
        }
        Ok(())
    }

    /// Let `w` wait for `what` (admitted first: see [`WaitingRoom::admit`]).
    pub fn push(&mut self, what: WaitsFor, w: Waiting) {
        match what {
            WaitsFor::Slot => {
                let (key, tag) = (w.key, w.tag());
                self.slot.push_tagged(key, tag, w);
            }
            WaitsFor::Child => {
                *self.others_of.entry(w.key).or_default() += 1;
                self.child.push_back(w);
            }
            WaitsFor::Era => {
                *self.others_of.entry(w.key).or_default() += 1;
                self.era.push_back(w);
            }
        }
    }

    /// The call whose turn it is, for a free slot.
    pub fn next_call(&mut self) -> Option<Waiting> {
        self.slot.pop().map(|(_, w)| w)
    }

    /// Everything that waited for the child (or for its era), in arrival order: it is ready.
    pub fn take(&mut self, what: WaitsFor) -> Vec<Waiting> {
        let taken: Vec<Waiting> = match what {
            WaitsFor::Slot => return self.slot.drain_all(),
            WaitsFor::Child => self.child.drain(..).collect(),
            WaitsFor::Era => self.era.drain(..).collect(),
        };
        for w in &taken {
            self.uncount(w.key);
        }
        taken
    }

    /// The request session `sid` sent with id `key` (canonical text), taken out wherever it
    /// waits (input rounds aside: `mrtr` ends those).
    pub fn cancel(&mut self, sid: SessionId, key: &str) -> Option<(WaitsFor, Waiting)> {
        if let Some(w) = self.slot.remove_tagged(sid, key) {
            return Some((WaitsFor::Slot, w));
        }
        for what in [WaitsFor::Child, WaitsFor::Era] {
            let list = self.list(what);
            if let Some(pos) = list.iter().position(|w| w.origin.matches_client(sid, key)) {
                let w = list.remove(pos).expect("the position was just found");
                self.uncount(w.key);
                return Some((what, w));
            }
        }
        None
    }

    /// The first call of `key` waiting for a slot that matches (a scan: for rare uses).
    pub fn remove_call(
        &mut self,
        key: QueueKey,
        pred: impl Fn(&Waiting) -> bool,
    ) -> Option<Waiting> {
        self.slot.remove_first(key, pred)
    }

    /// A session went away: what it had waiting, taken out (its input rounds: see `mrtr`).
    pub fn forget_session(&mut self, sid: SessionId) -> Vec<(WaitsFor, Waiting)> {
        let mut out: Vec<(WaitsFor, Waiting)> = self
            .slot
            .remove_key(sid)
            .into_iter()
            .map(|w| (WaitsFor::Slot, w))
            .collect();
        for what in [WaitsFor::Child, WaitsFor::Era] {
            let list = self.list(what);
            let (gone, kept): (Vec<Waiting>, Vec<Waiting>) = list
                .drain(..)
                .partition(|w| w.origin.session() == Some(sid));
            list.extend(kept);
            out.extend(gone.into_iter().map(|w| (what, w)));
        }
        self.others_of.remove(&sid);
        out
    }

    /// Everything but input rounds, for a child that cannot come (shutdown).
    pub fn drain(&mut self) -> Vec<(WaitsFor, Waiting)> {
        let mut out: Vec<(WaitsFor, Waiting)> = self
            .slot
            .drain_all()
            .into_iter()
            .map(|w| (WaitsFor::Slot, w))
            .collect();
        out.extend(self.child.drain(..).map(|w| (WaitsFor::Child, w)));
        out.extend(self.era.drain(..).map(|w| (WaitsFor::Era, w)));
        self.others_of.clear();
        out
    }

    fn list(&mut self, what: WaitsFor) -> &mut VecDeque<Waiting> {
        match what {
            WaitsFor::Era => &mut self.era,
            _ => &mut self.child,
        }
    }

    fn uncount(&mut self, key: QueueKey) {
        if let Some(n) = self.others_of.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.others_of.remove(&key);
            }
        }
    }

    /// Every request that waits, for anything.
    pub fn len(&self) -> usize {
        self.slot.len() + self.child.len() + self.era.len() + self.input.len()
    }

    /// Calls waiting for a slot.
    pub fn calls(&self) -> usize {
        self.slot.len()
    }

    /// Calls of `key` waiting for a slot.
    pub fn calls_of(&self, key: QueueKey) -> usize {
        self.slot.len_of(key)
    }

    /// Every request of session `sid` that waits, for anything.
    pub fn of_session(&self, sid: SessionId) -> usize {
        self.slot.len_of(sid)
            + self.others_of.get(&sid).copied().unwrap_or(0)
            + self.input.of_session(sid)
    }

    /// Whether anything waits for someone other than a session (a control connection, a
    /// background operation): it could not be sent again after an upgrade in place.
    pub fn has_non_session(&self) -> bool {
        let not_a_session = |w: &Waiting| !matches!(w.origin, Origin::Session { .. });
        self.slot.any(not_a_session)
            || self.child.iter().any(not_a_session)
            || self.era.iter().any(not_a_session)
    }

    /// Whether anything waits for the child to be (or become) ready.
    pub fn waits_for_child(&self) -> bool {
        self.slot.len() > 0 || !self.child.is_empty() || !self.era.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Message, raw};

    fn waiting(sid: SessionId, id: u64) -> Waiting {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"x"}}}}"#
        );
        let req = Request::classify(Message::parse(line.as_bytes()).unwrap());
        let origin = Origin::Session {
            id: sid,
            client_id: raw(&id),
        };
        Waiting::new(sid, origin, req)
    }

    #[test]
    fn counts_follow_every_way_in_and_out() {
        let mut room = WaitingRoom::default();
        room.push(WaitsFor::Slot, waiting(1, 1));
        room.push(WaitsFor::Slot, waiting(1, 2));
        room.push(WaitsFor::Child, waiting(1, 3));
        room.push(WaitsFor::Era, waiting(2, 4));
        assert_eq!(
            (
                room.len(),
                room.calls(),
                room.of_session(1),
                room.of_session(2)
            ),
            (4, 2, 3, 1)
        );
        let (what, w) = room.cancel(1, "3").unwrap();
        assert_eq!((what, w.origin.session()), (WaitsFor::Child, Some(1)));
        assert_eq!(room.of_session(1), 2);
        assert!(
            room.cancel(2, "1").is_none(),
            "another session's id is not its own"
        );
        assert_eq!(room.take(WaitsFor::Era).len(), 1);
        assert_eq!(room.of_session(2), 0);
        let gone = room.forget_session(1);
        assert_eq!(gone.len(), 2);
        assert_eq!(room.len(), 0);
    }

    #[test]
    fn the_bounds_hold_per_session_and_for_everyone() {
        let mut room = WaitingRoom::default();
        for i in 0..MAX_CALLS_PER_SESSION as u64 {
            assert_eq!(room.admit(1, WaitsFor::Slot), Ok(()));
            room.push(WaitsFor::Slot, waiting(1, i));
        }
        assert_eq!(room.admit(1, WaitsFor::Slot), Err(Full::Session));
        assert_eq!(
            room.admit(1, WaitsFor::Child),
            Ok(()),
            "the slot bound is for calls"
        );
        let mut sid = 2;
        while room.len() < MAX_WAITING {
            room.push(WaitsFor::Child, waiting(sid, 0));
            sid += 1;
        }
        assert_eq!(room.admit(9999, WaitsFor::Slot), Err(Full::Upstream));
        assert_eq!(room.admit(9999, WaitsFor::Era), Err(Full::Upstream));
    }
}
