//! Children on demand: a child starts at the first request the cache cannot answer, and is
//! parked (stopped) after `idleStopMs` with nothing waiting for or running on it, no live
//! subscription and no task, whether or not sessions are connected: windows left open all day
//! cost no memory. Their sessions stay connected and notice nothing: what they ask next is
//! answered from the cache (as at a cold start) or starts the child again and waits for it; a
//! restarted child is set up as after a respawn (the daemon's `initialize`, log level,
//! subscriptions, its tool list compared). A `stateful` server (a browser's open tabs) is never
//! parked while a session is connected.

use std::time::Instant;

use super::Upstream;
use super::lifecycle::{RESPAWN_COOLDOWN, State};
use crate::daemon::child;
use crate::wire::ErrorCode;

impl Upstream {
    /// Someone wants the child: start it when it is idle; if it failed and is not scheduled
    /// soon, schedule it.
    pub(super) fn demand(&mut self) {
        // Frozen for an upgrade in place: a parked child is the new daemon's to start.
        if self.life.shutting_down() || self.is_frozen() {
            return;
        }
        if self.life.state == State::Idle {
            self.start_child();
            return;
        }
        if self.life.state != State::Failed {
            return;
        }
        let earliest = self
            .life
            .last_attempt
            .map_or_else(Instant::now, |t| t + RESPAWN_COOLDOWN);
        let at = earliest.max(Instant::now());
        if self.life.restart_at.is_none_or(|r| r > at) {
            self.life.restart_at = Some(at);
        }
    }

    /// Stopped for idling: nothing was waiting, and the next demand starts it again.
    pub(super) fn on_idle_stopped(&mut self) {
        child::remove_record(&self.life.record_path);
        self.server_requests.clear_child();
        for p in self.inflight.drain() {
            let text = format!(
                "coogle: the `{}` server stopped while idle; retry",
                self.name
            );
            self.reply_error(p.origin, p.is_call, ErrorCode::UpstreamUnavailable, &text);
        }
        self.own_listen = None;
        self.life.state = State::Idle;
        self.life.parked_since = Some(std::time::SystemTime::now());
        tracing::info!(upstream = %self.name, sessions = self.sessions.len(), "parked the idle upstream; it starts again on demand");
        if self.waiting_for_child() {
            // A demand arrived while it was stopping: it would wait for nothing otherwise.
            self.start_child();
        }
        self.note_idle();
    }

    /// Whether anything needs the child now: a request of anyone's waiting or in flight (a
    /// session's `subscriptions/listen` stream among them; the daemon's own bookkeeping aside),
    /// a background operation, a resource subscription, a task the child may still work on, or,
    /// for a stateful server, any session at all.
    fn needed(&self) -> bool {
        self.waiting_for_child()
            || self.inflight.has_external()
            || self.ops.any_running()
            || self.subscriptions.any()
            || self.tasks.any_running()
            || (self.config.stateful && !self.sessions.is_empty())
    }

    /// Whether someone waits for the child to be (or become) ready.
    fn waiting_for_child(&self) -> bool {
        self.waiting.waits_for_child() || !self.life.restart_waiters.is_empty()
    }

    /// Note whether the child is idle now, after any event.
    pub(super) fn note_idle(&mut self) {
        // The clock runs only once the child is ready: one slower to start than `idleStopMs`
        // would otherwise be stopped before anyone could use it.
        if self.life.state != State::Ready || self.needed() {
            self.life.idle_since = None;
        } else if self.life.idle_since.is_none() {
            self.life.idle_since = Some(Instant::now());
        }
    }

    /// No session, nothing waiting or running, not stopping: the registry may drop this
    /// instance (a project's, say), stopping its child, and nobody loses anything.
    pub(super) fn is_unused(&self) -> bool {
        self.sessions.is_empty() && !self.needed() && !self.life.shutting_down()
    }

    /// When the child is to stop for idling, if it is.
    pub(super) fn idle_deadline(&self) -> Option<Instant> {
        // A frozen child is about to be carried to the next daemon (or, once the hand-over is
        // given up, to serve on): parking it would hand over a child on its way out, and the
        // next daemon would send calls to a dead process.
        if self.life.idle_stop.is_zero() || self.life.idle_stopping || self.is_frozen() {
            return None;
        }
        self.life.idle_since.map(|t| t + self.life.idle_stop)
    }

    /// Nothing needed the child for `idleStopMs`: stop it (it starts again on demand).
    pub(super) fn check_idle(&mut self, now: Instant) {
        if self.idle_deadline().is_some_and(|t| t <= now) && self.life.child.is_some() {
            tracing::info!(upstream = %self.name, sessions = self.sessions.len(), "parking the upstream: idle for {} s", self.life.idle_stop.as_secs());
            self.life.idle_stopping = true;
            self.life.idle_since = None;
            // Not ready any more: what arrives while it stops is held, not sent to a child
            // about to be killed, and starts it again once it is gone (`on_idle_stopped`).
            self.life.state = State::Stopping;
            self.kill_child();
        }
    }
}
