//! The sessions bound to this upstream: what each said about itself, and writing to them.
//!
//! Writing never blocks the actor (see [`Outbox`]); a session that stops reading is
//! disconnected rather than allowed to hold everyone else up. A session that goes away takes
//! everything it owned with it: its queued and in-flight calls are cancelled upstream, its
//! tasks cancelled, its subscriptions dropped, and the child's requests that were waiting for
//! it answered with an error.

use std::time::{Duration, Instant, SystemTime};

use crate::daemon::session_socket::SessionWriter;
use serde_json::Value;

use super::era::{self, Era};
use super::request::MetaMemo;
use super::{Internal, Origin, Upstream, log_level};
use crate::daemon::SessionId;
use crate::daemon::operations::Owner;
use crate::daemon::outbox::Outbox;
use crate::daemon::stats::{CallStats, Outcome};
use crate::wire::{self, Hello, rpc_code};
use serde_json::json;

/// Lines queued for a session past which its notifications are dropped (list changes are kept,
/// once each, for when it reads again): a session that pauses must not have its own answers
/// wait behind a noisy child's logs, nor make the daemon hold them.
const NOTICE_LIMIT: usize = 256;
/// What a session may leave unread before it is disconnected, the last resort: its answers
/// are never dropped, so this bounds the memory the daemon holds for one session.
const UNREAD_LIMIT_BYTES: usize = 64 << 20;
const UNREAD_LIMIT_LINES: usize = 65_536;
/// How often missed list changes are retried for a session that is not reading.
pub(super) const MISSED_RETRY: Duration = Duration::from_millis(250);

pub(super) struct Session {
    pub out: Outbox<SessionWriter>,
    pub hello: Hello,
    pub connected_at: SystemTime,
    pub connected: Instant,
    pub client_info: Option<Value>,
    pub capabilities: Option<Value>,
    /// The two as JSON text, written once at `initialize`: the envelope on each of the
    /// session's requests to a 2026-07-28 child quotes them (written afresh, it was 4% of the
    /// daemon's work per call).
    pub envelope_text: era::EnvelopeText,
    pub protocol_version: Option<String>,
    /// The era the session speaks: handshake once it sent `initialize`, 2026-07-28 once it
    /// sent a request with the envelope (a `server/discover` probe alone decides nothing).
    pub era: Option<Era>,
    pub initialized: bool,
    pub log_level: Option<u8>,
    pub stats: CallStats,
    /// Notifications not delivered because the session was not reading.
    pub dropped: u64,
    /// List changes it missed meanwhile, delivered once it reads again.
    pub missed: Vec<Vec<u8>>,
    /// Its last request's `params._meta`, read (see [`MetaMemo`]).
    pub meta_memo: MetaMemo,
}

impl Upstream {
    pub(super) fn on_session_open(
        &mut self,
        id: SessionId,
        hello: Hello,
        out: Outbox<SessionWriter>,
    ) {
        tracing::info!(upstream = %self.name, session = id, pid = ?hello.pid, claude_session = ?hello.claude_session_id, "session connected");
        self.sessions.insert(
            id,
            Session {
                out,
                hello,
                connected_at: SystemTime::now(),
                connected: Instant::now(),
                client_info: None,
                capabilities: None,
                envelope_text: era::EnvelopeText::of(None, None),
                protocol_version: None,
                era: None,
                initialized: false,
                log_level: None,
                stats: CallStats::default(),
                dropped: 0,
                missed: Vec::new(),
                meta_memo: MetaMemo::default(),
            },
        );
        self.restore_session(id);
    }

    pub(super) fn on_session_closed(&mut self, sid: SessionId) {
        let Some(session) = self.sessions.remove(&sid) else {
            return;
        };
        tracing::info!(upstream = %self.name, session = sid, "session disconnected");
        for (what, w) in self.waiting.forget_session(sid) {
            if what != super::waiting::WaitsFor::Slot {
                continue;
            }
            self.stats.record(Outcome::Cancelled, Duration::ZERO);
            // A background call that had not started yet: its owner (back after a reconnect)
            // finds it cancelled, not running forever.
            if let Origin::Operation(op) = w.origin {
                let text = format!(
                    "coogle: operation {op} was cancelled: the session that started it disconnected before it ran"
                );
                self.finish_operation(&op, wire::raw(&wire::tool_error_result(&text)));
            }
        }
        self.forget_operations_of(&Owner::of(sid, &session.hello));
        self.forget_rounds(sid);
        self.ops.forget_session(sid);
        let ready = self.life.is_ready();
        for task_id in self.tasks.remove_session(sid) {
            if ready {
                self.send_internal(
                    Internal::Housekeeping,
                    "tasks/cancel",
                    &json!({"taskId": task_id}),
                );
            }
        }
        let abandoned = self.subscriptions.remove_session(sid);
        if ready && !abandoned.is_empty() {
            if self.child_is_modern() {
                self.open_own_listen();
            } else {
                for uri in abandoned {
                    let params = json!({"uri": uri});
                    self.send_internal(Internal::Housekeeping, "resources/unsubscribe", &params);
                }
            }
        }
        for uid in self.inflight.of_session(sid) {
            self.abandon(uid, "the client disconnected", Outcome::Cancelled);
        }
        for child_id in self.server_requests.remove_session(sid) {
            self.to_child(wire::error_line(
                Some(&child_id),
                rpc_code::INTERNAL_ERROR,
                "coogle: the session this request was routed to disconnected",
            ));
        }
    }

