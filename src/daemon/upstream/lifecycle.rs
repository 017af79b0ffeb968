//! The child's life: start, the daemon's own `initialize`, exit, respawn with backoff, restart
//! on request, and stopping at shutdown.
//!
//! The daemon never leaves sessions hanging on a child that is gone: whatever was waiting for
//! it is answered with an error saying why, and the next start is scheduled (or made on
//! demand, when a session needs the child). A child that never becomes ready is retried with a
//! backoff, so a broken command line cannot spin.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::oneshot;

use super::child_io::{self, ChildHandle, StderrTail};
use super::era::{self, Era};
use super::waiting::WaitsFor;
use super::{Internal, Upstream, ms};
use crate::daemon::SessionId;
use crate::daemon::child::{self, ChildRecord};
use crate::daemon::stats::Outcome;
use crate::wire::{self, ChildReady, ErrorCode, WireError, response_line};

/// The protocol version the daemon offers a child when no session has said which it speaks.
pub(crate) const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";
/// How long a respawn waits after a crash; doubles on each quick failure up to `MAX_BACKOFF`.
pub(crate) const RESPAWN_COOLDOWN: Duration = Duration::from_secs(3);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A child that ran at least this long before exiting is not counted as a failing start.
const HEALTHY_RUN: Duration = Duration::from_secs(10);
/// How long the `server/discover` probe waits before `initialize` is tried too.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// A child whose stdout closed and that has not exited after this is stopped: it can no longer
/// answer (normally the exit follows at once, and its own status says why).
pub(crate) const STDOUT_CLOSED_GRACE: Duration = Duration::from_millis(500);
/// Grace between SIGTERM and SIGKILL when stopping a child.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The child's states are the ones `status` reports.
pub(super) use crate::wire::UpstreamState as State;

/// Someone waiting for a restart to finish.
pub(super) enum RestartWaiter {
    Control(super::ReadyReply),
    Tool {
        session: SessionId,
        client_id: Box<serde_json::value::RawValue>,
    },
}

/// The child process's state and history.
pub(super) struct Life {
    pub state: State,
    pub child: Option<ChildHandle>,
    /// Bumped at each start; events of older children are ignored.
    pub generation: u64,
    pub restarts: u64,
    pub consecutive_failures: u32,
    pub consecutive_timeouts: u32,
    pub last_error: Option<String>,
    pub last_attempt: Option<Instant>,
    pub restart_at: Option<Instant>,
    manual_restart: bool,
    /// Why the daemon itself stopped the child (wedged, protocol broken), for `lastError`.
    pub stop_reason: Option<String>,
    pub restart_waiters: Vec<RestartWaiter>,
    /// Set once shutdown began: the grace deadline, and who to tell when the child is gone.
    pub shutdown: Option<(Instant, Option<oneshot::Sender<()>>)>,
    pub stderr_tail: StderrTail,
    /// Where the child's pid is recorded, for a daemon that was SIGKILLed.
    pub record_path: PathBuf,
    /// The longest line accepted from the child.
    pub max_line: usize,
    /// The uid of the `server/discover` probe while it is unanswered.
    pub probe: Option<u64>,
    pub initialize_sent: bool,
    /// The last child exited while probed, before answering anything: the next one gets
    /// `initialize` without a probe, and if that works the child is known to die of probes.
    pub probe_suspect: bool,
    /// This child dies of the `server/discover` probe: it is started with `initialize`.
    pub probe_kills: bool,
    /// A child that died while probed was started again at once with `initialize`, since it
    /// was last ready: the next failure waits for the backoff.
    pub quick_retried: bool,
    /// When the running child's stdout reached EOF, if it did.
    pub stdout_closed_at: Option<Instant>,
    /// Stop the child after this long without sessions or calls (`idleStopMs`; zero: never).
    pub idle_stop: Duration,
    /// Since when nothing has needed the child (no session, nothing queued or in flight).
    pub idle_since: Option<Instant>,
    /// The child is being stopped for idling.
    pub idle_stopping: bool,
    /// Since when the child has been parked (stopped for idling), while it is.
    pub parked_since: Option<std::time::SystemTime>,
}

