//! What the daemon knows of its child's answers, kept in memory and on disk between daemon
//! runs: the child's era and how it answers `server/discover` and `initialize`, and the first
//! page of its tool list for each set of client capabilities it was asked with (a child's list
//! may depend on what the client can do). A new session is answered from here at once while a
//! slow child (uvx: seconds) is still starting; once the child is up, its own cache hints
//! (`ttlMs`) decide how long an answer is reused, and the daemon revalidates what it served from
//! disk. A cache that cannot be read or written costs only speed, so failures are logged,
//! never fatal, and a home directory that is gone is never recreated for it.
//!
//! Only what may be shared is kept: a list the child marked `cacheScope: "private"` is
//! answered to the session that asked and forgotten, never written down nor served to another
//! session. The files are the user's alone (the directory 0700, each file 0600, tightened when
//! an older coogle left them looser), and a file is read only when it is a regular file of
//! bounded size, opened without following a symlink and without blocking: a FIFO or a link to
//! `/dev/zero` in its place costs the cache, never the daemon.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::Value;
use serde_json::value::RawValue;

use super::era::Era;
use crate::daemon::coogle_tool;
use crate::wire;

/// Tool lists kept for this many distinct capability sets at the most.
const MAX_TOOL_LISTS: usize = 8;
/// A cache file larger than this is not read (eight large tool lists fit many times over).
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// The file's shape. Fields added after 0.1.0 are optional, so an old file still loads (as a
/// handshake-era child's).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheFile {
    version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    era: Option<Era>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    initialize: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    discover: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    discover_error: Option<Box<RawValue>>,
    /// 0.1.0's single tool list (the config's capabilities).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_lists: Vec<StoredTools>,
    /// Since when (Unix seconds) the child is known to exit when probed with
    /// `server/discover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    probe_kills_since: Option<u64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredTools {
    key: String,
    capabilities: Box<RawValue>,
    result: Box<RawValue>,
}

/// One tool list (first page).
pub(super) struct Tools {
    /// The capabilities it was asked with, to ask again when revalidating.
    pub capabilities: Box<RawValue>,
    pub result: Box<RawValue>,
    /// When the live child gave it; `None` for a list read from disk.
    fetched: Option<Instant>,
    /// How long the child said it may be reused; `None`: until the child says it changed (a
    /// handshake-era child, which has no cache hints but does send `list_changed`).
    ttl: Option<Duration>,
}

impl Tools {
    /// Whether it may answer a session now. While the child is not up, anything known serves
    /// (the cold-start window); once it is, only a list the live child gave, within its TTL.
    fn usable(&self, child_up: bool, now: Instant) -> bool {
        if !child_up {
            return true;
        }
        match (self.fetched, self.ttl) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(at), Some(ttl)) => now < at + ttl,
        }
    }
}

pub(super) struct Cache {
    path: PathBuf,
    /// Whether it is kept on disk at all (an instance of one session keeps it in memory).
    persist: bool,
    upstream: String,
    pub era: Option<Era>,
    /// A handshake-era child's answer to `initialize`.
    pub init_result: Option<Box<RawValue>>,
    /// A 2026-07-28 child's DiscoverResult.
    pub discover: Option<Box<RawValue>>,
    /// How a handshake-era child answered `server/discover` (its `error` object), to answer a
    /// probing client exactly as the child would.
    pub discover_error: Option<Box<RawValue>>,
    tool_lists: IndexMap<String, Tools>,
    pub tools_count: Option<usize>,
    /// The child has a tool named `coogle` itself (then the daemon does not add its own).
    pub upstream_has_coogle: bool,
    /// Since when (Unix seconds) the child is known to exit when probed.
    pub probe_kills_since: Option<u64>,
}

/// How long "it exits when probed" is trusted before the child is probed again (it may have
/// been upgraded; a probe that kills it again costs one extra start, never a failed call).
const PROBE_KILLS_TRUSTED: u64 = 7 * 24 * 3600;

