//! MCP client config files (Claude Code's `~/.claude.json`, Claude Desktop's
//! `claude_desktop_config.json`, Cursor's `~/.cursor/mcp.json`): finding the Google Workspace
//! entry and its OAuth client, pointing the client at `coogle mcp`, and undoing exactly that.
//!
//! The edits here are pure functions on a parsed document, so they can be checked as
//! properties; [`patch_file`] and [`revert_file`] put them behind [`crate::fsutil`]'s backup,
//! atomic write and re-read. Nothing here touches a key it did not write: every change is
//! recorded as a [`Change`] (where, what was there, what was written), and a revert only undoes
//! a change whose value is still the one written.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::config::Credentials;
pub(crate) use crate::config::claude_json::describe;
use crate::config::claude_json::{
    CLIENT_ID_VAR, CLIENT_SECRET_VAR, env_credentials, mcp_server_entries,
};
use crate::fsutil::{self, FsError, Mode, Written};
use crate::paths;

/// The name of the entry coogle adds when there is no Google Workspace entry to replace.
pub const ENTRY_NAME: &str = "coogle";
/// The name of the search server's entry.
pub const SEARCH_ENTRY_NAME: &str = "coogle-search";

/// Which MCP client a config file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ClientKind {
    ClaudeCode,
    ClaudeDesktop,
    Cursor,
}

impl ClientKind {
    pub const ALL: [ClientKind; 3] = [
        ClientKind::ClaudeCode,
        ClientKind::ClaudeDesktop,
        ClientKind::Cursor,
    ];

    pub fn label(self) -> &'static str {
        match self {
            ClientKind::ClaudeCode => "Claude Code",
            ClientKind::ClaudeDesktop => "Claude Desktop",
            ClientKind::Cursor => "Cursor",
        }
    }

    /// The config file on this machine.
    pub fn default_path(self) -> PathBuf {
        let home = paths::home();
        match self {
            ClientKind::ClaudeCode => home.join(".claude.json"),
            ClientKind::ClaudeDesktop => paths::Platform::current().claude_desktop_config(),
            ClientKind::Cursor => home.join(".cursor").join("mcp.json"),
        }
    }

    /// Claude Code also keeps per-project `mcpServers` under `projects.*`.
    fn has_projects(self) -> bool {
        self == ClientKind::ClaudeCode
    }
}

/// Which coogle upstream a client entry serves; it decides the entry's name, its `--server`
/// and which existing entries it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upstream {
    /// Google Workspace MCP (`coogle mcp`); replaces entries whose env has the OAuth client.
    Google,
    /// The built-in ask_google server (`coogle mcp --server search`); replaces ask-google-mcp.
    Search,
}

impl Upstream {
    /// The daemon's name for it, as `coogle mcp --server` takes it.
    pub fn server(self) -> &'static str {
        match self {
            Upstream::Google => "google",
            Upstream::Search => "search",
        }
    }

    /// The entry name coogle adds when there is nothing to replace.
    pub fn entry_name(self) -> &'static str {
        match self {
            Upstream::Google => ENTRY_NAME,
            Upstream::Search => SEARCH_ENTRY_NAME,
        }
    }

    /// Env vars coogle supplies itself, so they leave the entry.
    fn supplied_env(self) -> &'static [&'static str] {
        match self {
            Upstream::Google => &[CLIENT_ID_VAR, CLIENT_SECRET_VAR],
            Upstream::Search => &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
        }
    }

    /// True for an entry that starts this server directly, which coogle's entry replaces.
    fn replaces(self, entry: &Value) -> bool {
        match self {
            Upstream::Google => has_oauth_env(entry),
            Upstream::Search => {
                !looks_like_coogle(entry)
                    && std::iter::once(entry.get("command"))
                        .chain(
                            entry
                                .get("args")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .map(Some),
                        )
                        .filter_map(|v| v.and_then(Value::as_str))
                        .any(|s| s.contains("ask-google-mcp"))
            }
        }
    }
}

/// The client entry that starts coogle's shim: `<command> mcp [--server S] [options]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Shim {
    pub upstream: Upstream,
    /// The stable path of this binary (Homebrew's `opt` link, never a Cellar path).
    pub command: PathBuf,
    /// Global options the shim needs to find this daemon: `--config`/`--socket` when they are
    /// not the defaults.
    pub options: Vec<String>,
}