impl Life {
    pub fn new(record_path: PathBuf, max_line: usize) -> Life {
        Life {
            state: State::Idle,
            child: None,
            generation: 0,
            restarts: 0,
            consecutive_failures: 0,
            consecutive_timeouts: 0,
            last_error: None,
            last_attempt: None,
            restart_at: None,
            manual_restart: false,
            stop_reason: None,
            restart_waiters: Vec::new(),
            shutdown: None,
            stderr_tail: StderrTail::default(),
            record_path,
            max_line,
            probe: None,
            initialize_sent: false,
            probe_suspect: false,
            probe_kills: false,
            quick_retried: false,
            stdout_closed_at: None,
            idle_stop: Duration::ZERO,
            idle_since: None,
            idle_stopping: false,
            parked_since: None,
        }
    }

    pub fn is_ready(&self) -> bool {
        self.state == State::Ready
    }

    pub fn shutting_down(&self) -> bool {
        self.shutdown.is_some()
    }

    fn backoff(&self) -> Duration {
        let exp = self.consecutive_failures.saturating_sub(1).min(5);
        (RESPAWN_COOLDOWN * 2u32.pow(exp)).min(MAX_BACKOFF)
    }
}

impl Upstream {
    pub(super) fn start_child(&mut self) {
        self.life.generation += 1;
        self.life.parked_since = None;
        self.life.last_attempt = Some(Instant::now());
        self.life.restart_at = None;
        self.life.state = State::Starting;
        let spawned = {
            // The reaper must know the child before it next reads the process table.
            let spawning = self.reaper.spawning();
            let spawned = child::spawn(&self.config, &self.passed_env);
            if let Ok(s) = &spawned {
                spawning.started(&self.name, s.pid);
            }
            spawned
        };
        let spawned = match spawned {
            Ok(s) => s,
            Err(e) => {
                self.on_start_failed(e.to_string());
                return;
            }
        };
        let pid = spawned.pid;
        tracing::info!(upstream = %self.name, pid, command = %child::display_command(&self.config), "started upstream");
        self.record_child(pid);
        let wiring = self.wiring(None);
        let attached = child_io::attach(spawned, wiring);
        match attached {
            Ok(handle) => self.on_spawned(handle),
            Err(reason) => self.on_start_failed(reason),
        }
    }

    /// A child is running: find out which era it speaks. It is probed with `server/discover`
    /// (a 2026-07-28 child answers it and is spoken to in that era from then on); an error, or
    /// no answer within the probe timeout, means `initialize`. A child known to die of the
    /// probe (rmcp before 3.0 exits on any first request but `initialize`) gets `initialize`
    /// directly.
    pub(super) fn on_spawned(&mut self, handle: ChildHandle) {
        self.life.child = Some(handle);
        self.life.state = State::Initializing;
        self.life.initialize_sent = false;
        self.life.probe = None;
        if self.life.probe_kills || self.life.probe_suspect {
            self.send_initialize();
            return;
        }
        // `send_internal` puts the daemon's envelope on the probe.
        let probe = self.send_internal(Internal::Discover, "server/discover", &json!({}));
        self.life.probe = Some(probe);
    }

    fn send_initialize(&mut self) {
        self.life.initialize_sent = true;
        let version = self
            .sessions
            .values()
            .find_map(|s| s.protocol_version.clone())
            .filter(|v| v.as_str() != era::MODERN_VERSION)
            .unwrap_or_else(|| DEFAULT_PROTOCOL_VERSION.to_string());
        let params = json!({
            "protocolVersion": version,
            "capabilities": self.config.client_capabilities,
            "clientInfo": era::daemon_client_info(),
        });
        self.send_internal(Internal::Initialize, "initialize", &params);
    }

