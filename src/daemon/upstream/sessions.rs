//! The sessions bound to this upstream: what each said about itself, and writing to them.
//!
//! Writing never blocks the actor (see [`Outbox`]); a session that stops reading is
//! disconnected rather than allowed to hold everyone else up. A session that goes away takes
//! everything it owned with it: its queued and in-flight calls are cancelled upstream, its
//! tasks cancelled, its subscriptions dropped, and the child's requests that were waiting for
//! it answered with an error.

use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::net::unix::OwnedWriteHalf;

use super::era::Era;
use super::{Internal, Origin, Upstream, log_level};
use crate::daemon::SessionId;
use crate::daemon::outbox::Outbox;
use crate::daemon::stats::{CallStats, Outcome};
use crate::wire::{self, Hello, rpc_code};
use serde_json::json;

/// Lines a session may have waiting to be written before it counts as not reading.
pub(crate) const SESSION_BUFFER: usize = 1024;

pub(super) struct Session {
    pub out: Outbox<OwnedWriteHalf>,
    pub hello: Hello,
    pub connected_at: SystemTime,
    pub connected: Instant,
    pub client_info: Option<Value>,
    pub capabilities: Option<Value>,
    pub protocol_version: Option<String>,
    /// The era the session speaks: handshake once it sent `initialize`, 2026-07-28 once it
    /// sent a request with the envelope (a `server/discover` probe alone decides nothing).
    pub era: Option<Era>,
    pub initialized: bool,
    pub log_level: Option<u8>,
    pub stats: CallStats,
}

impl Upstream {
    pub(super) fn on_session_open(
        &mut self,
        id: SessionId,
        hello: Hello,
        out: Outbox<OwnedWriteHalf>,
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
                protocol_version: None,
                era: None,
                initialized: false,
                log_level: None,
                stats: CallStats::default(),
            },
        );
        self.demand();
    }

    pub(super) fn on_session_closed(&mut self, sid: SessionId) {
        if self.sessions.remove(&sid).is_none() {
            return;
        }
        tracing::info!(upstream = %self.name, session = sid, "session disconnected");
        for _ in self.queue.remove_key(sid) {
            self.stats.record(Outcome::Cancelled, Duration::ZERO);
        }
        self.held.retain(|(_, o, _)| o.session() != Some(sid));
        self.waiting_era.retain(|(s, _)| *s != sid);
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

    pub(super) fn send_to_session(&mut self, sid: SessionId, line: Vec<u8>) {
        let Some(s) = self.sessions.get(&sid) else {
            return;
        };
        match s.out.send(line) {
            Ok(()) if s.out.queued() > SESSION_BUFFER => {
                tracing::warn!(upstream = %self.name, session = sid, "the session is not reading its responses; disconnecting it");
                self.on_session_closed(sid);
            }
            Ok(()) => {}
            Err(_) => self.on_session_closed(sid),
        }
    }

    /// A line for every initialized session.
    pub(super) fn broadcast(&mut self, line: &[u8]) {
        self.send_to_each(line, |_| true);
    }

    /// A log message from the child, to each session whose level admits it.
    pub(super) fn fan_out_log(&mut self, level: u8, line: &[u8]) {
        self.send_to_each(line, |s| log_level::admits(s.log_level, level));
    }

    fn send_to_each(&mut self, line: &[u8], wants: impl Fn(&Session) -> bool) {
        let ids: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.initialized && wants(s))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.send_to_session(id, line.to_vec());
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
