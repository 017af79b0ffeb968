//! The table of requests the child has been sent and has not answered.
//!
//! Each entry is found three ways: by the daemon's own id (`uid`, which the child sees as the
//! request id and as the progress token), by the session and the id that session used, and by
//! deadline. Those indexes, and the counts that drive `maxConcurrent` and `status`, change only
//! in [`InFlight::insert`] and [`InFlight::remove`], so they can never drift apart. What a
//! completed, abandoned or failed request means for the sessions is the actor's business; this
//! table only keeps the books.

use std::collections::{BTreeMap, BTreeSet};

// Looked up several times on every call (SipHash was 4% of the daemon's instructions per call);
// the keys are the daemon's own and the sessions' ids, all of the same user.
use foldhash::{HashMap, HashMapExt};
use std::time::Instant;

use serde_json::value::RawValue;

use super::Origin;
use super::listen::ListenFilter;
use super::tasks::TaskRole;
use crate::daemon::SessionId;
use crate::daemon::handover::carried::{CarriedAbandoned, CarriedAbandonedRequest};
use crate::wire::id_key;

/// How long an abandoned request still counts as possibly running in the child. A child told
/// to cancel should stop at once; one that does not, past this, is taken to have given up.
const ABANDONED_WATCH: std::time::Duration = std::time::Duration::from_secs(600);
/// Abandoned requests remembered at the most; past this, every child request is ambiguous
/// until they drain.
const ABANDONED_MAX: usize = 1024;

/// Who a request the child works on is for: a session, or someone who cannot answer a
/// request from the child (a control connection, a background operation).
pub(super) type Caller = Option<SessionId>;

/// One request the child is working on.
pub(super) struct Pending {
    pub origin: Origin,
    pub is_call: bool,
    /// The tool of a call, for messages.
    pub tool: Option<String>,
    pub started: Instant,
    /// `None` for a `subscriptions/listen` stream, which lasts as long as its session wants.
    pub deadline: Option<Instant>,
    /// The session's own progress token; the child was given the uid instead.
    pub token: Option<Box<RawValue>>,
    pub task: TaskRole,
    /// For calls to an upstream that asks for sign-ins (see `sign_in`): the account, to notice
    /// sign-in requests and their completion. `None`: the answer is not read for one.
    pub account: Option<String>,
    /// A session's first-page `tools/list`: the `coogle` tool is added to the answer.
    pub first_tools_page: bool,
    /// A first-page `tools/list`: the cache key and capabilities its answer is kept under.
    pub tools_key: Option<(String, Box<RawValue>)>,
    /// A session's `subscriptions/listen`: what it asked to hear.
    pub listen: Option<ListenFilter>,
    /// The log level this request asked for (2026-07-28 child: logs are request-scoped).
    pub log_level: Option<u8>,
    /// The request went to a 2026-07-28 child for someone of the handshake era: its answer is
    /// shown as that era would have it.
    pub handshake_view: bool,
    /// A handshake-era session's request to a 2026-07-28 child, as the session sent it, kept
    /// to retry it with the input the child may ask for (see `mrtr`).
    pub retry: Option<Retry>,
}

/// A request kept for a retry with input.
pub(super) struct Retry {
    pub msg: crate::wire::Message,
    /// Input rounds so far.
    pub rounds: u32,
}

/// A request nobody waits for that the child may still be working on.
struct Abandoned {
    caller: Caller,
    since: Instant,
    /// The log level it asked for (a 2026-07-28 child logs for it on its stream).
    log_level: Option<u8>,
}

pub(super) struct InFlight {
    pending: HashMap<u64, Pending>,
    /// Requests nobody waits for any more (timed out, cancelled, their session gone) that the
    /// child may still be working on: a request or a log the child sends meanwhile may be
    /// theirs.
    abandoned: BTreeMap<u64, Abandoned>,
    /// More were abandoned than are remembered: who caused a child's request cannot be known.
    abandoned_overflow: bool,
    deadlines: BTreeSet<(Instant, u64)>,
    by_client: HashMap<(SessionId, String), u64>,
    per_session: HashMap<SessionId, usize>,
    /// `tools/call`s in flight, against `maxConcurrent`.
    calls: usize,
    next_uid: u64,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            pending: HashMap::new(),
            abandoned: BTreeMap::new(),
            abandoned_overflow: false,
            deadlines: BTreeSet::new(),
            by_client: HashMap::new(),
            per_session: HashMap::new(),
            calls: 0,
            next_uid: 1,
        }
    }
}

impl InFlight {
    /// A fresh id for a request to the child; never reused while the daemon runs.
    pub fn take_uid(&mut self) -> u64 {
        let uid = self.next_uid;
        self.next_uid += 1;
        uid
    }