impl Shim {
    pub fn new(upstream: Upstream, command: &Path) -> Shim {
        Shim {
            upstream,
            command: command.to_path_buf(),
            options: Vec::new(),
        }
    }

    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["mcp".to_owned()];
        if self.upstream == Upstream::Search {
            args.extend(["--server".to_owned(), "search".to_owned()]);
        }
        args.extend(self.options.iter().cloned());
        args
    }

    /// The entry to write. Claude Code records the transport `type`; the other clients' files
    /// do not use it.
    pub fn entry(&self, kind: ClientKind) -> Value {
        let command = self.command.to_string_lossy();
        let args = self.args();
        match kind {
            ClientKind::ClaudeCode => json!({"type": "stdio", "command": command, "args": args}),
            _ => json!({"command": command, "args": args}),
        }
    }

    /// True when `entry` runs exactly this shim (what coogle writes).
    pub fn is_exact(&self, entry: &Value) -> bool {
        entry.get("command").and_then(Value::as_str) == Some(&*self.command.to_string_lossy())
            && entry.get("args") == Some(&json!(self.args()))
            && !self.upstream.replaces(entry)
    }

    /// True when `entry` runs some coogle binary's shim for this upstream, maybe another path
    /// or other options: an entry setup wrote before, which it updates in place.
    pub fn is_ours(&self, entry: &Value) -> bool {
        looks_like_coogle(entry) && shim_server(entry) == self.upstream.server()
    }
}

/// The `--server` a coogle shim entry asks for (`google` when it names none).
pub fn shim_server(entry: &Value) -> String {
    let args: Vec<&str> = entry
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if *a == "--server" {
            return it.next().map_or("google", |s| s).to_owned();
        }
        if let Some(v) = a.strip_prefix("--server=") {
            return v.to_owned();
        }
    }
    Upstream::Google.server().to_owned()
}

/// One edit: the JSON path of an `mcpServers` entry, what was there (`None`: nothing), and
/// what coogle wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub location: Vec<String>,
    pub original: Option<Value>,
    pub written: Value,
    /// True when coogle also created the `mcpServers` object holding the entry.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub created_parent: bool,
}

fn has_oauth_env(entry: &Value) -> bool {
    entry
        .get("env")
        .and_then(Value::as_object)
        .is_some_and(|env| env.contains_key(CLIENT_ID_VAR))
}

/// Every `mcpServers` entry in scope, in file order: the top level first, then each project's.
pub fn entries(doc: &Value, kind: ClientKind) -> Vec<(Vec<String>, &Value)> {
    mcp_server_entries(doc, kind.has_projects())
}

/// The Google Workspace entries: those whose `env` has `GOOGLE_OAUTH_CLIENT_ID`.
pub fn google_entries(doc: &Value, kind: ClientKind) -> Vec<(Vec<String>, &Value)> {
    entries(doc, kind)
        .into_iter()
        .filter(|(_, e)| has_oauth_env(e))
        .collect()
}

/// The Google OAuth client in a client config: the first entry (top level, then projects)
/// whose env holds both variables, else a `coogle` entry's env. Returns where it was found.
pub fn find_credentials(doc: &Value, kind: ClientKind) -> Option<(String, Credentials)> {
    let all = entries(doc, kind);
    all.iter()
        .filter(|(_, e)| has_oauth_env(e))
        .chain(
            all.iter()
                .filter(|(loc, _)| loc.last().map(String::as_str) == Some(ENTRY_NAME)),
        )
        .find_map(|(loc, e)| env_credentials(e).map(|c| (describe(loc), c)))
}

/// An entry that looks like coogle's shim (`…/coogle mcp …`), whatever binary it points at.
pub fn looks_like_coogle(entry: &Value) -> bool {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let args = entry.get("args").and_then(Value::as_array);
    Path::new(command)
        .file_name()
        .is_some_and(|n| n == "coogle")
        && args.is_some_and(|a| a.first().and_then(Value::as_str) == Some("mcp"))
}

