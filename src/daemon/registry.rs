//! Which child serves a session: the upstreams' instances.
//!
//! An instance is everything that decides what its child does beyond the server's config:
//! its scope (everyone, one project directory, one session) and the values of the server's
//! `passEnv` it was asked with. Two sessions share a child only when all of it is equal. A
//! server shared by everyone has one instance per set of `passEnv` values (one, without
//! `passEnv`); a `per-project` server has one per project directory (from the session's
//! `CLAUDE_PROJECT_DIR`, else its client's working directory), and its child runs in that
//! directory; a `per-session` server has one per session, stopped when the session leaves.
//! Each instance is an upstream actor of its own with its own cache, so nothing crosses from
//! one to another: a new project's first session waits for its own child rather than being
//! told what another project's child said.
//!
//! Instances are bounded by eviction, never by sharing: past `maxInstances` of a server (64), an
//! instance nobody uses (no session, nothing waiting or running) is stopped to make room; when
//! every one is in use, the new session is refused with a clear error. A `per-project` session is
//! never served by another project's child, nor by one running wherever the daemon runs.
//!
//! It owns the daemon's server map, which `reload` may only grow: a server new in the config
//! file is added at once, one that changed or went keeps running as it was until the next
//! start (sessions are using it). Two locks, `servers` and `inner`, each held only for a look
//! or an update and never both at once, never across an await.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indexmap::IndexMap;

use super::SessionId;
use super::handover::carried::CarriedScope;
use super::reaper::Reaper;
use super::upstream::{self, Adopted, UpstreamHandle};
use crate::config::{self, Config, ServerConfig, Sharing};
use crate::paths::RuntimePaths;
use crate::wire::{ErrorCode, Reloaded, SessionToken, UpstreamStatus, WireError};

/// How long an evicted instance's child has to stop (nothing is in flight on it).
const EVICT_GRACE: Duration = Duration::from_secs(1);

/// Who shares one child of a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// Everyone (a shared server), and control requests of a shared server.
    Unbound,
    Project(PathBuf),
    Session(SessionKey),
}

/// Which session a per-session instance is for: the shim's secret token, which its reconnects
/// carry too (so its child survives a reconnect, and an upgrade in place), else (an older shim)
/// its one connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum SessionKey {
    Token(SessionToken),
    Connection(SessionId),
}

impl SessionKey {
    /// Text that tells keys apart, for digests only (it holds the token).
    fn id_text(&self) -> String {
        match self {
            SessionKey::Token(t) => format!("token:{}", t.secret()),
            SessionKey::Connection(c) => format!("connection:{c}"),
        }
    }
}

impl Scope {
    /// Text that tells scopes apart, for digests only (file names, labels): a token in it is
    /// never shown as it is.
    fn id_text(&self) -> String {
        match self {
            Scope::Unbound => "unbound".to_string(),
            Scope::Project(p) => format!("project:{}", p.display()),
            Scope::Session(k) => format!("session:{}", k.id_text()),
        }
    }
}

/// Which instance of a server: its scope and its `passEnv` values (absent ones left out).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Instance {
    pub scope: Scope,
    pub passed: BTreeMap<String, String>,
}