    /// An answer (or a request) for one session: never dropped. A session that leaves too much
    /// of them unread is disconnected, and told why.
    pub(super) fn send_to_session(&mut self, sid: SessionId, line: Vec<u8>) {
        self.deliver_missed(sid);
        let Some(s) = self.sessions.get(&sid) else {
            return;
        };
        match s.out.send(line) {
            Ok(())
                if s.out.queued_bytes() > UNREAD_LIMIT_BYTES
                    || s.out.queued() > UNREAD_LIMIT_LINES =>
            {
                self.disconnect_unread(sid)
            }
            Ok(()) => {}
            Err(_) => self.on_session_closed(sid),
        }
    }

    /// A notification for one session: dropped (and counted) while the session has more than
    /// a little unread; a list change is kept, once, for when it reads again.
    pub(super) fn notify_session(&mut self, sid: SessionId, line: Vec<u8>, keep_if_missed: bool) {
        let Some(s) = self.sessions.get_mut(&sid) else {
            return;
        };
        if s.out.queued() >= NOTICE_LIMIT {
            s.dropped += 1;
            if keep_if_missed && !s.missed.contains(&line) && s.missed.len() < 16 {
                s.missed.push(line);
                self.missed_retry_at
                    .get_or_insert_with(|| Instant::now() + MISSED_RETRY);
            }
            return;
        }
        self.send_to_session(sid, line);
    }

    /// Deliver what a session missed, once it is reading again.
    fn deliver_missed(&mut self, sid: SessionId) {
        let Some(s) = self.sessions.get_mut(&sid) else {
            return;
        };
        if s.missed.is_empty() || s.out.queued() >= NOTICE_LIMIT {
            return;
        }
        for line in std::mem::take(&mut s.missed) {
            if s.out.send(line).is_err() {
                break;
            }
        }
    }

    /// Retry missed list changes for every session (on a timer, for sessions that went quiet).
    pub(super) fn retry_missed(&mut self, now: Instant) {
        if self.missed_retry_at.is_none_or(|t| t > now) {
            return;
        }
        self.missed_retry_at = None;
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for sid in ids {
            self.deliver_missed(sid);
        }
        if self.sessions.values().any(|s| !s.missed.is_empty()) {
            self.missed_retry_at = Some(now + MISSED_RETRY);
        }
    }

    /// The last resort for a session that does not read its answers: say why at the end of
    /// what it has to read, and close it.
    fn disconnect_unread(&mut self, sid: SessionId) {
        let Some(s) = self.sessions.get(&sid) else {
            return;
        };
        let reason = format!(
            "coogle disconnected this session: it left {} answers ({} KiB) unread on the `{}` server",
            s.out.queued(),
            s.out.queued_bytes() / 1024,
            self.name
        );
        tracing::warn!(upstream = %self.name, session = sid, "{reason}");
        let params = json!({"reason": reason});
        let _ = s.out.send(wire::notification_line(
            wire::DISCONNECTED_NOTICE,
            Some(&params),
        ));
        self.on_session_closed(sid);
    }

    /// A line for every initialized (handshake-era) session; a list change is kept for one
    /// that is not reading.
    pub(super) fn broadcast(&mut self, line: &[u8], keep_if_missed: bool) {
        self.notify_each(line, keep_if_missed, |_| true);
    }

    /// A log message from the child, to each session whose level admits it.
    pub(super) fn fan_out_log(&mut self, level: u8, line: &[u8]) {
        self.notify_each(line, false, |s| log_level::admits(s.log_level, level));
    }

    fn notify_each(&mut self, line: &[u8], keep: bool, wants: impl Fn(&Session) -> bool) {
        let ids: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.initialized && wants(s))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.notify_session(id, line.to_vec(), keep);
        }
    }

    pub(super) fn count_session_outcome(
        &mut self,
        origin: &Origin,
        outcome: Outcome,
        latency: Duration,
    ) {
        if let Some(sid) = origin.session()
            && let Some(s) = self.sessions.get_mut(&sid)
        {
            s.stats.record(outcome, latency);
        }
    }
}