/// The replacement for an existing entry: coogle's entry. An entry that started the server
/// directly loses its `env` (`coogle mcp` passes none on: the OAuth client and other settings
/// belong to the upstream in config.json, and uninstall gives the original back); an older
/// coogle entry keeps its own env (`RUST_LOG`, say) minus what coogle supplies.
fn replacement(old: &Value, base: &Value, upstream: Upstream) -> Value {
    let mut new = base.clone();
    if upstream.replaces(old) {
        return new;
    }
    if let Some(env) = old.get("env").and_then(Value::as_object) {
        let rest: Map<String, Value> = env
            .iter()
            .filter(|(k, _)| !upstream.supplied_env().contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !rest.is_empty() {
            new["env"] = Value::Object(rest);
        }
    }
    new
}

pub(crate) fn get_path<'a>(doc: &'a Value, location: &[String]) -> Option<&'a Value> {
    location.iter().try_fold(doc, |v, k| v.get(k))
}

pub(crate) fn get_path_mut<'a>(doc: &'a mut Value, location: &[String]) -> Option<&'a mut Value> {
    location.iter().try_fold(doc, |v, k| v.get_mut(k))
}

/// Point the client at coogle: replace in place (same name, same position) every entry that
/// starts the server directly and every older coogle entry for the same upstream (another
/// binary path or options); when there is none, and no entry already runs exactly this shim,
/// replace or add the top-level entry named [`Upstream::entry_name`] at the end of
/// `mcpServers`. Returns the new document and the changes (empty: nothing to do).
pub fn patch(doc: &Value, kind: ClientKind, shim: &Shim) -> (Value, Vec<Change>) {
    let base = shim.entry(kind);
    let mut new = doc.clone();
    let mut changes = Vec::new();
    let all = entries(doc, kind);
    let targets: Vec<(Vec<String>, Value)> = all
        .iter()
        .filter(|(_, e)| shim.upstream.replaces(e) || (shim.is_ours(e) && !shim.is_exact(e)))
        .map(|(l, e)| (l.clone(), (*e).clone()))
        .collect();
    for (location, old) in &targets {
        let written = replacement(old, &base, shim.upstream);
        if let Some(slot) = get_path_mut(&mut new, location) {
            *slot = written.clone();
        }
        changes.push(Change {
            location: location.clone(),
            original: Some(old.clone()),
            written,
            created_parent: false,
        });
    }
    if !targets.is_empty() || all.iter().any(|(_, e)| shim.is_exact(e)) {
        return (new, changes);
    }
    let name = shim.upstream.entry_name();
    let location = vec!["mcpServers".to_owned(), name.to_owned()];
    let Some(root) = new.as_object_mut() else {
        return (doc.clone(), Vec::new());
    };
    let created_parent = !root.get("mcpServers").is_some_and(Value::is_object);
    if created_parent {
        root.insert("mcpServers".into(), json!({}));
    }
    let servers = root
        .get_mut("mcpServers")
        .and_then(Value::as_object_mut)
        .expect("just ensured");
    let original = servers.get(name).cloned();
    let written = match &original {
        Some(old) => replacement(old, &base, shim.upstream),
        None => base,
    };
    servers.insert(name.into(), written.clone());
    changes.push(Change {
        location,
        original,
        written,
        created_parent,
    });
    (new, changes)
}

/// What a revert did with each change.
#[derive(Debug, Clone, PartialEq)]
pub enum Reverted {
    Restored(String),
    Removed(String),
    /// The entry already holds its original (a run that died after giving it back, before
    /// recording that): nothing to do.
    AlreadyBack(String),
    /// The entry is no longer what coogle wrote (someone edited it): left alone.
    Skipped(String),
}

