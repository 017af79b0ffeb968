//! What a client entry starts, as coogle compares it: command, args, env and working
//! directory. Two entries with the same [`Launch`] would start the same process, so they share
//! one upstream; anything else about them (the entry's name, the client, the project) does not
//! matter. Pure functions on parsed JSON, no I/O.

use serde_json::{Map, Value, json};

use crate::config::Sharing;

/// How an entry starts its server. `env` compares as a map (order does not matter).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub command: String,
    pub args: Vec<String>,
    pub env: Map<String, Value>,
    pub cwd: Option<String>,
}

/// Why a stdio entry is left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotShared {
    /// A url/http/sse entry: nothing to start.
    NotStdio,
    /// Already `coogle mcp`.
    Coogle,
    /// Something coogle cannot run the same way; the text says what.
    Unsupported(String),
}

impl Launch {
    /// The launch of a client config entry, or why it is not shared.
    pub fn of_entry(entry: &Value) -> Result<Launch, NotShared> {
        let transport = entry.get("type").and_then(Value::as_str).unwrap_or("stdio");
        let Some(command) = entry.get("command").and_then(Value::as_str) else {
            return Err(NotShared::NotStdio);
        };
        if transport != "stdio" || entry.get("url").is_some() {
            return Err(NotShared::NotStdio);
        }
        if crate::setup::claude_config::looks_like_coogle(entry) {
            return Err(NotShared::Coogle);
        }
        let launch = Launch::of_block(entry).map_err(NotShared::Unsupported)?;
        // Clients expand `${VAR}` in entries; the daemon does not, so such an entry would
        // start differently behind it.
        let expands = std::iter::once(command)
            .chain(launch.args.iter().map(String::as_str))
            .chain(launch.env.values().filter_map(Value::as_str))
            .chain(launch.cwd.as_deref())
            .any(|s| s.contains("${"));
        if expands {
            return Err(NotShared::Unsupported(
                "uses ${VAR} expansion, which the daemon does not do".into(),
            ));
        }
        Ok(launch)
    }

    /// The launch a `command`/`args`/`env`/`cwd` object describes (a client entry or a
    /// `servers.<name>` block of config.json).
    pub fn of_block(block: &Value) -> Result<Launch, String> {
        let command = block
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .ok_or("has no command")?;
        let args = match block.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("has args that are not strings")?,
            Some(_) => return Err("has args that are not a list".into()),
        };
        let env = match block.get("env") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(e)) if e.values().all(Value::is_string) => e.clone(),
            Some(_) => return Err("has env values that are not strings".into()),
        };
        let cwd = match block.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("has a cwd that is not a string".into()),
        };
        Ok(Launch {
            command: command.to_owned(),
            args,
            env,
            cwd,
        })
    }

    /// The sharing mode coogle picks for it ([`Sharing::guess`]).
    pub fn sharing(&self) -> Sharing {
        Sharing::guess(&self.command, &self.args)
    }

    /// The `servers.<name>` block for config.json.
    pub fn server_block(&self) -> Value {
        let mut block = json!({"command": self.command, "args": self.args});
        if !self.env.is_empty() {
            block["env"] = Value::Object(self.env.clone());
        }
        if let Some(cwd) = &self.cwd {
            block["cwd"] = json!(cwd);
        }
        block["sharing"] = json!(self.sharing().as_str());
        block
    }

    /// `npx -y @modelcontextprotocol/server-memory`, for people (no env: it may hold secrets).
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A server name config.json accepts (letters, digits, `-`, `_`), made from an entry's name.
pub fn server_name(entry_name: &str) -> String {
    let name: String = entry_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "server".to_owned()
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_order_does_not_matter_but_values_do() {
        let a = json!({"command": "npx", "args": ["m"], "env": {"A": "1", "B": "2"}});
        let b =
            json!({"type": "stdio", "command": "npx", "args": ["m"], "env": {"B": "2", "A": "1"}});
        let c = json!({"command": "npx", "args": ["m"], "env": {"A": "1", "B": "3"}});
        let la = Launch::of_entry(&a).unwrap();
        assert_eq!(la, Launch::of_entry(&b).unwrap());
        assert_ne!(la, Launch::of_entry(&c).unwrap());
    }

    #[test]
    fn what_is_left_alone() {
        let http = json!({"type": "http", "url": "https://x"});
        assert_eq!(Launch::of_entry(&http), Err(NotShared::NotStdio));
        let sse = json!({"type": "sse", "command": "x"});
        assert_eq!(Launch::of_entry(&sse), Err(NotShared::NotStdio));
        let ours = json!({"command": "/usr/bin/coogle", "args": ["mcp", "--server", "m"]});
        assert_eq!(Launch::of_entry(&ours), Err(NotShared::Coogle));
        let expands = json!({"command": "x", "env": {"K": "${KEY}"}});
        assert!(matches!(
            Launch::of_entry(&expands),
            Err(NotShared::Unsupported(_))
        ));
        let bad = json!({"command": "x", "args": [1]});
        assert!(matches!(
            Launch::of_entry(&bad),
            Err(NotShared::Unsupported(_))
        ));
    }

    #[test]
    fn names_are_made_valid() {
        assert_eq!(server_name("memory"), "memory");
        assert_eq!(server_name("my server.v2"), "my-server-v2");
        assert_eq!(server_name("..."), "server");
    }
}