/// Now, in Unix seconds.
pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Cache {
    pub fn new(upstream: &str, cache_key: &str) -> Cache {
        Cache {
            path: crate::paths::cache_dir().join(format!("upstream-{upstream}-{cache_key}.json")),
            persist: true,
            upstream: upstream.to_string(),
            era: None,
            init_result: None,
            discover: None,
            discover_error: None,
            tool_lists: IndexMap::new(),
            tools_count: None,
            upstream_has_coogle: false,
            probe_kills_since: None,
        }
    }

    /// A cache that lives in memory only.
    pub fn without_disk(mut self) -> Cache {
        self.persist = false;
        self
    }

    /// Whether the child is known to exit when probed, recently enough to be believed.
    pub fn probe_kills(&self) -> bool {
        self.probe_kills_since
            .is_some_and(|t| now_secs().saturating_sub(t) < PROBE_KILLS_TRUSTED)
    }

    pub fn load(&mut self, config_capabilities_key: &str, config_capabilities: &Value) {
        if !self.persist {
            return;
        }
        let bytes = match read_private(&self.path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "ignoring the upstream cache: {e}");
                return;
            }
        };
        let c = match serde_json::from_slice::<CacheFile>(&bytes) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "ignoring an unreadable upstream cache: {e}");
                return;
            }
        };
        tracing::debug!(upstream = %self.upstream, path = %self.path.display(), "answering new sessions from the cache until the child is ready");
        let private = self.apply(c, config_capabilities_key, config_capabilities, None);
        if private > 0 {
            tracing::info!(upstream = %self.upstream, count = private, "removed private tool lists from the upstream cache");
            self.save();
        }
    }

    /// Take in what a cache file says; `live`: the lists were the running child's a moment
    /// ago (an upgrade in place), not read from disk. Returns how many private lists it held
    /// (never taken in).
    fn apply(
        &mut self,
        c: CacheFile,
        config_capabilities_key: &str,
        config_capabilities: &Value,
        live: Option<Instant>,
    ) -> usize {
        self.era = c.era.or(c.initialize.as_ref().map(|_| Era::Legacy));
        self.init_result = c.initialize;
        self.discover = c.discover;
        self.discover_error = c.discover_error;
        self.probe_kills_since = c.probe_kills_since;
        if let Some(tools) = c.tools {
            let caps = wire::raw(config_capabilities);
            self.remember(config_capabilities_key.to_string(), caps, tools, None, None);
        }
        let mut private = 0;
        for t in c.tool_lists {
            if is_private(&t.result) {
                // Written by a coogle that did not honour the scope: never served, and gone
                // from the disk at once.
                private += 1;
                continue;
            }
            let ttl = live.and_then(|_| ttl_of(&t.result, self.era));
            self.remember(t.key, t.capabilities, t.result, live, ttl);
        }
        private
    }

    /// Everything known, to carry across an upgrade in place (the running child's answers;
    /// private lists are never kept, here either).
    pub fn snapshot(&self) -> Box<RawValue> {
        wire::raw(&self.to_file())
    }

    /// Take in what [`Cache::snapshot`] carried: the answers of the child that is adopted.
    pub fn restore(&mut self, snapshot: &RawValue, config_capabilities: &Value) {
        match serde_json::from_str::<CacheFile>(snapshot.get()) {
            Ok(c) => {
                self.apply(c, "config", config_capabilities, Some(Instant::now()));
            }
            Err(e) => {
                tracing::warn!(upstream = %self.upstream, "the carried cache does not read ({e}); the child is asked again");
            }
        }
    }

    /// The tool list for a capability set, if it may answer a session now.
    pub fn tools(&self, key: &str, child_up: bool) -> Option<&RawValue> {
        self.tool_lists
            .get(key)
            .filter(|t| t.usable(child_up, Instant::now()))
            .map(|t| &*t.result)
    }

    /// A live tool list arrived for `key`: keep it (and write it down). True when it differs
    /// from the list sessions were shown before for that key, so they must hear `list_changed`.
    /// A private list is only looked at (its size, whether it has a `coogle` tool): it went to
    /// the session that asked, and no other session is ever served it.
    pub fn set_tools(
        &mut self,
        key: String,
        capabilities: Box<RawValue>,
        result: Box<RawValue>,
    ) -> bool {
        if is_private(&result) {
            self.tools_count = count_tools(&result);
            self.upstream_has_coogle = coogle_tool::inject(result.get(), &self.upstream).is_none();
            if self.tool_lists.shift_remove(&key).is_some() {
                self.save();
            }
            return false;
        }
        let changed = self
            .tool_lists
            .get(&key)
            .is_some_and(|old| !same_tools(&old.result, &result));
        if changed {
            let before = self
                .tool_lists
                .get(&key)
                .and_then(|t| tool_names(&t.result));
            tracing::info!(upstream = %self.upstream, ?before, after = ?tool_names(&result), "the tool list changed");
        }
        let ttl = ttl_of(&result, self.era);
        self.remember(key, capabilities, result, Some(Instant::now()), ttl);
        self.save();
        changed
    }

    fn remember(
        &mut self,
        key: String,
        capabilities: Box<RawValue>,
        result: Box<RawValue>,
        fetched: Option<Instant>,
        ttl: Option<Duration>,
    ) {
        self.tools_count = count_tools(&result);
        self.upstream_has_coogle = coogle_tool::inject(result.get(), &self.upstream).is_none();
        self.tool_lists.shift_remove(&key);
        self.tool_lists.insert(
            key,
            Tools {
                capabilities,
                result,
                fetched,
                ttl,
            },
        );
        while self.tool_lists.len() > MAX_TOOL_LISTS {
            self.tool_lists.shift_remove_index(0);
        }
    }

    /// The child said its tools changed: nothing cached may answer until it is asked again.
    pub fn invalidate_tools(&mut self) {
        for t in self.tool_lists.values_mut() {
            t.fetched = None;
        }
    }

    /// The capability sets with a known list, to revalidate once the child is up.
    pub fn tool_keys(&self) -> Vec<(String, Box<RawValue>)> {
        self.tool_lists
            .iter()
            .map(|(k, t)| (k.clone(), t.capabilities.clone()))
            .collect()
    }

    /// Write down what is known; a failure costs only speed.
    pub fn save(&self) {
        if !self.persist {
            return;
        }
        let file = self.to_file();
        if let Err(e) = write(&self.path, &serde_json::to_vec(&file).unwrap_or_default()) {
            tracing::warn!(path = %self.path.display(), "could not save the upstream cache: {e}");
        }
    }

    fn to_file(&self) -> CacheFile {
        CacheFile {
            version: wire::VERSION.to_string(),
            era: self.era,
            initialize: self.init_result.clone(),
            discover: self.discover.clone(),
            discover_error: self.discover_error.clone(),
            tools: None,
            probe_kills_since: self.probe_kills_since,
            tool_lists: self
                .tool_lists
                .iter()
                .map(|(k, t)| StoredTools {
                    key: k.clone(),
                    capabilities: t.capabilities.clone(),
                    result: t.result.clone(),
                })
                .collect(),
        }
    }
}

