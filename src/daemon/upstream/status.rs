//! The upstream's `status`: filled in from the actor's state, and told to an agent in words by
//! the `coogle` tool. Other sessions appear only as what an operator needs (ids, clients,
//! counts); nothing a session sent is shown, nor any id of its (Claude Code's session id, its
//! shim's token) that someone could present as theirs.

use std::time::{Instant, UNIX_EPOCH};

use super::era::{Era, META_SERVER_INFO};
use super::{Upstream, ms};
use crate::daemon::child;
use crate::wire::{SessionStatus, SignInStatus, UpstreamStatus};

impl Upstream {
    pub(super) fn status(&self) -> UpstreamStatus {
        let now = Instant::now();
        let since_epoch =
            |t: std::time::SystemTime| t.duration_since(UNIX_EPOCH).map(ms).unwrap_or(0);
        let mut ids: Vec<_> = self.sessions.keys().copied().collect();
        ids.sort();
        let sessions = ids
            .into_iter()
            .map(|id| {
                let s = &self.sessions[&id];
                SessionStatus {
                    id,
                    client_info: s.client_info.clone(),
                    pid: s.hello.pid,
                    client: s.hello.client.clone(),
                    version: s.hello.version.clone(),
                    protocol_version: s.protocol_version.clone(),
                    era: s.era,
                    connected_at_ms: since_epoch(s.connected_at),
                    uptime_ms: ms(s.connected.elapsed()),
                    queued: self.waiting.calls_of(id),
                    waiting: self.waiting.of_session(id),
                    dropped_notifications: s.dropped,
                    in_flight: self.inflight.of_session_count(id),
                    stats: s.stats.to_status(),
                }
            })
            .collect();
        let server_info = self.server_info();
        UpstreamStatus {
            name: self.name.clone(),
            instance: self.instance.clone(),
            sharing: Some(self.config.sharing.as_str().to_string()),
            state: self.life.state,
            command: crate::redact::scrub(&child::display_command(&self.config)),
            pid: self.life.child.as_ref().map(|c| c.pid),
            uptime_ms: self.life.child.as_ref().map(|c| ms(c.started.elapsed())),
            started_at_ms: self.life.child.as_ref().map(|c| since_epoch(c.started_at)),
            parked_since_ms: self.life.parked_since.map(since_epoch),
            restarts: self.life.restarts,
            consecutive_failures: self.life.consecutive_failures,
            next_restart_in_ms: self
                .life
                .restart_at
                .map(|t| ms(t.saturating_duration_since(now))),
            last_error: self.life.last_error.as_deref().map(crate::redact::scrub),
            queue: self.waiting.calls(),
            waiting: self.waiting.len(),
            requests_in_flight: self.inflight.requests(),
            in_flight: self.inflight.calls(),
            max_concurrent: self.config.max_concurrent,
            call_timeout_ms: ms(self.config.call_timeout),
            tools: self.cache.tools_count,
            server_info,
            era: self.cache.era,
            capabilities_from: self.cache.era.map(|e| match e {
                Era::Modern => "session".to_string(),
                Era::Legacy => "config".to_string(),
            }),
            stats: self.stats.to_status(),
            sign_in: self
                .sign_ins
                .iter()
                .map(|(account, s)| SignInStatus {
                    account: account.clone(),
                    url: s.url.clone(),
                    since_ms: since_epoch(s.at),
                })
                .collect(),
            sessions,
        }
    }
}

impl Upstream {
    /// The child's `serverInfo`: from its `initialize` answer, or its DiscoverResult's `_meta`.
    fn server_info(&self) -> Option<serde_json::Value> {
        let parse = |r: &serde_json::value::RawValue| {
            serde_json::from_str::<serde_json::Value>(r.get()).ok()
        };
        if let Some(v) = self.cache.init_result.as_deref().and_then(parse) {
            return v.get("serverInfo").cloned();
        }
        let d = self.cache.discover.as_deref().and_then(parse)?;
        d.get("_meta")?.get(META_SERVER_INFO).cloned()
    }
}

/// `status` for an agent to read; `sessions` counts every session sharing the server.
pub(super) fn status_text(s: &UpstreamStatus, sessions: usize) -> String {
    let pid = s.pid.map_or_else(|| "null".to_string(), |p| p.to_string());
    let mut t = format!(
        "Server `{}` is {} (pid {pid}, restarts {}, queue {}, in flight {}/{}).",
        s.name,
        s.state.as_str(),
        s.restarts,
        s.queue,
        s.in_flight,
        s.max_concurrent
    );
    if let Some(e) = &s.last_error {
        t.push_str(&format!("\nLast error: {e}"));
    }
    if let Some(ms) = s.next_restart_in_ms {
        t.push_str(&format!(
            "\nNext start attempt in {:.1} s.",
            ms as f64 / 1000.0
        ));
    }
    for si in &s.sign_in {
        let account = if si.account.is_empty() {
            String::new()
        } else {
            format!(" for {}", si.account)
        };
        t.push_str(&format!("\nSign-in required{account}: {}", si.url));
    }
    t.push_str(&format!("\n{sessions} session(s) share it."));
    t
}
