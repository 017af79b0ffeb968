//! An upstream's side of an upgrade in place: its running child goes on running, and the new
//! daemon (this process, after an exec) takes it over.
//!
//! First the actor is *frozen*: nothing new is sent to the child (a request that needs it
//! waits, and a parked child is not started), while what the child works on finishes. Once
//! nothing is in flight, the daemon *detaches* every frozen actor: each tells its sessions
//! that it hands over (their shims send what was not answered to the new daemon: none of it
//! was started), ends the child's subscription streams (sessions open theirs again), and lets
//! go of the child's pipes whole, with what it knew of the child and of each session. A freeze
//! that does not reach idle in time is undone, and the hand-over waits for a quieter moment:
//! no call is ever lost or answered twice.
//!
//! On the other side, [`Upstream::adopt`] wires the carried child to a new actor, ready at
//! once, and a session that reconnects with its shim's token gets back what it had set up.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tokio::sync::oneshot;

use super::child_io::{self, DetachedPipes};
use super::era::Era;
use super::lifecycle::State;
use super::{Internal, Upstream};
use crate::daemon::SessionId;
use crate::daemon::child;
use crate::daemon::handover::carried::{CarriedChild, CarriedInstance, CarriedSession};
use crate::wire;

/// How long what a session had set up waits for it to reconnect to the new daemon.
const SESSIONS_RETURN: Duration = Duration::from_secs(60);

/// The longest an adopted child's stdout waits for its sessions to reconnect before it is read
/// (shims reconnect within milliseconds; one that does not must not hold the others up).
const READ_GATE_MAX: Duration = Duration::from_secs(2);

/// A child let go of, with what is carried with it.
pub(crate) struct Detached {
    pub instance: CarriedInstance,
    pub pipes: DetachedPipes,
}

/// A carried child to take over.
pub(crate) struct Adopted {
    pub instance: CarriedInstance,
    pub pipes: DetachedPipes,
}

/// The freeze in place.
pub(super) struct Frozen {
    /// Told once nothing is in flight.
    idle: Option<oneshot::Sender<()>>,
}

impl Upstream {
    /// Send the child nothing new; `idle` hears once it works on nothing.
    pub(super) fn freeze(&mut self, idle: oneshot::Sender<()>) {
        self.frozen = Some(Frozen { idle: Some(idle) });
        self.check_frozen();
    }

    /// The hand-over did not happen: serve as before, what waited first.
    pub(super) fn unfreeze(&mut self) {
        if self.frozen.take().is_none() {
            return;
        }
        if self.life.is_ready() {
            for w in self.waiting.take(super::waiting::WaitsFor::Child) {
                self.forward(w.key, w.origin, w.req);
            }
            self.pump();
        } else if self.waiting.waits_for_child() {
            self.demand();
        }
    }

    /// Nothing that cannot be carried or sent again: no request at the child (a session's
    /// subscription stream aside), no input round, no background operation, no control
    /// request waiting (its connection ends with this daemon).
    fn quiet(&self) -> bool {
        self.inflight.requests() == 0
            && self.waiting.input.len() == 0
            && !self.ops.any_running()
            && !self.waiting.has_non_session()
    }

    /// After any event: a frozen actor that became quiet says so.
    pub(super) fn check_frozen(&mut self) {
        if self.quiet()
            && let Some(f) = &mut self.frozen
            && let Some(idle) = f.idle.take()
        {
            let _ = idle.send(());
        }
    }

    pub(super) fn is_frozen(&self) -> bool {
        self.frozen.is_some()
    }

    /// Let go of the running child for the new daemon; `None` when there is nothing to carry
    /// (no child running, an instance of an old shim's connection) or the actor is not frozen
    /// and quiet (it serves on then). Once it answers `Some`, the actor is gone.
    pub(super) fn detach(&mut self, reply: oneshot::Sender<Option<Detached>>) {
        if !(self.is_frozen() && self.quiet()) {
            let _ = reply.send(None);
            return;
        }
        // Every session is told, whether or not a child is carried: what it sent that was not
        // answered (held by the freeze) it sends again to the new daemon, so none of it may be
        // answered here with an error (see `begin_shutdown`).
        let notice = wire::notification_line(wire::HANDOVER_NOTICE, None);
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for sid in &ids {
            self.send_to_session(*sid, notice.clone());
        }
        self.handed_over = true;
        let ready = self.life.state == State::Ready && self.life.child.is_some();
        if self.carried_as.is_none() || !ready {
            let _ = reply.send(None);
            return;
        }
        // The child's subscription streams end with this daemon: the sessions' shims send
        // their `subscriptions/listen` again, and the new daemon opens its own.
        let mut streams: Vec<u64> = self.inflight.listen_uids();
        streams.extend(self.own_listen.take());
        for uid in streams {
            self.inflight.remove(uid);
            self.to_child(wire::notification_line(
                "notifications/cancelled",
                Some(&json!({"requestId": uid, "reason": "coogle is upgrading in place"})),
            ));
        }
        // What the child wrote up to now still reaches the sessions, which are connected
        // until the exec: the reader lets go, and the detach ends once its last line is handled
        // (`finish_detach`, on `ReaderStopped`).
        match &self.life.child {
            Some(c) if c.reading() => {
                self.detaching = Some(reply);
                c.stop_reading();
            }
            // Its stdout is closed: it can never answer again, and is on its way out.
            _ => {
                let _ = reply.send(None);
            }
        }
    }