/// A 2026-07-28 list's `ttlMs` (absent or negative: 0, as the spec says); a handshake-era
/// child's lists have none and live until its `list_changed`.
fn ttl_of(result: &RawValue, era: Option<Era>) -> Option<Duration> {
    if era != Some(Era::Modern) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Hint {
        #[serde(rename = "ttlMs", default)]
        ttl_ms: Option<i64>,
    }
    let ms = serde_json::from_str::<Hint>(result.get())
        .ok()
        .and_then(|h| h.ttl_ms)
        .unwrap_or(0)
        .max(0);
    Some(Duration::from_millis(ms as u64))
}

/// Two lists are the same when their tools are, whatever the cache hints say.
fn same_tools(a: &RawValue, b: &RawValue) -> bool {
    if a.get() == b.get() {
        return true;
    }
    let tools = |r: &RawValue| {
        serde_json::from_str::<Value>(r.get())
            .ok()
            .and_then(|v| v.get("tools").cloned())
    };
    tools(a).is_some() && tools(a) == tools(b)
}

/// A result the child marked for its requester alone (`cacheScope: "private"`).
fn is_private(result: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Scope<'a> {
        #[serde(rename = "cacheScope", borrow)]
        cache_scope: Option<&'a str>,
    }
    serde_json::from_str::<Scope>(result.get()).is_ok_and(|s| s.cache_scope == Some("private"))
}