impl std::fmt::Debug for Instance {
    /// `passEnv` values may be secrets: names only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("scope", &self.scope)
            .field("passed", &self.passed.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Instance {
    /// How an upgrade in place names it; `None` for an older shim's session, whose
    /// reconnect cannot be told from another session.
    fn carried_as(&self) -> Option<CarriedScope> {
        Some(match &self.scope {
            Scope::Unbound => CarriedScope::Unbound,
            Scope::Project(p) => CarriedScope::Project(p.clone()),
            Scope::Session(SessionKey::Token(t)) => CarriedScope::Session(t.secret().to_string()),
            Scope::Session(SessionKey::Connection(_)) => return None,
        })
    }

    /// The instance a carried child belonged to.
    fn of_carried(scope: &CarriedScope, passed: &BTreeMap<String, String>) -> Option<Instance> {
        let scope = match scope {
            CarriedScope::Unbound => Scope::Unbound,
            CarriedScope::Project(p) => Scope::Project(p.clone()),
            CarriedScope::Session(t) => {
                Scope::Session(SessionKey::Token(SessionToken::new(t).ok()?))
            }
        };
        Some(Instance {
            scope,
            passed: passed.clone(),
        })
    }

    fn unbound() -> Instance {
        Instance {
            scope: Scope::Unbound,
            passed: BTreeMap::new(),
        }
    }

    /// How `status` names it: the project or session, and for `passEnv` the names with a
    /// digest of the values (which may be secrets).
    pub fn label(&self) -> Option<String> {
        let scope = match &self.scope {
            Scope::Unbound => None,
            Scope::Project(p) => Some(p.display().to_string()),
            Scope::Session(SessionKey::Connection(s)) => Some(format!("session {s}")),
            Scope::Session(k @ SessionKey::Token(_)) => {
                Some(format!("session #{}", &digest(&k.id_text())[..8]))
            }
        };
        let passed = (!self.passed.is_empty()).then(|| {
            let names: Vec<&str> = self.passed.keys().map(String::as_str).collect();
            format!(
                "{} #{}",
                names.join(","),
                digest(&self.values_text())[..8].to_owned()
            )
        });
        match (scope, passed) {
            (None, None) => None,
            (Some(s), None) | (None, Some(s)) => Some(s),
            (Some(s), Some(p)) => Some(format!("{s} ({p})")),
        }
    }

    fn values_text(&self) -> String {
        self.passed
            .iter()
            .map(|(k, v)| format!("{}:{k}={}:{v}", k.len(), v.len()))
            .collect()
    }

    /// The instance's cache file key: the server's, and what sets this instance apart. `None`
    /// for a session's instance, whose cache lives in memory only.
    fn cache_key(&self, server: &ServerConfig) -> Option<String> {
        use std::os::unix::ffi::OsStrExt;
        let base = server.cache_key();
        let mut apart = String::new();
        match &self.scope {
            Scope::Session(_) => return None,
            Scope::Unbound => {}
            Scope::Project(p) => {
                apart.push_str("project:");
                apart.push_str(&String::from_utf8_lossy(p.as_os_str().as_bytes()));
                apart.push('\n');
            }
        }
        if !self.passed.is_empty() {
            apart.push_str("passed:");
            apart.push_str(&self.values_text());
        }
        if apart.is_empty() {
            return Some(base);
        }
        Some(format!("{base}-{}", &digest(&apart)[..16]))
    }
}

/// What the asker of an instance brings: a session's hello, or a control request.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Asker<'a> {
    /// Its project directory (absolute), if it named one.
    pub project: Option<&'a Path>,
    /// Its environment, for the server's `passEnv`.
    pub env: Option<&'a BTreeMap<String, String>>,
    /// The shim's secret token, for a per-session server (see [`SessionKey`]).
    pub token: Option<&'a SessionToken>,
}

struct Slot {
    handle: UpstreamHandle,
    /// Sessions served by it now.
    sessions: usize,
}

#[derive(Default)]
struct Inner {
    instances: IndexMap<(String, Instance), Slot>,
    /// Which instance each session is served by.
    session_of: HashMap<SessionId, (String, Instance)>,
}

pub(crate) struct Registry {
    /// The servers the daemon serves, in config order; `reload` appends.
    servers: Mutex<IndexMap<String, ServerConfig>>,
    inner: Mutex<Inner>,
    runtime: RuntimePaths,
    max_line: usize,
    /// Instances one server may have besides its unbound one (`maxInstances`).
    max_instances: usize,
    coogle_tool: bool,
    reaper: Arc<Reaper>,
}

impl Registry {
    /// Every shared server's unbound instance is made at once (its child still starts on
    /// demand), so `status` lists it; other instances are made on first need. `adopted`: the
    /// running children the daemon this one replaced carried over, each taken over by its
    /// instance (one whose server is gone from the config is stopped).
    pub fn new(
        config: &Config,
        runtime: &RuntimePaths,
        reaper: &Arc<Reaper>,
        adopted: Vec<Adopted>,
    ) -> Registry {
        let r = Registry {
            servers: Mutex::new(config.servers.clone()),
            inner: Mutex::new(Inner::default()),
            runtime: runtime.clone(),
            max_line: config.max_line_bytes.saturating_mul(4),
            max_instances: config.max_instances,
            coogle_tool: config.coogle_tool,
            reaper: reaper.clone(),
        };
        for a in adopted {
            r.adopt(a);
        }
        for (name, server) in &config.servers {
            r.make_unbound(name, server);
        }
        r
    }