    /// The id [`InFlight::take_uid`] gives next.
    pub fn next_uid(&self) -> u64 {
        self.next_uid
    }

    /// Give no id below `next` from now on: a child carried from a replaced daemon may still
    /// answer that daemon's requests, whose ids were below it.
    pub fn number_from(&mut self, next: u64) {
        self.next_uid = self.next_uid.max(next);
    }

    pub fn insert(&mut self, uid: u64, p: Pending) {
        if let Some(d) = p.deadline {
            self.deadlines.insert((d, uid));
        }
        if let Origin::Session { id, client_id } = &p.origin {
            self.by_client.insert((*id, id_key(client_id)), uid);
            *self.per_session.entry(*id).or_default() += 1;
        }
        if p.is_call {
            self.calls += 1;
        }
        self.pending.insert(uid, p);
    }

    /// Take an entry out of every index: answered, abandoned, or failed.
    pub fn remove(&mut self, uid: u64) -> Option<Pending> {
        let p = self.pending.remove(&uid)?;
        if let Some(d) = p.deadline {
            self.deadlines.remove(&(d, uid));
        }
        if let Origin::Session { id, client_id } = &p.origin {
            let key = (*id, id_key(client_id));
            // A session that reused an id still in flight owns the newer entry under it.
            if self.by_client.get(&key) == Some(&uid) {
                self.by_client.remove(&key);
            }
            if let Some(n) = self.per_session.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    self.per_session.remove(id);
                }
            }
        }
        if p.is_call {
            self.calls -= 1;
        }
        Some(p)
    }

    /// `p` (just removed) is no longer waited for, but the child may go on with it: remember
    /// whose it was, for attributing what the child asks meanwhile.
    pub fn abandoned(&mut self, uid: u64, p: &Pending) {
        if matches!(p.origin, Origin::Internal(_)) {
            return;
        }
        if self.abandoned.len() >= ABANDONED_MAX {
            self.abandoned_overflow = true;
            return;
        }
        self.abandoned.insert(
            uid,
            Abandoned {
                caller: p.origin.session(),
                since: Instant::now(),
                log_level: p.log_level,
            },
        );
    }

    /// The child answered `uid` after all: it is done with it.
    pub fn settled(&mut self, uid: u64) {
        self.abandoned.remove(&uid);
        if self.abandoned.is_empty() {
            self.abandoned_overflow = false;
        }
    }

    /// Everyone the child may be working for: the callers of requests in flight and of
    /// abandoned ones it may still be on. `None` when that cannot be known (too many abandoned).
    pub fn callers(&mut self, now: Instant) -> Option<BTreeSet<Caller>> {
        if !self.watch_abandoned(now) {
            return None;
        }
        let live = self
            .pending
            .values()
            .filter(|p| !matches!(p.origin, Origin::Internal(_)))
            .map(|p| p.origin.session());
        Some(
            live.chain(self.abandoned.values().map(|a| a.caller))
                .collect(),
        )
    }

    /// Forget abandoned requests past the watch; false when who they were cannot be known
    /// (more were abandoned than are remembered).
    fn watch_abandoned(&mut self, now: Instant) -> bool {
        self.abandoned
            .retain(|_, a| now.duration_since(a.since) < ABANDONED_WATCH);
        if self.abandoned.is_empty() {
            self.abandoned_overflow = false;
        }
        !self.abandoned_overflow
    }

    /// The abandoned requests, for a hand-over (see [`CarriedAbandoned`]).
    pub fn carry_abandoned(&mut self, now: Instant) -> CarriedAbandoned {
        let overflow = !self.watch_abandoned(now);
        CarriedAbandoned {
            requests: self
                .abandoned
                .iter()
                .map(|(&uid, a)| CarriedAbandonedRequest {
                    uid,
                    age_ms: u64::try_from(now.duration_since(a.since).as_millis())
                        .unwrap_or(u64::MAX),
                    log_level: a.log_level,
                })
                .collect(),
            overflow,
        }
    }

    /// The replaced daemon's abandoned requests, as requests of nobody who can be asked (their
    /// sessions are not known here): while the child may still be on one, what it asks is
    /// never taken for the one busy session's.
    pub fn adopt_abandoned(&mut self, carried: &CarriedAbandoned, now: Instant) {
        for r in carried.requests.iter().take(ABANDONED_MAX) {
            let age = std::time::Duration::from_millis(r.age_ms);
            let since = now.checked_sub(age).unwrap_or(now);
            self.abandoned.insert(
                r.uid,
                Abandoned {
                    caller: None,
                    since,
                    log_level: r.log_level,
                },
            );
        }
        self.abandoned_overflow |= carried.overflow || carried.requests.len() > ABANDONED_MAX;
    }

    /// The abandoned requests of session `sid`, for a hand-over.
    pub fn abandoned_of(&self, sid: SessionId) -> Vec<u64> {
        self.abandoned
            .iter()
            .filter(|(_, a)| a.caller == Some(sid))
            .map(|(&uid, _)| uid)
            .collect()
    }

    /// A session is back after a hand-over: its requests the replaced daemon gave up on are
    /// its own again.
    pub fn reattribute(&mut self, uids: &[u64], sid: SessionId) {
        for uid in uids {
            if let Some(a) = self.abandoned.get_mut(uid)
                && a.caller.is_none()
            {
                a.caller = Some(sid);
            }
        }
    }

    /// Everything, for a child that is gone.
    pub fn drain(&mut self) -> Vec<Pending> {
        self.abandoned.clear();
        self.abandoned_overflow = false;
        let uids: Vec<u64> = self.pending.keys().copied().collect();
        uids.into_iter().filter_map(|u| self.remove(u)).collect()
    }

    pub fn get(&self, uid: u64) -> Option<&Pending> {
        self.pending.get(&uid)
    }

    /// The uid of the request `session` sent with id `key` (canonical text).
    pub fn find_client(&self, session: SessionId, key: &str) -> Option<u64> {
        self.by_client.get(&(session, key.to_string())).copied()
    }

    pub fn find(&self, pred: impl Fn(&Pending) -> bool) -> Option<u64> {
        self.pending.iter().find(|(_, p)| pred(p)).map(|(u, _)| *u)
    }

    pub fn of_session(&self, session: SessionId) -> Vec<u64> {
        self.by_client
            .iter()
            .filter(|((s, _), _)| *s == session)
            .map(|(_, uid)| *uid)
            .collect()
    }

    /// Where progress for token `uid` goes: the session and its own token.
    pub fn progress_owner(&self, uid: u64) -> Option<(SessionId, &RawValue)> {
        let p = self.pending.get(&uid)?;
        match (&p.origin, &p.token) {
            (Origin::Session { id, .. }, Some(token)) => Some((*id, token)),
            _ => None,
        }
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    /// The uid whose deadline passed first, if any has by `now`; its deadline is taken away
    /// (the entry stays: what a timeout means is the caller's to decide).
    pub fn expire(&mut self, now: Instant) -> Option<u64> {
        let &(t, uid) = self.deadlines.first()?;
        if t > now {
            return None;
        }
        self.deadlines.pop_first();
        if let Some(p) = self.pending.get_mut(&uid) {
            p.deadline = None;
        }
        Some(uid)
    }

    /// Whether anyone but the daemon itself waits for the child.
    pub fn has_external(&self) -> bool {
        self.pending
            .values()
            .any(|p| !matches!(p.origin, Origin::Internal(_)))
    }

    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Requests of anyone but the daemon that the child works on, calls and the rest, but not
    /// subscription streams (which last as long as their session wants).
    pub fn requests(&self) -> usize {
        self.pending
            .values()
            .filter(|p| !matches!(p.origin, Origin::Internal(_)) && p.listen.is_none())
            .count()
    }

    pub fn of_session_count(&self, session: SessionId) -> usize {
        self.per_session.get(&session).copied().unwrap_or(0)
    }

    /// Who a 2026-07-28 child's log message at `level` is for (its logs are request-scoped,
    /// sent on the request's stream, with nothing in the message to say which request): the one
    /// session with requests in flight that asked for that level. `Err(n)` when that cannot be
    /// told: `n` sessions might own it, counting requests that timed out or were cancelled but
    /// that the child may still be logging for (an abandoned call's logs reach nobody, not
    /// another session that happens to be listening); `Err(0)` when nobody asked.
    pub fn log_owner(&mut self, level: u8, now: Instant) -> Result<SessionId, usize> {
        let admits = |min: Option<u8>| min.is_some_and(|min| level >= min);
        let mut live: Vec<SessionId> = self
            .pending
            .values()
            .filter(|p| admits(p.log_level))
            .filter_map(|p| p.origin.session())
            .collect();
        live.sort_unstable();
        live.dedup();
        if !self.watch_abandoned(now) {
            return Err(live.len().max(2));
        }
        let mut owners: BTreeSet<Caller> = live.iter().map(|s| Some(*s)).collect();
        owners.extend(
            self.abandoned
                .values()
                .filter(|a| admits(a.log_level))
                .map(|a| a.caller),
        );
        match (live.as_slice(), owners.len()) {
            ([only], 1) => Ok(*only),
            (_, n) => Err(n),
        }
    }

    /// The uids of every session's open `subscriptions/listen`.
    pub fn listen_uids(&self) -> Vec<u64> {
        self.pending
            .iter()
            .filter(|(_, p)| p.listen.is_some())
            .map(|(u, _)| *u)
            .collect()
    }

    /// Every session's open `subscriptions/listen`: (session, its listen id) and its filter.
    pub fn listens(&self) -> impl Iterator<Item = ((SessionId, Box<RawValue>), ListenFilter)> + '_ {
        self.pending
            .values()
            .filter_map(|p| match (&p.listen, &p.origin) {
                (Some(f), Origin::Session { id, client_id }) => {
                    Some(((*id, client_id.clone()), *f))
                }
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::raw;
    use std::time::Duration;

    fn pending(origin: Origin, is_call: bool, deadline: Instant) -> Pending {
        Pending {
            origin,
            is_call,
            tool: None,
            started: Instant::now(),
            deadline: Some(deadline),
            token: Some(raw(&"tok")),
            task: TaskRole::None,
            account: None,
            first_tools_page: false,
            tools_key: None,
            listen: None,
            log_level: None,
            handshake_view: false,
            retry: None,
        }
    }

    fn session(id: SessionId, client: &str) -> Origin {
        Origin::Session {
            id,
            client_id: raw(&client),
        }
    }

    #[test]
    fn every_index_follows_insert_and_remove() {
        let mut t = InFlight::default();
        let now = Instant::now();
        let (a, b) = (t.take_uid(), t.take_uid());
        t.insert(
            a,
            pending(session(1, "x"), true, now + Duration::from_secs(2)),
        );
        t.insert(
            b,
            pending(session(2, "x"), false, now + Duration::from_secs(1)),
        );
        assert_eq!(t.calls(), 1);
        assert_eq!(t.find_client(1, "\"x\""), Some(a));
        assert_eq!(t.progress_owner(b).map(|(s, _)| s), Some(2));
        assert_eq!(t.expire(now), None);
        assert_eq!(t.expire(now + Duration::from_secs(1)), Some(b));
        assert_eq!(t.get(b).unwrap().deadline, None);
        assert_eq!(t.next_deadline(), Some(now + Duration::from_secs(2)));
        let callers: Vec<_> = t.callers(now).unwrap().into_iter().collect();
        assert_eq!(callers, vec![Some(1), Some(2)]);
        assert!(t.remove(a).is_some());
        assert_eq!((t.calls(), t.of_session_count(1)), (0, 0));
        assert_eq!(t.find_client(1, "\"x\""), None);
        assert!(t.remove(a).is_none(), "removed once");
        assert_eq!(t.drain().len(), 1);
        assert_eq!(t.next_deadline(), None);
        assert!(t.callers(now).unwrap().is_empty());
    }

    #[test]
    fn an_abandoned_request_counts_until_the_child_answers_it() {
        let mut t = InFlight::default();
        let now = Instant::now();
        let a = t.take_uid();
        t.insert(
            a,
            pending(session(1, "x"), true, now + Duration::from_secs(5)),
        );
        let p = t.remove(a).unwrap();
        t.abandoned(a, &p);
        let b = t.take_uid();
        t.insert(
            b,
            pending(session(2, "y"), true, now + Duration::from_secs(5)),
        );
        let callers: Vec<_> = t.callers(now).unwrap().into_iter().collect();
        assert_eq!(
            callers,
            vec![Some(1), Some(2)],
            "1's call may still be running"
        );
        t.settled(a);
        let callers: Vec<_> = t.callers(now).unwrap().into_iter().collect();
        assert_eq!(callers, vec![Some(2)]);
        // Past the watch, an abandoned request no longer counts.
        t.abandoned(a, &p);
        let later = now + ABANDONED_WATCH + Duration::from_secs(1);
        assert_eq!(t.callers(later).unwrap().len(), 1);
    }

    /// A session that sends a second request with an id still in flight keeps finding the
    /// newer one; the first one's answer must not unlink it.
    #[test]
    fn a_reused_id_keeps_the_newer_entry() {
        let mut t = InFlight::default();
        let later = Instant::now() + Duration::from_secs(5);
        let (a, b) = (t.take_uid(), t.take_uid());
        t.insert(a, pending(session(1, "x"), false, later));
        t.insert(b, pending(session(1, "x"), false, later));
        t.remove(a);
        assert_eq!(t.find_client(1, "\"x\""), Some(b));
        assert_eq!(t.of_session_count(1), 1);
    }
}