    /// The child answered the probe.
    pub(super) fn on_discovered(&mut self, answer: &wire::Message) {
        self.life.probe = None;
        let modern = answer.field("result").filter(|r| {
            era::supported_versions(r)
                .iter()
                .any(|v| v == era::MODERN_VERSION)
        });
        if self.life.is_ready() {
            // A late answer to a probe that timed out, after `initialize` decided.
            self.on_late_discover(modern, answer);
            return;
        }
        match modern {
            Some(result) => {
                self.cache.era = Some(Era::Modern);
                self.cache.discover = Some(result.to_owned());
                self.cache.discover_error = None;
                self.cache.init_result = None;
                self.cache.save();
                self.on_ready();
            }
            None => {
                // A handshake-era child: remember how it answers, so probing clients get the
                // same answer at once.
                if let Some(e) = answer.field("error") {
                    self.cache.discover_error = Some(e.to_owned());
                }
                if !self.life.initialize_sent {
                    self.send_initialize();
                }
            }
        }
    }

    /// The probe's answer came after the child was taken for a handshake-era one. A
    /// 2026-07-28 answer means it serves both eras on this connection (it answered
    /// `initialize` too): it is spoken to in the newest from now on, that is written down so the
    /// next start waits for its answer, and sessions are told its tools may have changed (a
    /// 2026-07-28 child's lists depend on each session's capabilities). Nothing is restarted.
    fn on_late_discover(
        &mut self,
        modern: Option<&serde_json::value::RawValue>,
        answer: &wire::Message,
    ) {
        match modern {
            Some(result) if self.cache.era != Some(Era::Modern) => {
                tracing::info!(upstream = %self.name, "the upstream answered server/discover after it was taken for a handshake-era server: it speaks 2026-07-28, and is served in that era from now on");
                self.cache.era = Some(Era::Modern);
                self.cache.discover = Some(result.to_owned());
                self.cache.discover_error = None;
                self.cache.init_result = None;
                self.cache.invalidate_tools();
                self.cache.save();
                self.child_log_level = None;
                self.refresh_tools();
                self.open_own_listen();
                self.announce_tools_changed(true);
            }
            Some(_) => {}
            None => {
                if let Some(e) = answer.field("error") {
                    self.cache.discover_error = Some(e.to_owned());
                    self.cache.save();
                }
            }
        }
    }

    /// How long the probe waits before `initialize` is tried too: a child known to speak
    /// 2026-07-28 (it answered a probe before, maybe late) is given the whole call timeout, so
    /// a slow start does not take it for a handshake-era one again.
    pub(super) fn probe_timeout(&self) -> Duration {
        if self.cache.era == Some(Era::Modern) {
            PROBE_TIMEOUT.max(self.config.call_timeout)
        } else {
            PROBE_TIMEOUT.min(self.config.call_timeout)
        }
    }

    /// The probe went unanswered for the probe timeout: ask with `initialize` too. The probe
    /// stays pending: a slow 2026-07-28 child reads it first and answers it late, and then its
    /// answer decides.
    pub(super) fn on_probe_timeout(&mut self) {
        tracing::info!(upstream = %self.name, "no answer to server/discover yet; trying initialize");
        if !self.life.initialize_sent {
            self.send_initialize();
        }
    }