    fn adopt(&self, a: Adopted) {
        let c = &a.instance;
        let pid = a.pipes.pid;
        let base = self.servers().get(&c.server).cloned();
        let instance = Instance::of_carried(&c.scope, &c.passed_env);
        let (Some(base), Some(instance)) = (base, instance) else {
            tracing::warn!(upstream = %c.server, pid, "the config no longer has this server; stopping the child it carried over");
            super::child::signal_group(pid, libc::SIGKILL);
            // No actor waits for it: the reaper collects it.
            self.reaper.release(pid);
            return;
        };
        if instance_config(&base, &instance).launch_key() != c.launch_key {
            tracing::info!(upstream = %c.server, pid, "the server's definition changed since its child started; stopping it, the next request starts it as configured now");
            super::child::signal_group(pid, libc::SIGKILL);
            // No actor waits for it: the reaper collects it.
            self.reaper.release(pid);
            return;
        }
        let key = (c.server.clone(), instance);
        let mut inner = self.inner();
        if inner.instances.contains_key(&key) {
            super::child::signal_group(pid, libc::SIGKILL);
            // No actor waits for it: the reaper collects it.
            self.reaper.release(pid);
            return;
        }
        let handle = self.start(&base, &key.1, Some(a));
        inner.instances.insert(
            key,
            Slot {
                handle,
                sessions: 0,
            },
        );
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn servers(&self) -> std::sync::MutexGuard<'_, IndexMap<String, ServerConfig>> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server a session or control request names, by the rule of [`Config::server`]
    /// (none: the only one, else `google`), over the servers served now.
    pub fn resolve(&self, name: Option<&str>) -> Result<String, config::ConfigError> {
        config::pick_server(&self.servers(), name).map(|s| s.name.clone())
    }

    /// Take in a freshly loaded config: its new servers are served from now on (the child
    /// still on demand); changed and removed ones are only reported, since sessions may be in
    /// the middle of calls on them.
    pub fn reload(&self, fresh: &Config) -> Reloaded {
        let mut done = Reloaded {
            file: fresh.file.clone(),
            ..Reloaded::default()
        };
        {
            let mut servers = self.servers();
            for (name, server) in &fresh.servers {
                match servers.get(name) {
                    None => done.added.push(name.clone()),
                    Some(running) if running != server => done.changed.push(name.clone()),
                    Some(_) => {}
                }
            }
            done.removed = servers
                .keys()
                .filter(|name| !fresh.servers.contains_key(*name))
                .cloned()
                .collect();
            for name in &done.added {
                servers.insert(name.clone(), fresh.servers[name].clone());
            }
        }
        // With the server map released: making an instance takes the other lock.
        for name in &done.added {
            self.make_unbound(name, &fresh.servers[name]);
        }
        done
    }

    fn make_unbound(&self, name: &str, server: &ServerConfig) {
        if server.sharing == Sharing::Shared {
            let _ = self.instance(name, Instance::unbound(), None);
        }
    }

    /// The instance of `server` that serves session `session`, counted as serving it until
    /// [`Registry::session_ended`].
    pub fn for_session(
        &self,
        server: &str,
        asker: Asker<'_>,
        session: SessionId,
    ) -> Result<UpstreamHandle, WireError> {
        let instance = self.instance_of(server, asker, Some(session))?;
        self.instance(server, instance, Some(session))
    }

    /// The instance a control request (which belongs to no session) goes to.
    pub fn for_control(&self, server: &str, asker: Asker<'_>) -> Result<UpstreamHandle, WireError> {
        let instance = self.instance_of(server, asker, None)?;
        self.instance(server, instance, None)
    }

    /// Which instance of `server` an asker belongs to.
    fn instance_of(
        &self,
        server: &str,
        asker: Asker<'_>,
        session: Option<SessionId>,
    ) -> Result<Instance, WireError> {
        let (sharing, pass_env) = {
            let servers = self.servers();
            let s = servers.get(server).ok_or_else(|| not_found(server))?;
            (s.sharing, s.pass_env.clone())
        };
        let scope = match sharing {
            Sharing::Shared => Scope::Unbound,
            Sharing::PerProject => match asker.project.filter(|p| p.is_absolute()) {
                Some(p) => Scope::Project(p.to_path_buf()),
                None => {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        format!(
                            "the `{server}` server runs one child per project, and this request names no project directory (a session gives it in its hello, a control request as params.project)"
                        ),
                    ));
                }
            },
            Sharing::PerSession => match session {
                Some(s) => Scope::Session(match asker.token {
                    Some(t) => SessionKey::Token(t.clone()),
                    None => SessionKey::Connection(s),
                }),
                None => {
                    return Err(WireError::new(
                        ErrorCode::InvalidRequest,
                        format!(
                            "the `{server}` server runs one child per session; reach it from an agent session (coogle mcp, coogle tools, coogle call)"
                        ),
                    ));
                }
            },
        };
        let passed = pass_env
            .iter()
            .filter_map(|name| {
                let value = asker.env?.get(name)?;
                Some((name.clone(), value.clone()))
            })
            .collect();
        Ok(Instance { scope, passed })
    }