/// Undo `changes` (newest first): an entry still equal to what coogle wrote gets its original
/// back in place, or is removed when coogle added it. Everything else is left as it is.
pub fn revert(doc: &Value, changes: &[Change]) -> (Value, Vec<Reverted>) {
    let mut new = doc.clone();
    let mut report = Vec::new();
    for change in changes.iter().rev() {
        let what = describe(&change.location);
        let now = get_path(&new, &change.location);
        if now != Some(&change.written) {
            report.push(if now == change.original.as_ref() {
                Reverted::AlreadyBack(what)
            } else {
                Reverted::Skipped(what)
            });
            continue;
        }
        let (parent_loc, key) = change.location.split_at(change.location.len() - 1);
        match &change.original {
            Some(original) => {
                if let Some(slot) = get_path_mut(&mut new, &change.location) {
                    *slot = original.clone();
                }
                report.push(Reverted::Restored(what));
            }
            None => {
                if let Some(parent) =
                    get_path_mut(&mut new, parent_loc).and_then(Value::as_object_mut)
                {
                    parent.shift_remove(&key[0]);
                    let now_empty = parent.is_empty();
                    if change.created_parent && now_empty {
                        let (grand_loc, parent_key) = parent_loc.split_at(parent_loc.len() - 1);
                        if let Some(grand) =
                            get_path_mut(&mut new, grand_loc).and_then(Value::as_object_mut)
                        {
                            grand.shift_remove(&parent_key[0]);
                        }
                    }
                }
                report.push(Reverted::Removed(what));
            }
        }
    }
    (new, report)
}

/// What [`patch_file`] did.
#[derive(Debug, Clone)]
pub struct Patched {
    pub path: PathBuf,
    pub written: Written,
    pub changes: Vec<Change>,
    /// True when the user-scope entries were registered with `claude mcp add-json`.
    pub via_claude_cli: bool,
    /// Why the `claude` CLI was not (fully) used, when it was tried.
    pub cli_error: Option<String>,
}

/// Patch a client config file in place: backup, atomic write, the re-read and the rename under
/// the client's own lock (the patch is recomputed on the new content when the client wrote
/// meanwhile), and a re-read after it (see [`fsutil::update_with_hook`]). A missing file is
/// created (mode 0600); an unparsable one is an error and stays untouched.
pub fn patch_file_with_hook(
    path: &Path,
    kind: ClientKind,
    shim: &Shim,
    hook: &mut dyn FnMut(fsutil::Moment, &Path),
) -> Result<Patched, FsError> {
    apply_file_journaled(path, &|doc| patch(doc, kind, shim), &mut |_| Ok(()), hook)
}

/// A document edit that says what it changed: `(new document, changes)`, no changes meaning
/// nothing to do. It must be idempotent (asked about its own result, it changes nothing),
/// since [`fsutil::update_with_hook`] may ask again after a concurrent write.
pub type Plan<'a> = dyn Fn(&Value) -> (Value, Vec<Change>) + 'a;

/// What a write of a client file is about to change, told to its [`Journal`] before the file
/// changes.
#[derive(Debug, Clone, Copy)]
pub struct Intent<'a> {
    pub changes: &'a [Change],
    /// The backup of the file taken for this write.
    pub backup: Option<&'a Path>,
    /// Made through `claude mcp remove` and `add-json` rather than one atomic write.
    pub via_cli: bool,
}

/// Records an [`Intent`] before the write; an error stops the write, nothing changed.
pub type Journal<'a> = dyn FnMut(Intent<'_>) -> Result<(), FsError> + 'a;

/// [`patch_file_with_hook`] for any [`Plan`], with a [`Journal`] told each round's changes
/// before the file changes: `coogle share` rewrites entries with it.
pub fn apply_file_journaled(
    path: &Path,
    plan: &Plan<'_>,
    journal: &mut Journal<'_>,
    hook: &mut dyn FnMut(fsutil::Moment, &Path),
) -> Result<Patched, FsError> {
    let changes = std::cell::RefCell::new(Vec::new());
    let written = fsutil::update_json_journaled(
        path,
        Mode::KeepOr(0o600),
        CLIENT_LOCK,
        |doc| {
            let empty = json!({});
            let (new, c) = plan(doc.unwrap_or(&empty));
            if c.is_empty() {
                // Nothing (left) to do; after a write that another program's write replaced,
                // this means our change is in theirs, and the changes already recorded hold.
                return Ok(None);
            }
            *changes.borrow_mut() = c;
            Ok(Some(new))
        },
        &mut |backup| {
            journal(Intent {
                changes: &changes.borrow(),
                backup,
                via_cli: false,
            })
        },
        hook,
    )?;
    let mut changes = changes.into_inner();
    if written == Written::Unchanged {
        changes.clear();
    }
    Ok(Patched {
        path: fsutil::resolve(path),
        written,
        changes,
        via_claude_cli: false,
        cli_error: None,
    })
}