    /// The child answered the daemon's `initialize`: a handshake-era child, ready for everyone.
    pub(super) fn on_initialized(&mut self, answer: &wire::Message) {
        if self.life.is_ready() {
            // The probe's late answer already decided: this child speaks 2026-07-28.
            return;
        }
        let Some(result) = answer.field("result") else {
            if self.life.probe.is_some() {
                // A probe is still out: its answer decides (a 2026-07-28 child that read the
                // probe first refuses `initialize`).
                return;
            }
            let why = answer.error_message().unwrap_or_default();
            self.life.last_error = Some(format!("initialize failed: {why}"));
            tracing::error!(upstream = %self.name, "the upstream refused initialize: {why}");
            if self.life.probe_kills || self.life.probe_suspect {
                // Started without a probe, and it wants one after all.
                self.life.probe_kills = false;
                self.life.probe_suspect = false;
                self.cache.probe_kills_since = None;
                self.cache.save();
            }
            self.kill_child();
            return;
        };
        // A probe still out stays in flight: a late 2026-07-28 answer corrects the era (see
        // `on_late_discover`).
        if self.life.probe_suspect {
            // It died of the probe and works with `initialize`: remember that, on disk too (a
            // new daemon would otherwise kill it with a probe again). The verdict is trusted
            // for a while only: the server may be upgraded, and a child that merely crashed
            // once must not lose its era for good.
            self.life.probe_suspect = false;
            self.life.probe_kills = true;
            self.cache.probe_kills_since = Some(super::cache::now_secs());
            tracing::info!(upstream = %self.name, "the upstream exits when probed with server/discover; it is started with initialize from now on");
        }
        self.cache.era = Some(Era::Legacy);
        self.cache.init_result = Some(result.to_owned());
        self.cache.discover = None;
        self.cache.save();
        self.to_child(wire::notification_line("notifications/initialized", None));
        self.on_ready();
    }

    /// The child's era is known and it is ready for everyone.
    fn on_ready(&mut self) {
        self.life.state = State::Ready;
        self.life.quick_retried = false;
        let ready_pid = self.life.child.as_ref().map(|c| c.pid);
        let era = self.cache.era.map_or("?", Era::as_str);
        tracing::info!(upstream = %self.name, pid = ?ready_pid, era, "upstream ready");
        self.answer_restart_waiters(Ok(ChildReady {
            server: self.name.clone(),
            pid: ready_pid,
        }));
        // What sessions set up in the child comes first, so what they asked for meanwhile
        // runs as it would have on the child they set it up on.
        if self.cache.era == Some(Era::Modern) {
            self.open_own_listen();
        } else {
            self.child_log_level = None;
            self.sync_child_log_level();
            self.resubscribe();
        }
        for w in self.waiting.take(WaitsFor::Era) {
            self.on_session_request(w.key, w.req);
        }
        for w in self.waiting.take(WaitsFor::Child) {
            self.forward(w.key, w.origin, w.req);
        }
        self.pump();
        // The daemon's own looks at the tools go last: a child that has just started answers
        // its first list cold (2 to 5 ms for the bench's real servers), and a call that waited
        // for the child (the first call after parking) would otherwise wait behind it (issue
        // 22). No answer to a session waits on these; a session shown a list
        // from disk hears of a change (`list_changed`) after what waited for the child, not
        // before it.
        self.refresh_tools();
        if self.cache.era == Some(Era::Modern) {
            // What sessions were served from disk is checked against the live child.
            for (key, caps) in self.cache.tool_keys() {
                self.send_internal_as(
                    Internal::ToolsList,
                    "tools/list",
                    &json!({}),
                    Some((key, caps)),
                );
            }
        }
    }

    /// Ask the child for its tools with the config's capabilities (for `status` and the
    /// sessions that see those).
    pub(super) fn refresh_tools(&mut self) {
        self.send_internal(Internal::ToolsList, "tools/list", &json!({}));
    }

    /// The daemon's `initialize` went unanswered for a whole call timeout.
    pub(super) fn on_initialize_timeout(&mut self) {
        if self.life.state != State::Initializing {
            // The probe's late answer made the child ready in 2026-07-28 after `initialize`
            // went out too (see `on_probe_timeout`), and it may be parking or stopping since:
            // an `initialize` it leaves unanswered in that era says nothing against it.
            return;
        }
        let secs = self.config.call_timeout.as_secs_f64();
        self.life.last_error = Some(format!("it did not answer initialize within {secs} s"));
        tracing::error!(upstream = %self.name, "the upstream did not answer initialize within {secs} s; stopping it");
        self.kill_child();
    }

