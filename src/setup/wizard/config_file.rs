//! Step 3: config.json. The OAuth client goes where the file's shape wants it (the flat
//! shape's top level, or the native shape's default server), the search key under `search`,
//! and, for a config that names no upstream yet, the Google Workspace entry being replaced
//! becomes the upstream, so pointing the client at coogle changes nothing about what runs.
//! `path` records the user's PATH, so a daemon started with a minimal environment (by
//! launchd, or by Claude Desktop's `coogle mcp`) still finds `uvx` and `npx`.
//!
//! Everything else the user had is kept; the file is written 0600 (it may hold a secret),
//! after a backup, and only when the result loads as a config.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::super::claude_config::{self, ClientKind};
use super::super::search_path;
use super::Wizard;
use super::credentials::CredChoice;
use crate::config::Config;
use crate::config::claude_json::{CLIENT_ID_VAR, CLIENT_SECRET_VAR};
use crate::error::InstallError;
use crate::fsutil::{self, FsError, Mode, Written};
use crate::paths::Platform;

impl Wizard<'_> {
    pub(super) fn write_config(
        &mut self,
        creds: &CredChoice,
        search_key: Option<&str>,
    ) -> Result<(), InstallError> {
        let (ui, cfg_path) = (&self.ui, &self.cfg_path);
        let upstream = upstream_from_client(cfg_path, &self.claude_json);
        if let Some((from, block)) = &upstream {
            ui.ok(&format!(
                "upstream: {} (as {from} ran it; its other env kept: {})",
                command_line(block),
                env_names(block)
            ));
        }
        let captured = search_path::capture(&Platform::current());
        let written = update_config_file(
            cfg_path,
            creds,
            upstream.map(|(_, b)| b),
            search_key,
            captured,
        )
        .map_err(InstallError::WriteConfig);
        let written = self.fatal(written)?;
        if let Ok(config) = Config::load(Some(cfg_path)) {
            ui.ok(&format!(
                "recorded the PATH the daemon searches for upstream commands, whoever starts it ({} directories, config `path`)",
                config.search_path.len()
            ));
        }
        match written {
            Written::Unchanged => match fsutil::tighten(cfg_path, 0o600) {
                Ok(true) => ui.ok(&format!(
                    "{} is up to date; restricted it to mode 0600",
                    cfg_path.display()
                )),
                Ok(false) => ui.ok(&format!("{} is up to date", cfg_path.display())),
                Err(e) => ui.warn(&e.to_string()),
            },
            w => {
                ui.ok(&format!("wrote {} (mode 0600)", cfg_path.display()));
                let change = match &w {
                    Written::Replaced { backup } => {
                        ui.info(&format!("backup: {}", backup.display()));
                        format!(
                            "config {} (backup {})",
                            cfg_path.display(),
                            backup.display()
                        )
                    }
                    _ => format!("config {}", cfg_path.display()),
                };
                self.summary.push(change);
            }
        }
        Ok(())
    }
}

/// When config.json names no upstream yet (no `mcp`, no `servers`), the Google Workspace
/// entry being replaced in ~/.claude.json says how this user runs it: its command, args and
/// env other than the OAuth client (`USER_GOOGLE_EMAIL`, a port, a tool tier...) become the
/// upstream, so pointing the client at coogle changes nothing about what runs.
fn upstream_from_client(cfg_path: &Path, claude_json: &Path) -> Option<(String, Value)> {
    if let Ok(bytes) = std::fs::read(cfg_path) {
        let doc: Value = serde_json::from_slice(&bytes).ok()?;
        if doc.get("mcp").is_some() || doc.get("servers").is_some() {
            return None;
        }
    }
    let doc: Value = serde_json::from_slice(&std::fs::read(claude_json).ok()?).ok()?;
    let (location, entry) = claude_config::google_entries(&doc, ClientKind::ClaudeCode)
        .into_iter()
        .find(|(_, e)| {
            !claude_config::looks_like_coogle(e) && e.get("command").is_some_and(Value::is_string)
        })?;
    let mut block = serde_json::Map::new();
    block.insert("command".into(), entry["command"].clone());
    let args: Vec<Value> = entry
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.is_string())
        .cloned()
        .collect();
    block.insert("args".into(), Value::Array(args));
    let env: serde_json::Map<String, Value> = entry
        .get("env")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, v)| {
            v.is_string() && k.as_str() != CLIENT_ID_VAR && k.as_str() != CLIENT_SECRET_VAR
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !env.is_empty() {
        block.insert("env".into(), Value::Object(env));
    }
    Some((claude_config::describe(&location), Value::Object(block)))
}