/// The file's bytes: `None` when there is none; an error when what is there is not a regular
/// file of ours of bounded size. Opened without following a symlink and without blocking (a
/// FIFO would otherwise hang the daemon), read no further than the cap.
fn read_private(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(std::io::Error::other("it is a symbolic link"));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "it is larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    if meta.uid() == crate::os::uid() && meta.mode() & 0o077 != 0 {
        // An older coogle wrote it with the umask's mode: make it the user's alone.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "it is larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    Ok(Some(bytes))
}

fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Never recreate a home directory that is gone (a deleted test HOME, a removed account):
    // the cache is an optimisation, not worth resurrecting a tree for.
    if !crate::paths::home().is_dir() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    private_dir(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    if let Err(e) = f.write_all(bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The cache directory, created 0700, and tightened to it when it is coogle's own
/// (`paths::cache_dir`) and an older coogle made it with the umask's mode. Any other directory
/// is left as it is: a directory the user pointed elsewhere through a symlink is theirs to
/// set, and a shared one (`/tmp`) must never be narrowed.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    if let Some(up) = dir.parent() {
        std::fs::create_dir_all(up)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if dir != crate::paths::cache_dir() {
        return Ok(());
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.is_dir()
        && meta.uid() == crate::os::uid()
        && meta.mode() & 0o077 != 0
        && meta.mode() & 0o1000 == 0
    {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn tool_names(result: &RawValue) -> Option<Vec<String>> {
    let v: Value = serde_json::from_str(result.get()).ok()?;
    let mut names: Vec<String> = v
        .get("tools")?
        .as_array()?
        .iter()
        .filter_map(|t| t.get("name")?.as_str().map(String::from))
        .collect();
    names.sort();
    Some(names)
}

fn count_tools(result: &RawValue) -> Option<usize> {
    serde_json::from_str::<Value>(result.get())
        .ok()?
        .get("tools")?
        .as_array()
        .map(Vec::len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::raw;
    use serde_json::json;

    #[test]
    fn a_live_list_serves_within_its_ttl_and_a_disk_list_only_while_the_child_is_down() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Cache::new("t", "unit");
        c.path = dir.path().join("c.json");
        c.era = Some(Era::Modern);
        let caps = raw(&json!({}));
        c.remember(
            "k".into(),
            caps.clone(),
            raw(&json!({"tools": []})),
            None,
            None,
        );
        assert!(
            c.tools("k", false).is_some(),
            "cold start: the disk list serves"
        );
        assert!(c.tools("k", true).is_none(), "child up: revalidate first");
        let fresh = raw(&json!({"tools": [], "ttlMs": 60000}));
        assert!(
            !c.set_tools("k".into(), caps.clone(), fresh),
            "same tools: no change"
        );
        assert!(c.tools("k", true).is_some());
        c.set_tools(
            "k".into(),
            caps.clone(),
            raw(&json!({"tools": [], "ttlMs": 0})),
        );
        assert!(c.tools("k", true).is_none(), "ttl 0: never reused");
        assert!(c.set_tools("k".into(), caps, raw(&json!({"tools": [{"name": "x"}]}))));
    }

    /// Regression: writing a cache file into a shared directory (a unit test's /tmp) made
    /// that directory 0700 for everyone.
    #[test]
    fn only_coogles_own_cache_directory_is_tightened() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let mut c = Cache::new("t", "k");
        c.path = dir.path().join("c.json");
        c.save();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(dir.path()), 0o1777);
        assert_eq!(mode(&c.path), 0o600);
    }

    #[test]
    fn a_0_1_0_cache_file_loads_as_a_handshake_era_childs() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Cache::new("t", "k");
        c.path = dir.path().join("c.json");
        std::fs::write(
            &c.path,
            r#"{"version":"0.1.0","initialize":{"protocolVersion":"2025-11-25"},"tools":{"tools":[{"name":"a"}]}}"#,
        )
        .unwrap();
        c.load("cfg", &json!({"roots": {}}));
        assert_eq!(c.era, Some(Era::Legacy));
        assert!(c.tools("cfg", false).is_some());
        assert_eq!(c.tools_count, Some(1));
    }
}
