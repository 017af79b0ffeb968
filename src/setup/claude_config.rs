//! MCP client config files (Claude Code's `~/.claude.json`, Claude Desktop's
//! `claude_desktop_config.json`, Cursor's `~/.cursor/mcp.json`): finding the Google Workspace
//! entry and its OAuth client, pointing the client at `coogle mcp`, and undoing exactly that.
//!
//! The edits here are pure functions on a parsed document, so they can be checked as
//! properties; [`patch_file`] and [`revert_file`] put them behind [`super::fsutil`]'s backup,
//! atomic write and re-read. Nothing here touches a key it did not write: every change is
//! recorded as a [`Change`] (where, what was there, what was written), and a revert only undoes
//! a change whose value is still the one written.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::fsutil::{self, FsError, Mode, Written};
use crate::config::Credentials;

pub const CLIENT_ID_VAR: &str = "GOOGLE_OAUTH_CLIENT_ID";
pub const CLIENT_SECRET_VAR: &str = "GOOGLE_OAUTH_CLIENT_SECRET";
/// The name of the entry coogle adds when there is no Google Workspace entry to replace.
pub const ENTRY_NAME: &str = "coogle";

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

    /// The config file on this machine, under `home`.
    pub fn default_path(self, home: &Path) -> PathBuf {
        match self {
            ClientKind::ClaudeCode => home.join(".claude.json"),
            ClientKind::ClaudeDesktop if cfg!(target_os = "macos") => home
                .join("Library/Application Support/Claude")
                .join("claude_desktop_config.json"),
            ClientKind::ClaudeDesktop => {
                let config = std::env::var_os("XDG_CONFIG_HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .unwrap_or_else(|| home.join(".config"));
                config.join("Claude").join("claude_desktop_config.json")
            }
            ClientKind::Cursor => home.join(".cursor").join("mcp.json"),
        }
    }

    /// Claude Code also keeps per-project `mcpServers` under `projects.*`.
    fn has_projects(self) -> bool {
        self == ClientKind::ClaudeCode
    }

    /// The entry that starts coogle's shim. Claude Code records the transport `type`; the
    /// other clients' files do not use it.
    pub fn entry(self, command: &Path) -> Value {
        let command = command.to_string_lossy();
        match self {
            ClientKind::ClaudeCode => json!({"type": "stdio", "command": command, "args": ["mcp"]}),
            _ => json!({"command": command, "args": ["mcp"]}),
        }
    }
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

/// `mcpServers.workspace` or `projects["/p"].mcpServers.coogle`, for people.
pub fn describe(location: &[String]) -> String {
    match location {
        [p, project, rest @ ..] if p == "projects" => {
            format!("projects[{project:?}].{}", rest.join("."))
        }
        _ => location.join("."),
    }
}

fn has_oauth_env(entry: &Value) -> bool {
    entry
        .get("env")
        .and_then(Value::as_object)
        .is_some_and(|env| env.contains_key(CLIENT_ID_VAR))
}

/// Every `mcpServers` entry in scope, in file order: the top level first, then each project's.
pub fn entries(doc: &Value, kind: ClientKind) -> Vec<(Vec<String>, &Value)> {
    fn scan<'a>(
        out: &mut Vec<(Vec<String>, &'a Value)>,
        servers: Option<&'a Value>,
        prefix: Vec<String>,
    ) {
        if let Some(servers) = servers.and_then(Value::as_object) {
            for (name, entry) in servers {
                let mut loc = prefix.clone();
                loc.push(name.clone());
                out.push((loc, entry));
            }
        }
    }
    let mut out = Vec::new();
    scan(&mut out, doc.get("mcpServers"), vec!["mcpServers".into()]);
    if kind.has_projects()
        && let Some(projects) = doc.get("projects").and_then(Value::as_object)
    {
        for (project, p) in projects {
            scan(
                &mut out,
                p.get("mcpServers"),
                vec!["projects".into(), project.clone(), "mcpServers".into()],
            );
        }
    }
    out
}

/// The Google Workspace entries: those whose `env` has `GOOGLE_OAUTH_CLIENT_ID`.
pub fn google_entries(doc: &Value, kind: ClientKind) -> Vec<(Vec<String>, &Value)> {
    entries(doc, kind)
        .into_iter()
        .filter(|(_, e)| has_oauth_env(e))
        .collect()
}

fn env_credentials(entry: &Value) -> Option<Credentials> {
    let env = entry.get("env")?.as_object()?;
    let get = |k: &str| {
        env.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Some(Credentials {
        client_id: get(CLIENT_ID_VAR)?,
        client_secret: get(CLIENT_SECRET_VAR)?,
    })
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

/// True when `entry` runs `command mcp` (what coogle writes).
pub fn is_coogle_entry(entry: &Value, command: &Path) -> bool {
    entry.get("command").and_then(Value::as_str) == Some(&*command.to_string_lossy())
        && entry.get("args") == Some(&json!(["mcp"]))
        && !has_oauth_env(entry)
}

/// An entry that looks like coogle's shim but may point at another binary.
pub fn looks_like_coogle(entry: &Value) -> bool {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let args = entry.get("args").and_then(Value::as_array);
    Path::new(command)
        .file_name()
        .is_some_and(|n| n == "coogle")
        && args.is_some_and(|a| a.first().and_then(Value::as_str) == Some("mcp"))
}

/// The replacement for an existing entry: coogle's entry plus the entry's non-OAuth `env`
/// (coogle supplies the OAuth client itself).
fn replacement(old: &Value, base: &Value) -> Value {
    let mut new = base.clone();
    if let Some(env) = old.get("env").and_then(Value::as_object) {
        let rest: Map<String, Value> = env
            .iter()
            .filter(|(k, _)| k.as_str() != CLIENT_ID_VAR && k.as_str() != CLIENT_SECRET_VAR)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !rest.is_empty() {
            new["env"] = Value::Object(rest);
        }
    }
    new
}

fn get_path<'a>(doc: &'a Value, location: &[String]) -> Option<&'a Value> {
    location.iter().try_fold(doc, |v, k| v.get(k))
}

fn get_path_mut<'a>(doc: &'a mut Value, location: &[String]) -> Option<&'a mut Value> {
    location.iter().try_fold(doc, |v, k| v.get_mut(k))
}