    fn on_start_failed(&mut self, reason: String) {
        let reason = format!("{reason}{}", self.life.stderr_tail.hint());
        tracing::error!(upstream = %self.name, "could not start the upstream: {reason}");
        self.life.child = None;
        self.life.state = State::Failed;
        self.life.consecutive_failures += 1;
        self.life.last_error = Some(reason.clone());
        let text = format!(
            "coogle could not start the `{}` server ({}): {reason}",
            self.name,
            child::display_command(&self.config)
        );
        self.fail_waiting(ErrorCode::UpstreamUnavailable, &text);
        let err = WireError::new(ErrorCode::UpstreamUnavailable, crate::redact::scrub(&text));
        self.answer_restart_waiters(Err(err));
        if self.life.shutting_down() {
            self.life.state = State::Stopped;
            return;
        }
        self.life.restart_at = Some(Instant::now() + self.life.backoff());
    }

    /// Answer every call and request that is waiting for the child with an error.
    pub(super) fn fail_waiting(&mut self, code: ErrorCode, text: &str) {
        for (what, w) in self.waiting.drain() {
            if what == WaitsFor::Slot {
                self.count_session_outcome(&w.origin, Outcome::Error, Duration::ZERO);
            }
            let is_call = w.req.method == super::request::Method::ToolsCall;
            self.reply_error(w.origin, is_call, code, text);
        }
    }

    pub(super) fn kill_child(&mut self) {
        if let Some(c) = &self.life.child {
            let pid = c.pid;
            let mut exited = c.exited.clone();
            tokio::spawn(async move {
                child::stop_group(pid, STOP_GRACE, async move {
                    let _ = exited.wait_for(|e| *e).await;
                })
                .await;
            });
        }
    }

    /// The child's stdout reached EOF. Usually it is exiting; one that goes on running can
    /// never answer again and is stopped, at once rather than after three timeouts.
    pub(super) fn on_stdout_closed(&mut self) {
        if self.life.child.is_some() {
            self.life.stdout_closed_at = Some(Instant::now());
        }
    }

    pub(super) fn check_stdout_closed(&mut self, now: Instant) {
        if self
            .life
            .stdout_closed_at
            .is_some_and(|t| now >= t + STDOUT_CLOSED_GRACE)
        {
            self.life.stdout_closed_at = None;
            if self.life.child.is_some() {
                let why = "it closed its stdout but kept running, so coogle restarted it";
                tracing::warn!(upstream = %self.name, "{why}");
                self.life.stop_reason = Some(why.to_string());
                self.kill_child();
            }
        }
    }

    /// Write down the running child (pid and start), so a daemon that was killed is followed by
    /// one that stops what it left.
    pub(super) fn record_child(&self, pid: u32) {
        let record = ChildRecord {
            pid,
            pgid: pid,
            start_ticks: child::proc_stat(pid).map(|(_, s)| s),
            command: child::display_command(&self.config),
            daemon_pid: std::process::id(),
        };
        if let Err(e) = child::write_record(&self.life.record_path, &record) {
            tracing::warn!(path = %self.life.record_path.display(), "could not record the child pid: {e}");
        }
    }