/// Apply `plan` to a client file, telling `journal` first.
pub fn apply_file(
    path: &Path,
    plan: &Plan<'_>,
    journal: &mut Journal<'_>,
) -> Result<Patched, FsError> {
    apply_file_journaled(path, plan, journal, &mut |_, _| {})
}

/// Point a client file at coogle's `shim`, telling `journal` first.
pub fn patch_file_journaled(
    path: &Path,
    kind: ClientKind,
    shim: &Shim,
    journal: &mut Journal<'_>,
) -> Result<Patched, FsError> {
    apply_file(path, &|doc| patch(doc, kind, shim), journal)
}

/// [`patch_file_journaled`] with nobody to tell.
pub fn patch_file(path: &Path, kind: ClientKind, shim: &Shim) -> Result<Patched, FsError> {
    patch_file_journaled(path, kind, shim, &mut |_| Ok(()))
}

/// The lock around writes of a client config: Claude Code's mkdir lock. Claude Desktop and
/// Cursor take none that coogle knows of; for their files it costs one mkdir and rmdir.
pub(crate) const CLIENT_LOCK: fsutil::Lock = fsutil::Lock::Mkdir;

/// Undo recorded changes in a client config file. When the result equals one of `backups`
/// (the file was not otherwise changed since), that backup's bytes are put back exactly;
/// otherwise the reverted document is written, keeping whatever else changed meanwhile.
pub fn revert_file(
    path: &Path,
    changes: &[Change],
    backups: &[PathBuf],
) -> Result<(Written, Vec<Reverted>), FsError> {
    let target = fsutil::resolve(path);
    let mut report = Vec::new();
    let written = fsutil::update(path, Mode::KeepOr(0o600), CLIENT_LOCK, |old| {
        let Some(old) = old else {
            report = changes
                .iter()
                .map(|c| Reverted::Skipped(describe(&c.location)))
                .collect();
            return Ok(None);
        };
        let doc = fsutil::parse_json(old, &target)?;
        let (new, r) = revert(&doc, changes);
        if new == doc {
            // Asked again after a write another program's write replaced: what the write
            // reported stands (the reverted entries are no longer "as written").
            if report.is_empty() {
                report = r;
            }
            return Ok(None);
        }
        report = r;
        for b in backups {
            if let Ok(bytes) = std::fs::read(b)
                && serde_json::from_slice::<Value>(&bytes).ok().as_ref() == Some(&new)
            {
                return Ok(Some(bytes));
            }
        }
        Ok(Some(fsutil::to_json_bytes(&new)))
    })?;
    Ok((written, report))
}

