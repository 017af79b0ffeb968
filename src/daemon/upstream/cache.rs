//! What the daemon knows of its child's answers: the initialize result and the first page of
//! the tool list, kept in memory and on disk between daemon runs, so a new session gets
//! `initialize` and `tools/list` answered at once while a slow child (uvx: seconds) is still
//! starting. A cache that cannot be read or written costs only speed, so failures are logged,
//! never fatal, and a home directory that is gone is never recreated for it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use serde_json::value::RawValue;

use crate::daemon::coogle_tool;
use crate::wire;

/// The file's shape.
#[derive(serde::Serialize, serde::Deserialize)]
struct CacheFile {
    version: String,
    initialize: Box<RawValue>,
    tools: Box<RawValue>,
}

pub(super) struct Cache {
    path: PathBuf,
    upstream: String,
    pub init_result: Option<Box<RawValue>>,
    /// The first page of `tools/list`, as the child answered it.
    pub tools: Option<Box<RawValue>>,
    pub tools_count: Option<usize>,
    /// The child has a tool named `coogle` itself (then the daemon does not add its own).
    pub upstream_has_coogle: bool,
}

impl Cache {
    pub fn new(upstream: &str, cache_key: &str) -> Cache {
        Cache {
            path: crate::paths::cache_dir().join(format!("upstream-{upstream}-{cache_key}.json")),
            upstream: upstream.to_string(),
            init_result: None,
            tools: None,
            tools_count: None,
            upstream_has_coogle: false,
        }
    }

    pub fn load(&mut self) {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return;
        };
        match serde_json::from_slice::<CacheFile>(&bytes) {
            Ok(c) => {
                tracing::debug!(upstream = %self.upstream, path = %self.path.display(), "answering new sessions from the cached initialize result and tool list until the child is ready");
                self.init_result = Some(c.initialize);
                self.remember_tools(c.tools);
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "ignoring an unreadable upstream cache: {e}")
            }
        }
    }

    /// A live tool list arrived: keep it (and write it down). True when it differs from the
    /// list sessions were shown before, so they must hear `list_changed`.
    pub fn set_tools(&mut self, result: Box<RawValue>) -> bool {
        let changed = self
            .tools
            .as_ref()
            .is_some_and(|old| old.get() != result.get());
        if changed {
            tracing::info!(upstream = %self.upstream, before = ?self.tools.as_deref().and_then(tool_names), after = ?tool_names(&result), "the tool list changed");
        }
        self.remember_tools(result);
        self.save();
        changed
    }

    fn remember_tools(&mut self, tools: Box<RawValue>) {
        self.tools_count = count_tools(&tools);
        self.upstream_has_coogle = coogle_tool::inject(&tools, &self.upstream).is_none();
        self.tools = Some(tools);
    }

    fn save(&self) {
        let (Some(initialize), Some(tools)) = (&self.init_result, &self.tools) else {
            return;
        };
        let file = CacheFile {
            version: wire::VERSION.to_string(),
            initialize: initialize.clone(),
            tools: tools.clone(),
        };
        if let Err(e) = write(&self.path, &serde_json::to_vec(&file).unwrap_or_default()) {
            tracing::warn!(path = %self.path.display(), "could not save the upstream cache: {e}");
        }
    }
}

fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Never recreate a home directory that is gone (a deleted test HOME, a removed account):
    // the cache is an optimisation, not worth resurrecting a tree for.
    if !crate::paths::home().is_dir() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
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