    /// The instance, made if it does not exist; counts `session` as served by it.
    fn instance(
        &self,
        server: &str,
        instance: Instance,
        session: Option<SessionId>,
    ) -> Result<UpstreamHandle, WireError> {
        let key = (server.to_string(), instance);
        let base = self
            .servers()
            .get(server)
            .cloned()
            .ok_or_else(|| not_found(server))?;
        let mut inner = self.inner();
        if !inner.instances.contains_key(&key) {
            let extra = key.1 != Instance::unbound();
            if extra {
                make_room(&mut inner, server, self.max_instances)?;
            }
            let handle = self.start(&base, &key.1, None);
            inner.instances.insert(
                key.clone(),
                Slot {
                    handle,
                    sessions: 0,
                },
            );
        }
        let slot = inner
            .instances
            .get_mut(&key)
            .expect("the instance was just found or made");
        let handle = slot.handle.clone();
        if let Some(s) = session {
            slot.sessions += 1;
            inner.session_of.insert(s, key);
        }
        Ok(handle)
    }

    fn start(
        &self,
        base: &ServerConfig,
        instance: &Instance,
        adopted: Option<Adopted>,
    ) -> UpstreamHandle {
        let config = instance_config(base, instance);
        let record = if *instance == Instance::unbound() {
            self.runtime.child_record(&base.name)
        } else {
            let id = format!("{}{}", instance.scope.id_text(), instance.values_text());
            self.runtime
                .child_record(&format!("{}@{}", base.name, &digest(&id)[..8]))
        };
        upstream::start(upstream::Start {
            cache_key: instance.cache_key(base),
            carried_as: instance.carried_as(),
            adopted,
            passed_env: instance.passed.clone(),
            config,
            instance: instance.label(),
            record_path: record,
            max_line: self.max_line,
            coogle_tool: self.coogle_tool,
            reaper: self.reaper.clone(),
        })
    }

