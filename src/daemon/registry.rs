//! Which child serves a session: the upstreams' instances.
//!
//! A server shared by everyone has one instance. A `per-project` server has one per project
//! directory (from the session's `CLAUDE_PROJECT_DIR`, else its client's working directory), and
//! its child runs in that directory; a `per-session` server has one per session, stopped when
//! the session leaves. Instances are made on the first session that needs one, and each is an
//! upstream actor of its own, so nothing crosses from one to another. Every instance of a
//! server shares what the daemon learned of it (its cache), so a new project's first session
//! starts as fast as any.
//!
//! It owns the daemon's server map, which `reload` may only grow: a server new in the config
//! file is added at once, one that changed or went keeps running as it was until the next
//! start (sessions are using it). Two locks, `servers` and `instances`, each held only for a
//! look or an insert and never both at once, never across an await.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;

use super::SessionId;
use super::reaper::Reaper;
use super::upstream::{self, UpstreamHandle};
use crate::config::{self, Config, ServerConfig, Sharing};
use crate::paths::RuntimePaths;
use crate::wire::Reloaded;

/// Project instances one server may have at the most; past this the oldest idle one is not
/// kept apart any more (a new project then gets the server's unbound instance).
const MAX_PROJECTS: usize = 64;

/// Which instance of a server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Instance {
    /// The only one (shared), or the one for requests that name no project (control).
    Unbound,
    Project(PathBuf),
    Session(SessionId),
}

impl Instance {
    /// How `status` names it.
    pub fn label(&self) -> Option<String> {
        match self {
            Instance::Unbound => None,
            Instance::Project(p) => Some(p.display().to_string()),
            Instance::Session(s) => Some(format!("session {s}")),
        }
    }
}

pub(crate) struct Registry {
    /// The servers the daemon serves, in config order; `reload` appends.
    servers: Mutex<IndexMap<String, ServerConfig>>,
    instances: Mutex<IndexMap<(String, Instance), UpstreamHandle>>,
    runtime: RuntimePaths,
    max_line: usize,
    coogle_tool: bool,
    reaper: Arc<Reaper>,
}

impl Registry {
    /// Every server's unbound instance is made at once (its child still starts on demand).
    pub fn new(config: &Config, runtime: &RuntimePaths, reaper: &Arc<Reaper>) -> Registry {
        let r = Registry {
            servers: Mutex::new(config.servers.clone()),
            instances: Mutex::new(IndexMap::new()),
            runtime: runtime.clone(),
            max_line: config.max_line_bytes.saturating_mul(4),
            coogle_tool: config.coogle_tool,
            reaper: reaper.clone(),
        };
        for name in config.servers.keys() {
            r.get_or_start(name, Instance::Unbound);
        }
        r
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IndexMap<(String, Instance), UpstreamHandle>> {
        self.instances.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn servers(&self) -> std::sync::MutexGuard<'_, IndexMap<String, ServerConfig>> {
        self.servers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server a session or control request names, by the rule of [`Config::server`]
    /// (none: the only one, else `google`), over the servers served now.
    pub fn resolve(&self, name: Option<&str>) -> Result<String, config::ConfigError> {
        config::pick_server(&self.servers(), name).map(|s| s.name.clone())
    }

    /// Take in a freshly loaded config: its new servers are served from now on (their
    /// unbound instance made, the child still on demand); changed and removed ones are only
    /// reported, since sessions may be in the middle of calls on them.
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
        // With the server map released: making an instance takes the instances lock.
        for name in &done.added {
            self.get_or_start(name, Instance::Unbound);
        }
        done
    }

    /// The instance of `server` a session with `project` (and id `session`) is served by.
    pub fn for_session(
        &self,
        server: &str,
        project: Option<&Path>,
        session: SessionId,
    ) -> Option<UpstreamHandle> {
        let sharing = self.servers().get(server)?.sharing;
        let instance = match (sharing, project) {
            (Sharing::Shared, _) | (Sharing::PerProject, None) => Instance::Unbound,
            (Sharing::PerProject, Some(p)) => {
                let key = (server.to_string(), Instance::Project(p.to_path_buf()));
                let projects = self
                    .lock()
                    .keys()
                    .filter(|(s, i)| s == server && matches!(i, Instance::Project(_)))
                    .count();
                if projects >= MAX_PROJECTS && !self.lock().contains_key(&key) {
                    Instance::Unbound
                } else {
                    Instance::Project(p.to_path_buf())
                }
            }
            (Sharing::PerSession, _) => Instance::Session(session),
        };
        Some(self.get_or_start(server, instance))
    }

    /// The unbound instance of `server` (control requests, which name no project).
    pub fn unbound(&self, server: &str) -> Option<UpstreamHandle> {
        if let Some(h) = self.lock().get(&(server.to_string(), Instance::Unbound)) {
            return Some(h.clone());
        }
        // A server `reload` has just added may not have its instance yet: make it here.
        let known = self.servers().contains_key(server);
        known.then(|| self.get_or_start(server, Instance::Unbound))
    }

    /// `server` must be one of `servers` (they are never removed).
    fn get_or_start(&self, server: &str, instance: Instance) -> UpstreamHandle {
        let key = (server.to_string(), instance);
        if let Some(h) = self.lock().get(&key) {
            return h.clone();
        }
        let base = self.servers()[server].clone();
        let mut config = base.clone();
        let record = match &key.1 {
            Instance::Unbound => self.runtime.child_record(server),
            other => {
                if let Instance::Project(dir) = other {
                    config.cwd = Some(dir.clone());
                }
                self.runtime
                    .child_record(&format!("{server}@{}", short_hash(other)))
            }
        };
        let handle = upstream::start(upstream::Start {
            config,
            cache_key: base.cache_key(),
            instance: key.1.label(),
            record_path: record,
            max_line: self.max_line,
            coogle_tool: self.coogle_tool,
            reaper: self.reaper.clone(),
        });
        self.lock().entry(key).or_insert(handle).clone()
    }

    /// A session left: its own instances (per-session servers) go with it.
    pub fn session_ended(&self, session: SessionId) -> Vec<UpstreamHandle> {
        let mut instances = self.lock();
        let gone: Vec<(String, Instance)> = instances
            .keys()
            .filter(|(_, i)| *i == Instance::Session(session))
            .cloned()
            .collect();
        gone.iter()
            .filter_map(|k| instances.shift_remove(k))
            .collect()
    }

    /// Every instance, servers in config order.
    pub fn all(&self) -> Vec<UpstreamHandle> {
        self.lock().values().cloned().collect()
    }

    pub fn server_names(&self) -> Vec<String> {
        self.servers().keys().cloned().collect()
    }
}

/// A short, stable name for an instance in file names.
fn short_hash(instance: &Instance) -> String {
    use sha2::{Digest, Sha256};
    let text = format!("{instance:?}");
    Sha256::digest(text.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