    /// How a child's pipes reach this actor.
    pub(super) fn wiring(
        &self,
        read_gate: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> child_io::Wiring {
        child_io::Wiring {
            generation: self.life.generation,
            tx: self.tx.clone(),
            max_line: self.life.max_line,
            upstream: self.name.clone(),
            tail: self.life.stderr_tail.clone(),
            reaper: self.reaper.clone(),
            read_gate,
        }
    }

    pub(super) fn on_child_exit(&mut self, status: String) {
        self.life.stdout_closed_at = None;
        let Some(c) = self.life.child.take() else {
            return;
        };
        if std::mem::take(&mut self.life.idle_stopping) && !self.life.shutting_down() {
            self.on_idle_stopped();
            return;
        }
        let ran = c.started.elapsed();
        let was_ready = self.life.state == State::Ready;
        child::remove_record(&self.life.record_path);
        self.server_requests.clear_child();
        let pending = self.inflight.drain();

        if self.life.shutting_down() {
            tracing::info!(upstream = %self.name, "upstream stopped ({status})");
            let text = "coogle is shutting down; the call was cancelled";
            for p in pending {
                self.reply_error(p.origin, p.is_call, ErrorCode::ShuttingDown, text);
            }
            self.life.state = State::Stopped;
            return;
        }

        let manual = std::mem::take(&mut self.life.manual_restart);
        let reason = if manual {
            "it was restarted on request".to_string()
        } else if let Some(why) = self.life.stop_reason.take() {
            why
        } else {
            format!("it exited ({status}){}", self.life.stderr_tail.hint())
        };
        if !manual {
            tracing::warn!(upstream = %self.name, pid = c.pid, "upstream exited: {status}");
        }
        for p in pending {
            if matches!(p.origin, super::Origin::Internal(Internal::Initialize)) {
                continue;
            }
            let text = format!(
                "coogle: the `{}` server stopped during this call ({reason}); it is being restarted, so retry the call",
                self.name
            );
            if p.is_call {
                let took = p.started.elapsed();
                self.stats.record(Outcome::Error, took);
                self.count_session_outcome(&p.origin, Outcome::Error, took);
            }
            self.reply_error(p.origin, p.is_call, ErrorCode::UpstreamUnavailable, &text);
        }

        if manual {
            self.life.restarts += 1;
            self.start_child();
            return;
        }
        if !was_ready {
            // A child that exits while probed may have died of the probe (rmcp before 3.0
            // does): it is started again at once with `initialize` alone, and what waits for
            // it goes on waiting. One that fails that way too is probed again the time after,
            // with the backoff.
            let probed = self.life.probe.take().is_some();
            if probed && !self.life.probe_suspect && !self.life.quick_retried {
                // Once per start that ends ready: a child that fails this way again is
                // crashing, whatever it is sent, and waits for the backoff like any other.
                self.life.quick_retried = true;
                self.life.probe_suspect = true;
                tracing::info!(upstream = %self.name, "the upstream exited while probed with server/discover ({status}); starting it again with initialize");
                self.start_child();
                return;
            }
            self.life.probe_suspect = probed && !self.life.probe_suspect;
            self.on_start_failed(format!("it exited before answering initialize ({status})"));
            return;
        }
        self.life.restarts += 1;
        self.life.last_error = Some(reason);
        if ran >= HEALTHY_RUN {
            self.life.consecutive_failures = 0;
        }
        self.life.consecutive_failures += 1;
        self.life.state = State::Restarting;
        let wait = self.life.backoff();
        tracing::info!(upstream = %self.name, "respawning in {} ms", ms(wait));
        self.life.restart_at = Some(Instant::now() + wait);
    }

    /// The scheduled start is due.
    pub(super) fn on_restart_due(&mut self) {
        self.life.restart_at = None;
        if matches!(self.life.state, State::Restarting | State::Failed)
            && !self.life.shutting_down()
        {
            self.start_child();
        }
    }

    /// Restart the child (or start it, when it is down); `waiter` hears when it is ready.
    pub(super) fn request_restart(&mut self, waiter: RestartWaiter) {
        self.life.restart_waiters.push(waiter);
        if self.life.shutting_down() {
            let err = WireError::new(ErrorCode::ShuttingDown, "coogle is shutting down");
            self.answer_restart_waiters(Err(err));
            return;
        }
        match self.life.state {
            // Starting, or stopping for idling: the waiter hears once it is (again) ready.
            State::Starting | State::Initializing => {}
            State::Stopping if self.life.idle_stopping => {}
            State::Ready => {
                tracing::info!(upstream = %self.name, "restarting the upstream on request");
                self.life.manual_restart = true;
                self.sign_ins.clear();
                self.kill_child();
            }
            _ => {
                self.life.consecutive_failures = 0;
                self.start_child();
            }
        }
    }

    /// Start the child unless it runs; `reply` hears once it is ready (at once if it is).
    pub(super) fn request_start(&mut self, reply: super::ReadyReply) {
        if self.life.is_ready() {
            let _ = reply.send(Ok(ChildReady {
                server: self.name.clone(),
                pid: self.life.child.as_ref().map(|c| c.pid),
            }));
            return;
        }
        self.life
            .restart_waiters
            .push(RestartWaiter::Control(reply));
        if self.life.shutting_down() {
            let err = WireError::new(ErrorCode::ShuttingDown, "coogle is shutting down");
            self.answer_restart_waiters(Err(err));
            return;
        }
        match self.life.state {
            State::Idle | State::Failed | State::Restarting => {
                self.life.consecutive_failures = 0;
                self.start_child();
            }
            _ => {}
        }
    }

    fn answer_restart_waiters(&mut self, outcome: Result<ChildReady, WireError>) {
        for w in std::mem::take(&mut self.life.restart_waiters) {
            match w {
                RestartWaiter::Control(reply) => {
                    let _ = reply.send(outcome.clone());
                }
                RestartWaiter::Tool { session, client_id } => {
                    let result = match &outcome {
                        Ok(ready) => crate::daemon::coogle_tool::result(
                            &format!(
                                "Restarted the `{}` server (pid {}).",
                                self.name,
                                ready
                                    .pid
                                    .map_or_else(|| "null".to_string(), |p| p.to_string())
                            ),
                            serde_json::to_value(ready).unwrap_or_default(),
                        ),
                        Err(e) => wire::tool_error_result(&crate::redact::scrub(&e.message)),
                    };
                    let line = response_line(&client_id, &wire::raw(&result));
                    self.send_to_session(session, line);
                }
            }
        }
    }

    /// Begin stopping: nothing new is taken, what waits is answered, and the child is stopped
    /// once no call is in flight or `grace` has passed.
    pub(super) fn begin_shutdown(&mut self, grace: Duration, done: oneshot::Sender<()>) {
        self.life.shutdown = Some((Instant::now() + grace, Some(done)));
        self.life.restart_at = None;
        if self.handed_over {
            // Sent again by the shims to the new daemon, which answers them (see `detach`).
            drop(self.waiting.drain());
        } else {
            self.fail_waiting(ErrorCode::ShuttingDown, "coogle is shutting down");
        }
        let err = WireError::new(ErrorCode::ShuttingDown, "coogle is shutting down");
        self.answer_restart_waiters(Err(err));
        self.check_shutdown();
    }

    /// During shutdown: once no call is in flight (or the grace has passed), stop the child.
    pub(super) fn check_shutdown(&mut self) {
        if self.life.shutting_down()
            && self.inflight.calls() == 0
            && self.life.state != State::Stopping
        {
            self.finish_shutdown();
        }
    }

    pub(super) fn finish_shutdown(&mut self) {
        if matches!(self.life.state, State::Stopping | State::Stopped) {
            return;
        }
        if let Some((t, _)) = &mut self.life.shutdown {
            // Past here the grace timer has done its job.
            *t = Instant::now() + Duration::from_secs(3600);
        }
        if self.life.child.is_some() {
            self.life.state = State::Stopping;
            self.kill_child();
        } else {
            self.life.state = State::Stopped;
        }
    }
}

/// After this many consecutive call timeouts the child is considered wedged and restarted.
const WEDGED_AFTER_TIMEOUTS: u32 = 3;

impl Upstream {
    /// A call timed out; enough of them in a row mean the child is wedged: restart it.
    pub(super) fn note_call_timeout(&mut self) {
        self.life.consecutive_timeouts += 1;
        let n = self.life.consecutive_timeouts;
        if n >= WEDGED_AFTER_TIMEOUTS && self.life.child.is_some() {
            tracing::warn!(upstream = %self.name, "{n} calls in a row timed out; restarting the upstream");
            self.life.stop_reason = Some(format!(
                "{n} calls in a row timed out, so coogle restarted it"
            ));
            self.life.consecutive_timeouts = 0;
            self.kill_child();
        }
    }
}