/// Point the client at coogle: replace every Google Workspace entry in place (same name, same
/// position), else replace a top-level `coogle` entry, else add one at the end of the top-level
/// `mcpServers`. A document that already has coogle's entry and no Google entry is left alone.
/// Returns the new document and the changes (empty: nothing to do).
pub fn patch(doc: &Value, kind: ClientKind, command: &Path) -> (Value, Vec<Change>) {
    let base = kind.entry(command);
    let mut new = doc.clone();
    let mut changes = Vec::new();
    let google: Vec<(Vec<String>, Value)> = google_entries(doc, kind)
        .into_iter()
        .map(|(l, e)| (l, e.clone()))
        .collect();
    for (location, old) in &google {
        let written = replacement(old, &base);
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
    if !google.is_empty() {
        return (new, changes);
    }
    if entries(doc, kind)
        .iter()
        .any(|(_, e)| is_coogle_entry(e, command))
    {
        return (new, changes);
    }
    let location = vec!["mcpServers".to_owned(), ENTRY_NAME.to_owned()];
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
    let original = servers.get(ENTRY_NAME).cloned();
    let written = match &original {
        Some(old) => replacement(old, &base),
        None => base,
    };
    servers.insert(ENTRY_NAME.into(), written.clone());
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
        if get_path(&new, &change.location) != Some(&change.written) {
            report.push(Reverted::Skipped(what));
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
}

/// Patch a client config file in place: backup, atomic write, re-read before the rename (the
/// patch is recomputed on the new content when the client wrote meanwhile). A missing file is
/// created (mode 0600); an unparsable one is an error and stays untouched.
pub fn patch_file_with_hook(
    path: &Path,
    kind: ClientKind,
    command: &Path,
    before_rename: &mut dyn FnMut(&Path),
) -> Result<Patched, FsError> {
    let mut changes = Vec::new();
    let written = fsutil::update_json_with_hook(
        path,
        Mode::KeepOr(0o600),
        |doc| {
            let empty = json!({});
            let (new, c) = patch(doc.unwrap_or(&empty), kind, command);
            changes = c;
            Ok((!changes.is_empty()).then_some(new))
        },
        before_rename,
    )?;
    if written == Written::Unchanged {
        changes.clear();
    }
    Ok(Patched {
        path: fsutil::resolve(path),
        written,
        changes,
    })
}

pub fn patch_file(path: &Path, kind: ClientKind, command: &Path) -> Result<Patched, FsError> {
    patch_file_with_hook(path, kind, command, &mut |_| {})
}

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
    let written = fsutil::update(path, Mode::KeepOr(0o600), |old| {
        let Some(old) = old else {
            report = changes
                .iter()
                .map(|c| Reverted::Skipped(describe(&c.location)))
                .collect();
            return Ok(None);
        };
        let doc = fsutil::parse_json(old, &target)?;
        let (new, r) = revert(&doc, changes);
        report = r;
        if new == doc {
            return Ok(None);
        }
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

    #[test]
    fn patch_replaces_every_google_entry_in_place() {
        let doc = fixture();
        let cmd = Path::new("/opt/homebrew/opt/coogle/bin/coogle");
        let (new, changes) = patch(&doc, ClientKind::ClaudeCode, cmd);
        assert_eq!(changes.len(), 2);
        assert_eq!(
            new["mcpServers"]["workspace"],
            json!({"type": "stdio", "command": cmd, "args": ["mcp"]})
        );
        let keys: Vec<_> = new["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["filesystem", "workspace"]);
        assert!(new["projects"]["/home/ada/src/coogle"]["mcpServers"]["coogle"]["env"].is_null());
        let (again, none) = patch(&new, ClientKind::ClaudeCode, cmd);
        assert!(none.is_empty());
        assert_eq!(again, new);
        let (back, _) = revert(&new, &changes);
        assert_eq!(back, doc);
    }

    #[test]
    fn adds_an_entry_when_there_is_none() {
        let cmd = Path::new("/usr/bin/coogle");
        let (new, changes) = patch(&json!({"a": 1}), ClientKind::Cursor, cmd);
        assert_eq!(
            new,
            json!({"a": 1, "mcpServers": {"coogle": {"command": "/usr/bin/coogle", "args": ["mcp"]}}})
        );
        assert!(changes[0].created_parent);
        let (back, _) = revert(&new, &changes);
        assert_eq!(back, json!({"a": 1}));
    }
}