    /// The child died while it was being let go of: nothing to carry.
    pub(super) fn detach_failed(&mut self) {
        if let Some(reply) = self.detaching.take() {
            let _ = reply.send(None);
        }
    }

    /// The stdout reader let go: every line it read was handled. Take the pipes and what is
    /// carried with them; the actor ends.
    pub(super) fn finish_detach(&mut self) {
        let Some(reply) = self.detaching.take() else {
            return;
        };
        if reply.is_closed() {
            // The daemon stopped waiting (see `DETACH_WAIT`): the child stays this actor's,
            // and stops with it.
            return;
        }
        // Only a child that is still ready is carried: one that began stopping meanwhile (it
        // crashed, or was restarted) is on its way out, and adopting it as ready would send the
        // next daemon's calls to a dying process.
        if self.life.state != State::Ready {
            let _ = reply.send(None);
            return;
        }
        // Here, not when the detach began: the reader handled every line up to now, requests
        // the child put to sessions meanwhile among them (and the child's stdin is still ours).
        self.settle_child_requests();
        let (Some(scope), Some(handle)) = (self.carried_as.clone(), self.life.child.take()) else {
            let _ = reply.send(None);
            return;
        };
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        let sessions = ids
            .iter()
            .filter_map(|sid| self.carried_session(*sid))
            .collect();
        let pid = handle.pid;
        let started_at_ms = handle
            .started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let instance = CarriedInstance {
            server: self.name.clone(),
            scope,
            passed_env: self.passed_env.clone(),
            launch_key: self.config.launch_key(),
            child: CarriedChild {
                pid,
                started_at_ms,
                stdin: -1,
                stdout: -1,
                stderr: -1,
                stdout_pending: Vec::new(),
                stderr_pending: Vec::new(),
                generation: self.life.generation,
            },
            cache: self.cache.snapshot(),
            restarts: self.life.restarts,
            child_log_level: self.child_log_level,
            sessions,
            next_uid: self.inflight.next_uid(),
            abandoned: self.inflight.carry_abandoned(Instant::now()),
            next_server_request: self.server_requests.next_number(),
        };
        // Nothing of this child may reach this actor any more. It stays one of the reaper's
        // leaders, though: it is still this process's child, carried over, and another child's
        // exit before the exec (one stopped for the hand-over, one that parks or crashes) must
        // not take it for an orphan (`sweep_all_but` keeps it too).
        self.detached = true;
        let name = self.name.clone();
        tokio::spawn(async move {
            match handle.detach().await {
                Ok(pipes) => {
                    let _ = reply.send(Some(Detached { instance, pipes }));
                }
                Err(e) => {
                    tracing::error!(upstream = %name, pid, "could not let go of the child's pipes ({e}); stopping it");
                    child::signal_group(pid, libc::SIGKILL);
                    let _ = reply.send(None);
                }
            }
        });
    }

    /// What the child asked a session and is still waiting for can be answered by nobody after
    /// the exec (the session's answer reaches the new daemon, which never asked): the child is
    /// told now, as when the session disconnects, and the session that it may drop the request.
    fn settle_child_requests(&mut self) {
        for (sid, shown, child_id) in self.server_requests.take_child_requests() {
            self.to_child(wire::error_line(
                Some(&child_id),
                wire::rpc_code::INTERNAL_ERROR,
                "coogle: the daemon was upgraded while its session's answer was awaited",
            ));
            let cancelled = json!({"requestId": shown, "reason": "coogle is upgrading in place"});
            self.send_to_session(
                sid,
                wire::notification_line("notifications/cancelled", Some(&cancelled)),
            );
        }
    }

    /// What session `sid` set up on this child, to carry by its shim's token (a session of an
    /// older shim, without one, cannot be told from another when it reconnects).
    fn carried_session(&self, sid: SessionId) -> Option<CarriedSession> {
        let s = self.sessions.get(&sid)?;
        let token = s.hello.session_token.as_ref()?;
        Some(CarriedSession {
            token: token.secret().to_string(),
            log_level: s.log_level,
            subscriptions: self.subscriptions.of_session(sid),
            tasks: self.tasks.of_session(sid),
            initialized: s.initialized,
            abandoned: self.inflight.abandoned_of(sid),
        })
    }