/// What [`revert_file`] would do with `changes`, changing nothing.
pub fn preview_revert(path: &Path, changes: &[Change]) -> Result<Vec<Reverted>, FsError> {
    let target = fsutil::resolve(path);
    let Some(bytes) = fsutil::read_optional(&target)? else {
        return Ok(changes
            .iter()
            .map(|c| Reverted::Skipped(describe(&c.location)))
            .collect());
    };
    let doc = fsutil::parse_json(&bytes, &target)?;
    Ok(revert(&doc, changes).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Value {
        serde_json::from_str(include_str!("../../tests/data/claude.json")).unwrap()
    }

    #[test]
    fn finds_top_level_credentials_first() {
        let (at, c) = find_credentials(&fixture(), ClientKind::ClaudeCode).unwrap();
        assert_eq!(at, "mcpServers.workspace");
        assert_eq!(c.client_id, "top-level-id.apps.googleusercontent.com");
    }

    fn shim(cmd: &str) -> Shim {
        Shim::new(Upstream::Google, Path::new(cmd))
    }

    #[test]
    fn patch_replaces_every_google_entry_in_place() {
        let doc = fixture();
        let cmd = "/opt/homebrew/opt/coogle/bin/coogle";
        let (new, changes) = patch(&doc, ClientKind::ClaudeCode, &shim(cmd));
        assert_eq!(changes.len(), 2);
        assert_eq!(
            new["mcpServers"]["workspace"],
            json!({"type": "stdio", "command": cmd, "args": ["mcp"]})
        );
        let keys: Vec<_> = new["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["filesystem", "workspace"]);
        assert!(new["projects"]["/home/ada/src/coogle"]["mcpServers"]["coogle"]["env"].is_null());
        let (again, none) = patch(&new, ClientKind::ClaudeCode, &shim(cmd));
        assert!(none.is_empty());
        assert_eq!(again, new);
        let (back, _) = revert(&new, &changes);
        assert_eq!(back, doc);
    }

    #[test]
    fn adds_an_entry_when_there_is_none() {
        let (new, changes) = patch(
            &json!({"a": 1}),
            ClientKind::Cursor,
            &shim("/usr/bin/coogle"),
        );
        assert_eq!(
            new,
            json!({"a": 1, "mcpServers": {"coogle": {"command": "/usr/bin/coogle", "args": ["mcp"]}}})
        );
        assert!(changes[0].created_parent);
        let (back, _) = revert(&new, &changes);
        assert_eq!(back, json!({"a": 1}));
    }

    /// A second setup with another binary path (a move from a Cellar path to `opt`) or another
    /// `--config` updates the entries it wrote before in place instead of adding a second one.
    #[test]
    fn older_coogle_entries_are_updated_in_place() {
        let doc = json!({"mcpServers": {
            "workspace": {"type": "stdio", "command": "/opt/homebrew/Cellar/coogle/0.1.0/bin/coogle", "args": ["mcp"]},
            "coogle-search": {"command": "/usr/bin/coogle", "args": ["mcp", "--server", "search"]},
            "other": {"command": "npx", "args": ["x"]}
        }});
        let mut s = shim("/opt/homebrew/opt/coogle/bin/coogle");
        s.options = vec!["--config".into(), "/etc/coogle.json".into()];
        let (new, changes) = patch(&doc, ClientKind::ClaudeCode, &s);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(
            new["mcpServers"]["workspace"]["args"],
            json!(["mcp", "--config", "/etc/coogle.json"])
        );
        assert_eq!(
            new["mcpServers"]["coogle-search"],
            doc["mcpServers"]["coogle-search"]
        );
        assert_eq!(new["mcpServers"].as_object().unwrap().len(), 3);
    }

    /// The search entry replaces an ask-google-mcp entry in place, without its env (the API key
    /// lives in coogle's config; uninstall gives the original back).
    #[test]
    fn search_entry_replaces_ask_google() {
        let doc = json!({"mcpServers": {
            "workspace": {"command": "uvx", "args": ["workspace-mcp"], "env": {
                "GOOGLE_OAUTH_CLIENT_ID": "i", "GOOGLE_OAUTH_CLIENT_SECRET": "s"}},
            "ask-google": {"command": "npx", "args": ["-y", "ask-google-mcp"], "env": {
                "GOOGLE_API_KEY": "AIza-fake", "HTTPS_PROXY": "http://proxy"}}
        }});
        let s = Shim::new(Upstream::Search, Path::new("/usr/bin/coogle"));
        let (new, changes) = patch(&doc, ClientKind::Cursor, &s);
        assert_eq!(changes.len(), 1);
        assert_eq!(
            new["mcpServers"]["ask-google"],
            json!({"command": "/usr/bin/coogle", "args": ["mcp", "--server", "search"]})
        );
        assert_eq!(
            new["mcpServers"]["workspace"],
            doc["mcpServers"]["workspace"]
        );
        let (again, none) = patch(&new, ClientKind::Cursor, &s);
        assert!(none.is_empty());
        assert_eq!(again, new);
        // Without ask-google-mcp, the entry is added under its own name.
        let (added, _) = patch(&json!({}), ClientKind::Cursor, &s);
        assert_eq!(
            added["mcpServers"]["coogle-search"]["args"],
            json!(["mcp", "--server", "search"])
        );
    }

    #[test]
    fn shim_server_reads_both_spellings() {
        assert_eq!(shim_server(&json!({"args": ["mcp"]})), "google");
        assert_eq!(
            shim_server(&json!({"args": ["mcp", "--server", "search"]})),
            "search"
        );
        assert_eq!(
            shim_server(&json!({"args": ["mcp", "--server=search"]})),
            "search"
        );
    }
}
