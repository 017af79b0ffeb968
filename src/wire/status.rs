//! What `info` and `status` answer, typed once for the daemon that fills them in and for every
//! reader (the CLI, doctor, setup, the `coogle` tool). The JSON field names are part of the
//! documented control protocol (`coogle status --json`, `nc -U`): renaming one is a breaking
//! change. Every field has a default, so a reader also accepts an older daemon's answer.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `info`: the daemon itself.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Info {
    pub pid: u32,
    pub version: String,
    pub uptime_ms: u64,
    /// When this daemon's binary started serving (ms since the epoch): an upgrade in place
    /// keeps the pid and starts this again.
    pub started_at_ms: u64,
    /// The last upgrade in place that did not happen, and why (the daemon serves on as it was).
    pub hand_over_failed: Option<String>,
    /// The binary the daemon runs, as it is named on disk now.
    pub exe: Option<PathBuf>,
    pub socket: PathBuf,
    pub config_file: Option<PathBuf>,
    pub log_file: Option<PathBuf>,
    pub upstreams: Vec<String>,
    /// A newer coogle asked for this daemon to be replaced once idle.
    pub replace_pending: bool,
}

/// `status`: the daemon, then each upstream in config order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    pub daemon: Info,
    pub upstreams: Vec<UpstreamStatus>,
}

impl Status {
    /// Every upstream is ready, or idle (it starts on demand).
    pub fn healthy(&self) -> bool {
        self.upstreams
            .iter()
            .all(|u| matches!(u.state, UpstreamState::Ready | UpstreamState::Idle))
    }
}

/// An MCP protocol era: the handshake era (`initialize`, up to 2025-11-25) or the stateless
/// one (2026-07-28: `server/discover`, an envelope on every request).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// `initialize` first; capabilities, log level and subscriptions are connection state.
    Legacy,
    /// 2026-07-28 and later: each request says who asks and what it can do.
    Modern,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Where an upstream's child is in its life.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamState {
    /// No child runs: none was needed yet, or it stopped after idling. Started on demand.
    Idle,
    Starting,
    Initializing,
    Ready,
    /// It crashed; a respawn is scheduled.
    Restarting,
    /// It could not start; retried on demand and on schedule.
    Failed,
    Stopping,
    #[default]
    Stopped,
}

