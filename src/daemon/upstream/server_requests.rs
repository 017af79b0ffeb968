//! Requests to a client that the daemon handed to one session: the child's own (a
//! handshake-era child's sampling, elicitation, roots) and the input requests of a 2026-07-28
//! child's `input_required` answer (see `mrtr`). The session sees the daemon's own id
//! (`coogle-s<n>`), never the child's, so ids of different children or generations cannot
//! collide in a session, and an answer is accepted only from the session the request went to.

use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::daemon::SessionId;
use crate::wire::{id_key, raw};

pub(super) struct ServerRequest {
    pub session: SessionId,
    pub target: Target,
}

/// Where the session's answer goes.
pub(super) enum Target {
    /// To the child, under the id it used.
    Child(Box<RawValue>),
    /// Into an input round, under the key the child gave the input request.
    Round { round: u64, key: String },
}

#[derive(Default)]
pub(super) struct ServerRequests {
    /// Canonical text of the daemon's id → the request.
    by_id: HashMap<String, ServerRequest>,
    next: u64,
}

impl ServerRequests {
    /// Register a child's request for `session`; returns the id to show the session.
    pub fn insert(&mut self, session: SessionId, child_id: Box<RawValue>) -> Box<RawValue> {
        self.insert_target(session, Target::Child(child_id))
    }

    pub fn insert_target(&mut self, session: SessionId, target: Target) -> Box<RawValue> {
        self.next += 1;
        let id = raw(&format!("coogle-s{}", self.next));
        self.by_id
            .insert(id_key(&id), ServerRequest { session, target });
        id
    }

    /// The request a session's answer (with id `key`) is for, if it went to that session.
    pub fn take_answer(&mut self, session: SessionId, key: &str) -> Option<ServerRequest> {
        match self.by_id.get(key) {
            Some(r) if r.session == session => self.by_id.remove(key),
            _ => None,
        }
    }

    /// The child cancelled its request `child_key`: forget it; returns the session it went to
    /// and the id that session knows it by.
    pub fn cancelled_by_child(&mut self, child_key: &str) -> Option<(SessionId, Box<RawValue>)> {
        let key = self
            .by_id
            .iter()
            .find(|(_, r)| matches!(&r.target, Target::Child(c) if id_key(c) == child_key))
            .map(|(k, _)| k.clone())?;
        let r = self.by_id.remove(&key)?;
        let id = RawValue::from_string(key).ok()?;
        Some((r.session, id))
    }

    /// A session went away: the child's requests it left unanswered (their ids), so the child
    /// can be told.
    pub fn remove_session(&mut self, session: SessionId) -> Vec<Box<RawValue>> {
        let keys: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, r)| r.session == session)
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| self.by_id.remove(&k))
            .filter_map(|r| match r.target {
                Target::Child(id) => Some(id),
                Target::Round { .. } => None,
            })
            .collect()
    }

    /// The child's requests still waiting for their sessions, taken out: (the session, the id
    /// it knows the request by, the child's id).
    pub fn take_child_requests(&mut self) -> Vec<(SessionId, Box<RawValue>, Box<RawValue>)> {
        let keys: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, r)| matches!(r.target, Target::Child(_)))
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| {
                let r = self.by_id.remove(&k)?;
                let shown = RawValue::from_string(k).ok()?;
                match r.target {
                    Target::Child(child) => Some((r.session, shown, child)),
                    Target::Round { .. } => None,
                }
            })
            .collect()
    }

    /// The number the next request is shown to its session under (`coogle-s<n>`).
    pub fn next_number(&self) -> u64 {
        self.next + 1
    }

    /// Show no request under a number below `next`: a daemon that replaced another one numbers
    /// after it, so a session's late answer to the old daemon's request is never taken for the
    /// answer to a new one.
    pub fn number_from(&mut self, next: u64) {
        self.next = self.next.max(next.saturating_sub(1));
    }

    /// The child is gone: its requests can no longer be answered (input rounds can).
    pub fn clear_child(&mut self) {
        self.by_id
            .retain(|_, r| matches!(r.target, Target::Round { .. }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_chosen_session_may_answer() {
        let mut r = ServerRequests::default();
        let id = r.insert(1, raw(&7));
        assert_eq!(id.get(), "\"coogle-s1\"");
        let key = id_key(&id);
        assert!(r.take_answer(2, &key).is_none(), "another session's answer");
        let got = r.take_answer(1, &key).unwrap();
        assert!(matches!(got.target, Target::Child(c) if c.get() == "7"));
        assert!(r.take_answer(1, &key).is_none(), "answered once");
        let id = r.insert(3, raw(&"c"));
        let (s, shown) = r.cancelled_by_child("\"c\"").unwrap();
        assert_eq!((s, shown.get()), (3, id.get()));
        r.insert(4, raw(&1));
        assert_eq!(r.remove_session(4).len(), 1);
    }
}