    /// Take over a child the daemon this one replaced let go of: ready at once, as it was.
    pub(super) fn adopt(&mut self, adopted: Adopted) {
        let Adopted { instance, pipes } = adopted;
        let pid = pipes.pid;
        self.cache
            .restore(&instance.cache, &self.config.client_capabilities.clone());
        self.life.generation = instance.child.generation.max(self.life.generation) + 1;
        // Before anything is sent to the child: the old daemon's late answers match nothing.
        self.inflight.number_from(instance.next_uid);
        self.inflight
            .adopt_abandoned(&instance.abandoned, Instant::now());
        self.server_requests
            .number_from(instance.next_server_request);
        self.life.restarts = instance.restarts;
        self.child_log_level = instance.child_log_level;
        self.carried_sessions = instance
            .sessions
            .into_iter()
            .map(|s| (s.token.clone(), s))
            .collect();
        self.carried_until = Some(Instant::now() + SESSIONS_RETURN);
        for s in self.carried_sessions.values() {
            for uri in &s.subscriptions {
                // Held for the session until it is back (or the wait is over).
                self.subscriptions.subscribe(CARRIED, uri);
            }
        }
        self.reaper.spawning().started(&self.name, pid);
        self.record_child(pid);
        // What the child says before its sessions are back (a log line, a list change) would
        // reach nobody: its stdout is not read until they are, or until something is sent to
        // it, or `READ_GATE_MAX` has passed (the pipe holds what it writes meanwhile).
        let (gate, read_gate) = tokio::sync::watch::channel(self.carried_sessions.is_empty());
        self.read_gate = Some((gate, Instant::now() + READ_GATE_MAX));
        let wiring = self.wiring(Some(read_gate));
        match child_io::adopt(pipes, wiring) {
            Ok(handle) => {
                self.life.child = Some(handle);
                self.life.state = State::Ready;
                tracing::info!(upstream = %self.name, pid, "took over the running child from the daemon this one replaced");
                if self.cache.era == Some(Era::Modern) {
                    self.open_own_listen();
                }
            }
            Err(why) => {
                tracing::error!(upstream = %self.name, pid, "could not take over the running child: {why}");
                self.life.state = State::Idle;
            }
        }
    }

    /// A session reconnected: what it had set up on this child before the upgrade is its own
    /// again.
    pub(super) fn restore_session(&mut self, sid: SessionId) {
        let Some(token) = self
            .sessions
            .get(&sid)
            .and_then(|s| s.hello.session_token.as_ref())
            .map(|t| t.secret().to_string())
        else {
            return;
        };
        let Some(carried) = self.carried_sessions.remove(&token) else {
            return;
        };
        if self.carried_sessions.is_empty() {
            self.open_read_gate();
        }
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.log_level = carried.log_level;
            s.initialized |= carried.initialized;
        }
        for uri in &carried.subscriptions {
            self.subscriptions.subscribe(sid, uri);
            self.subscriptions.unsubscribe(CARRIED, uri);
        }
        for task in carried.tasks {
            self.tasks.adopt(task, sid);
        }
        self.inflight.reattribute(&carried.abandoned, sid);
    }

    /// What a session did not come back for is given up: its subscriptions end at the child.
    pub(super) fn check_carried(&mut self, now: Instant) {
        if self.carried_until.is_none_or(|t| now < t) {
            return;
        }
        self.carried_until = None;
        let gone: Vec<CarriedSession> = self.carried_sessions.drain().map(|(_, s)| s).collect();
        let mut ended = Vec::new();
        for s in &gone {
            for uri in &s.subscriptions {
                if self.subscriptions.unsubscribe(CARRIED, uri) {
                    ended.push(uri.clone());
                }
            }
        }
        if ended.is_empty() || !self.life.is_ready() {
            return;
        }
        if self.cache.era == Some(Era::Modern) {
            self.open_own_listen();
        } else {
            for uri in ended {
                let params = json!({"uri": uri});
                self.send_internal(Internal::Housekeeping, "resources/unsubscribe", &params);
            }
        }
    }

    pub(super) fn carried_deadline(&self) -> Option<Instant> {
        self.carried_until
    }

    /// Start reading an adopted child's stdout (see `adopt`): every carried session is back,
    /// something was sent to the child (its answer must be read), or the wait is over.
    pub(super) fn open_read_gate(&self) {
        if let Some((gate, _)) = &self.read_gate {
            gate.send_replace(true);
        }
    }

    /// When a closed read gate opens by itself.
    pub(super) fn read_gate_deadline(&self) -> Option<Instant> {
        self.read_gate
            .as_ref()
            .filter(|(gate, _)| !*gate.borrow())
            .map(|(_, at)| *at)
    }
}

/// The subscriber that holds a carried session's subscriptions until it is back: never a real
/// session's id (those count from 1).
const CARRIED: SessionId = 0;

/// When a carried child started, as a time.
pub(crate) fn started_at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// Carried sessions by token.
pub(super) type CarriedSessions = HashMap<String, CarriedSession>;