impl UpstreamState {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamState::Idle => "idle",
            UpstreamState::Starting => "starting",
            UpstreamState::Initializing => "initializing",
            UpstreamState::Ready => "ready",
            UpstreamState::Restarting => "restarting",
            UpstreamState::Failed => "failed",
            UpstreamState::Stopping => "stopping",
            UpstreamState::Stopped => "stopped",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct UpstreamStatus {
    pub name: String,
    /// Which instance of the server (a project directory, a session), when it has several.
    pub instance: Option<String>,
    /// Who shares one child: `shared`, `per-project` or `per-session`.
    pub sharing: Option<String>,
    pub state: UpstreamState,
    pub command: String,
    pub pid: Option<u32>,
    pub uptime_ms: Option<u64>,
    /// When the running child started (ms since the epoch): kept across an upgrade in place.
    pub started_at_ms: Option<u64>,
    /// Since when (ms since the epoch) the child has been parked: stopped for idling, to start
    /// again at the next request that needs it.
    pub parked_since_ms: Option<u64>,
    pub restarts: u64,
    pub consecutive_failures: u32,
    pub next_restart_in_ms: Option<u64>,
    pub last_error: Option<String>,
    /// Calls waiting for a free slot.
    pub queue: usize,
    /// Requests not with the child yet, whatever they wait for: a free slot, the child to be
    /// ready, its era, or a session's input.
    pub waiting: usize,
    /// Calls the child is working on.
    pub in_flight: usize,
    /// Requests of sessions and control connections the child is working on (calls and the
    /// rest; a subscription stream is not one).
    pub requests_in_flight: usize,
    pub max_concurrent: usize,
    pub call_timeout_ms: u64,
    /// How many tools the child lists (first page), once known.
    pub tools: Option<usize>,
    /// The child's `serverInfo`, as it answered `initialize` or `server/discover`.
    pub server_info: Option<Value>,
    /// The era the child is spoken to in, once known.
    pub era: Option<Era>,
    /// Whose capabilities the child sees: `session` (2026-07-28 child: each request carries its
    /// session's own) or `config` (a handshake-era child: `clientCapabilities` from config, one
    /// set for everyone).
    pub capabilities_from: Option<String>,
    pub stats: Stats,
    /// Sign-ins the upstream is waiting for (see the server's `signIn` setting).
    pub sign_in: Vec<SignInStatus>,
    pub sessions: Vec<SessionStatus>,
}

impl UpstreamStatus {
    /// What is known of an upstream whose actor is gone.
    pub fn stopped(name: &str) -> UpstreamStatus {
        UpstreamStatus {
            name: name.to_string(),
            ..UpstreamStatus::default()
        }
    }
}

/// Call counters and recent latency.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Stats {
    pub calls: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub cancelled: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct SignInStatus {
    /// The Google account, "" when the call named none.
    pub account: String,
    pub url: String,
    /// When the upstream asked for it, in ms since the Unix epoch.
    pub since_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionStatus {
    pub id: u64,
    /// The client's `clientInfo`, as it sent it in `initialize`.
    pub client_info: Option<Value>,
    /// The shim's pid.
    pub pid: Option<u32>,
    /// What the client is when it is not an agent's shim (`cli`, `setup`).
    pub client: Option<String>,
    /// The shim's coogle version.
    pub version: String,
    pub protocol_version: Option<String>,
    /// The era the session speaks, once its first request said.
    pub era: Option<Era>,
    pub connected_at_ms: u64,
    pub uptime_ms: u64,
    /// Its calls waiting for a free slot.
    pub queued: usize,
    /// Its requests not with the child yet, whatever they wait for.
    pub waiting: usize,
    pub in_flight: usize,
    /// Notifications (logs, progress, list changes) not delivered because the session was not
    /// reading; its answers are never dropped.
    pub dropped_notifications: u64,
    pub stats: Stats,
}

impl SessionStatus {
    /// The client's name, as its `clientInfo` gave it.
    pub fn client_name(&self) -> Option<&str> {
        self.client_info_field("name")
    }

    /// The client's version, as its `clientInfo` gave it.
    pub fn client_version(&self) -> Option<&str> {
        self.client_info_field("version")
    }

    /// `clientInfo` is the client's own object, kept as it came (it may carry more than MCP
    /// names today): read here, once, for every reader of `status`.
    fn client_info_field(&self, key: &str) -> Option<&str> {
        self.client_info.as_ref()?.get(key)?.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_are_the_documented_ones() {
        let mut s = Status::default();
        s.upstreams.push(UpstreamStatus {
            state: UpstreamState::Restarting,
            sessions: vec![SessionStatus::default()],
            sign_in: vec![SignInStatus::default()],
            ..UpstreamStatus::stopped("google")
        });
        let v = serde_json::to_value(&s).unwrap();
        for key in [
            "pid",
            "version",
            "uptimeMs",
            "socket",
            "configFile",
            "logFile",
            "replacePending",
        ] {
            assert!(v["daemon"].get(key).is_some(), "daemon.{key}");
        }
        let u = &v["upstreams"][0];
        assert_eq!(u["state"], "restarting");
        for key in [
            "name",
            "command",
            "pid",
            "uptimeMs",
            "restarts",
            "consecutiveFailures",
            "nextRestartInMs",
            "lastError",
            "queue",
            "inFlight",
            "maxConcurrent",
            "callTimeoutMs",
            "tools",
            "serverInfo",
            "stats",
            "signIn",
            "sessions",
        ] {
            assert!(u.get(key).is_some(), "upstream.{key}");
        }
        for key in ["sinceMs", "account", "url"] {
            assert!(u["signIn"][0].get(key).is_some(), "signIn.{key}");
        }
        for key in [
            "id",
            "clientInfo",
            "pid",
            "client",
            "version",
            "protocolVersion",
            "connectedAtMs",
            "uptimeMs",
            "queued",
            "inFlight",
            "stats",
        ] {
            assert!(u["sessions"][0].get(key).is_some(), "session.{key}");
        }
        for key in [
            "calls",
            "ok",
            "errors",
            "timeouts",
            "cancelled",
            "p50Ms",
            "p99Ms",
        ] {
            assert!(u["stats"].get(key).is_some(), "stats.{key}");
        }
        assert!(!s.healthy());
        let back: Status = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        // An answer with fields missing still reads.
        let old: UpstreamStatus = serde_json::from_str(r#"{"name":"g","state":"ready"}"#).unwrap();
        assert_eq!(old.state, UpstreamState::Ready);
    }
}