    /// A session left: it no longer counts for its instance, and a session's own instance
    /// (a per-session server's) goes with it; returned to be stopped.
    pub fn session_ended(&self, session: SessionId) -> Vec<UpstreamHandle> {
        let mut inner = self.inner();
        let Some(key) = inner.session_of.remove(&session) else {
            return Vec::new();
        };
        let Some(slot) = inner.instances.get_mut(&key) else {
            return Vec::new();
        };
        slot.sessions = slot.sessions.saturating_sub(1);
        // A session's own instance goes once no connection of that session is left (a shim
        // that reconnected may briefly have two).
        if matches!(key.1.scope, Scope::Session(_)) && slot.sessions == 0 {
            return inner
                .instances
                .shift_remove(&key)
                .map(|s| s.handle)
                .into_iter()
                .collect();
        }
        Vec::new()
    }

    /// Every instance, servers in the order they were made.
    pub fn all(&self) -> Vec<UpstreamHandle> {
        self.inner()
            .instances
            .values()
            .map(|s| s.handle.clone())
            .collect()
    }

    pub fn server_names(&self) -> Vec<String> {
        self.servers().keys().cloned().collect()
    }

    /// What `status` says of servers with no instance yet (per project or per session, before
    /// any session used them): their settings, and that nothing runs.
    pub fn without_instances(&self) -> Vec<UpstreamStatus> {
        let with: std::collections::HashSet<String> = self
            .inner()
            .instances
            .keys()
            .map(|(s, _)| s.clone())
            .collect();
        self.servers()
            .values()
            .filter(|s| !with.contains(&s.name))
            .map(|s| UpstreamStatus {
                name: s.name.clone(),
                sharing: Some(s.sharing.as_str().to_string()),
                command: super::child::display_command(s),
                max_concurrent: s.max_concurrent,
                call_timeout_ms: s.call_timeout.as_millis() as u64,
                state: crate::wire::UpstreamState::Idle,
                ..UpstreamStatus::stopped(&s.name)
            })
            .collect()
    }
}

/// Below the bound of instances of `server`, or make it so by dropping unused ones.
fn make_room(inner: &mut Inner, server: &str, max: usize) -> Result<(), WireError> {
    let extra = |inner: &Inner| {
        inner
            .instances
            .keys()
            .filter(|(s, i)| s == server && *i != Instance::unbound())
            .count()
    };
    if extra(inner) < max {
        return Ok(());
    }
    let unused: Vec<(String, Instance)> = inner
        .instances
        .iter()
        .filter(|((s, i), slot)| {
            s == server
                && *i != Instance::unbound()
                && slot.sessions == 0
                && slot.handle.is_unused()
        })
        .map(|(k, _)| k.clone())
        .collect();
    for key in unused {
        if let Some(slot) = inner.instances.shift_remove(&key) {
            tracing::debug!(upstream = %server, instance = ?key.1, "dropped an unused instance");
            tokio::spawn(async move { slot.handle.shutdown(EVICT_GRACE).await });
        }
    }
    if extra(inner) < max {
        return Ok(());
    }
    Err(WireError::new(
        ErrorCode::UpstreamUnavailable,
        format!(
            "the `{server}` server already runs {max} separate instances (projects, sessions or passEnv values), all in use; close some agent sessions and retry, or raise maxInstances in the config"
        ),
    ))
}

fn not_found(server: &str) -> WireError {
    WireError::new(ErrorCode::NotFound, format!("no upstream named {server:?}"))
}

/// The hex SHA-256 of `text`: names files and labels without revealing what it is of.
fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server's definition as one instance runs it: a per-project instance runs in its project.
fn instance_config(base: &ServerConfig, instance: &Instance) -> ServerConfig {
    let mut config = base.clone();
    if let Scope::Project(dir) = &instance.scope {
        config.cwd = Some(dir.clone());
    }
    config
}
