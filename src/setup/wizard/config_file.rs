//! Step 3: config.json. The OAuth client goes where the file's shape wants it (the flat
//! shape's top level, or the native shape's default server), the search key under `search`,
//! and, for a config that names no upstream yet, the Google Workspace entry being replaced
//! becomes the upstream, so pointing the client at coogle changes nothing about what runs.
//! `path` records the user's PATH, so a daemon started with a minimal environment (by
//! launchd, or by Claude Desktop's `coogle mcp`) still finds `uvx` and `npx`.
//!
//! For a config that already names one, the entry's other env (`USER_GOOGLE_EMAIL`, ...)
//! moves into that upstream's `env`, since the client entry loses it.
//!
//! Everything else the user had is kept; the file is written 0600 (it may hold a secret),
//! after a backup, and only when the result loads as a config.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::super::client_config::{self, ClientKind};
use super::super::search_path;
use super::Wizard;
use super::credentials::CredChoice;
use crate::config::Config;
use crate::config::claude_json::{CLIENT_ID_VAR, CLIENT_SECRET_VAR};
use crate::error::InstallError;
use crate::fsutil::{self, FsError, Written};
use crate::paths::Platform;

impl Wizard<'_> {
    pub(super) fn write_config(
        &mut self,
        creds: &CredChoice,
        search_key: Option<&str>,
    ) -> Result<(), InstallError> {
        let (ui, cfg_path) = (&self.ui, &self.cfg_path);
        let upstream = upstream_from_client(&self.claude_json);
        if let Some((from, block)) = &upstream {
            if config_names_upstream(cfg_path) {
                if block.get("env").is_some() {
                    ui.ok(&format!(
                        "env of {from} moves into the configured upstream: {}",
                        env_names(block)
                    ));
                }
            } else {
                ui.ok(&format!(
                    "upstream: {} (as {from} ran it; its other env kept: {})",
                    command_line(block),
                    env_names(block)
                ));
            }
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

/// True when config.json already names an upstream (`mcp` or `servers`).
fn config_names_upstream(cfg_path: &Path) -> bool {
    std::fs::read(cfg_path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|doc| names_upstream(&doc))
}

fn names_upstream(doc: &Value) -> bool {
    doc.get("mcp").is_some() || doc.get("servers").is_some()
}

/// The Google Workspace entry being replaced in ~/.claude.json says how this user runs it:
/// its command, args and env other than the OAuth client (`USER_GOOGLE_EMAIL`, a port, a tool
/// tier...). For a config.json that names no upstream yet (no `mcp`, no `servers`) that becomes
/// the upstream; for one that does, its env moves into that upstream's `env`. Either way
/// pointing the client at coogle changes nothing about what runs.
fn upstream_from_client(claude_json: &Path) -> Option<(String, Value)> {
    let doc: Value = serde_json::from_slice(&std::fs::read(claude_json).ok()?).ok()?;
    let (location, entry) = client_config::google_entries(&doc, ClientKind::ClaudeCode)
        .into_iter()
        .find(|(_, e)| {
            !client_config::looks_like_coogle(e) && e.get("command").is_some_and(Value::is_string)
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
    Some((client_config::describe(&location), Value::Object(block)))
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
    super::super::config_write::update_config(path, |doc| {
        let mut new = doc.cloned().unwrap_or_else(|| json!({}));
        if let Some(up) = &upstream {
            if !names_upstream(&new) {
                if let Some(root) = new.as_object_mut() {
                    root.insert("mcp".into(), up.clone());
                }
            } else if let Some(env) = up.get("env").and_then(Value::as_object) {
                move_env(&mut new, env);
            }
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
        new
    })
}

/// The native shape gets the block on its default server; the flat shape at the top level.
fn set_credentials(doc: &mut Value, block: Value) {
    if let Some(server) = default_server(doc) {
        server.insert("credentials".into(), block);
        return;
    }
    if let Some(root) = doc.as_object_mut() {
        root.insert("credentials".into(), block);
    }
}

/// The native shape's default server: `google`, else the only one.
fn default_server(doc: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    let servers = doc.get_mut("servers")?.as_object_mut()?;
    let name = if servers.contains_key("google") {
        "google".to_owned()
    } else if servers.len() == 1 {
        servers.keys().next()?.clone()
    } else {
        return None;
    };
    servers.get_mut(&name)?.as_object_mut()
}

/// Put the replaced entry's other env into the upstream the config already names (the native
/// shape's default server, or the flat shape's `mcp`), without overriding what the config
/// sets itself: the user's config.json wins over what the client entry had.
fn move_env(doc: &mut Value, env: &serde_json::Map<String, Value>) {
    let upstream = if doc.get("servers").is_some() {
        default_server(doc)
    } else {
        doc.get_mut("mcp").and_then(Value::as_object_mut)
    };
    let Some(upstream) = upstream else {
        return;
    };
    let target = upstream
        .entry("env")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(target) = target.as_object_mut() else {
        return;
    };
    for (k, v) in env {
        target.entry(k.clone()).or_insert_with(|| v.clone());
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

    /// Regression: with a config.json that already named the upstream, the replaced entry's
    /// `USER_GOOGLE_EMAIL` was dropped (the client entry loses its env).
    #[test]
    fn the_replaced_entrys_env_moves_into_the_configured_upstream() {
        let env = json!({"USER_GOOGLE_EMAIL": "grace@example.com", "PORT": "9000"});
        let env = env.as_object().unwrap();
        let mut native = json!({"servers": {"google": {"command": "x", "env": {"PORT": "8000"}}}});
        move_env(&mut native, env);
        assert_eq!(
            native["servers"]["google"]["env"],
            json!({"PORT": "8000", "USER_GOOGLE_EMAIL": "grace@example.com"}),
            "the config's own value wins"
        );
        let mut flat = json!({"mcp": {"command": "uvx"}});
        move_env(&mut flat, env);
        assert_eq!(flat["mcp"]["env"], json!(env));
        // Several servers, none named google: no upstream to move it into.
        let mut many = json!({"servers": {"a": {"command": "a"}, "b": {"command": "b"}}});
        let before = many.clone();
        move_env(&mut many, env);
        assert_eq!(many, before);
    }
}