fn command_line(block: &Value) -> String {
    std::iter::once(&block["command"])
        .chain(block["args"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

fn env_names(block: &Value) -> String {
    match block.get("env").and_then(Value::as_object) {
        Some(env) if !env.is_empty() => env.keys().cloned().collect::<Vec<_>>().join(", "),
        _ => "none".into(),
    }
}

/// Put the credentials (and, for a new config, the upstream taken from the client entry) into
/// config.json, keeping everything else the user had.
fn update_config_file(
    path: &Path,
    creds: &CredChoice,
    upstream: Option<Value>,
    search_key: Option<&str>,
    captured: Vec<PathBuf>,
) -> Result<Written, FsError> {
    let block = match creds {
        CredChoice::Keep => None,
        CredChoice::Manual(c) => Some(json!({
            "source": "manual",
            "clientId": c.client_id,
            "clientSecret": c.client_secret,
        })),
        CredChoice::Env => Some(json!({"source": "env"})),
        CredChoice::None => Some(json!({"source": "none"})),
    };
    let target = fsutil::resolve(path);
    fsutil::update_json(path, Mode::Exactly(0o600), |doc| {
        let mut new = doc.cloned().unwrap_or_else(|| json!({}));
        if let (Some(up), Some(root)) = (&upstream, new.as_object_mut())
            && !root.contains_key("mcp")
            && !root.contains_key("servers")
        {
            root.insert("mcp".into(), up.clone());
        }
        if let (Some(key), Some(root)) = (search_key, new.as_object_mut()) {
            let search = root.entry("search").or_insert_with(|| json!({}));
            if let Some(search) = search.as_object_mut() {
                search.insert("apiKey".into(), json!(key));
            }
        }
        if let Some(block) = &block {
            set_credentials(&mut new, block.clone());
        }
        if let Some(root) = new.as_object_mut() {
            let previous: Vec<PathBuf> = root
                .get("path")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(PathBuf::from)
                .collect();
            let dirs = search_path::merge(captured.clone(), &previous);
            let dirs: Vec<Value> = dirs.iter().map(|d| json!(d.to_string_lossy())).collect();
            root.insert("path".into(), Value::Array(dirs));
        }
        if doc.is_some() && doc == Some(&new) {
            return Ok(None);
        }
        Config::from_value(new.clone(), Some(target.clone())).map_err(|e| FsError::Refused {
            path: target.clone(),
            detail: format!("the new config would not load: {e}"),
        })?;
        Ok(Some(new))
    })
}

/// The native shape gets the block on its default server; the flat shape at the top level.
fn set_credentials(doc: &mut Value, block: Value) {
    if let Some(servers) = doc.get_mut("servers").and_then(Value::as_object_mut) {
        let name = if servers.contains_key("google") {
            Some("google".to_owned())
        } else if servers.len() == 1 {
            servers.keys().next().cloned()
        } else {
            None
        };
        if let Some(server) = name.and_then(|n| servers.get_mut(&n))
            && let Some(server) = server.as_object_mut()
        {
            server.insert("credentials".into(), block);
            return;
        }
    }
    if let Some(root) = doc.as_object_mut() {
        root.insert("credentials".into(), block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_where_the_shape_wants_them() {
        let mut flat = json!({"mcp": {"command": "uvx"}});
        set_credentials(&mut flat, json!({"source": "none"}));
        assert_eq!(flat["credentials"]["source"], "none");
        let mut native = json!({"servers": {"google": {"command": "x"}}, "logLevel": "info"});
        set_credentials(&mut native, json!({"source": "env"}));
        assert_eq!(native["servers"]["google"]["credentials"]["source"], "env");
        let keys: Vec<_> = native.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["servers", "logLevel"]);
    }
}
