//! What a client entry starts, as coogle compares it: command, args, env, env file and working
//! directory. Two entries with the same [`Launch`] would start the same process, so they share
//! one upstream; anything else about them (the entry's name, the client) does not matter. A
//! project's entry runs in its project's directory, as its client runs it, so that directory is
//! part of its launch: the same text in two projects is two programs. Pure functions on parsed
//! JSON, no I/O.

use serde_json::{Map, Value, json};

use crate::config::Sharing;

/// How an entry starts its server. `env` compares as a map (order does not matter).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub command: String,
    pub args: Vec<String>,
    pub env: Map<String, Value>,
    pub cwd: Option<String>,
    /// Cursor's `envFile`: its variables belong to the upstream, like `env`.
    pub env_file: Option<String>,
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
        if crate::setup::client_config::looks_like_coogle(entry) {
            return Err(NotShared::Coogle);
        }
        let launch = Launch::of_block(entry).map_err(NotShared::Unsupported)?;
        // Clients expand `${VAR}` in entries; the daemon does not, so such an entry would
        // start differently behind it.
        let expands = std::iter::once(command)
            .chain(launch.args.iter().map(String::as_str))
            .chain(launch.env.values().filter_map(Value::as_str))
            .chain(launch.cwd.as_deref())
            .chain(launch.env_file.as_deref())
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
        let string = |key: &str| match block.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("has a {key} that is not a string")),
        };
        Ok(Launch {
            command: command.to_owned(),
            args,
            env,
            cwd: string("cwd")?,
            env_file: string("envFile")?,
        })
    }

    /// An entry of a project runs in that project's directory (Claude Code runs it there, with
    /// a relative `cwd` taken from there): the launch records it.
    pub fn in_project(mut self, project: &str) -> Launch {
        self.cwd = Some(match self.cwd.take() {
            Some(c) if !c.starts_with('/') && !c.starts_with('~') => {
                format!("{}/{c}", project.trim_end_matches('/'))
            }
            Some(c) => c,
            None => project.to_owned(),
        });
        self
    }

    /// Whether what it starts depends on the directory it starts in while it names none: a
    /// relative program, script or env file (`python server.py`, `./run.sh`, `node
    /// dist/index.js`). A client runs such an entry in each session's directory, so behind the
    /// daemon it needs one child per project, each in its project.
    pub fn depends_on_directory(&self) -> bool {
        if self.cwd.is_some() {
            return false;
        }
        let command_relative = self.command.contains('/') && !absolute_like(&self.command);
        command_relative
            || self.args.iter().any(|a| relative_path_like(a))
            || self.env_file.as_deref().is_some_and(|f| !absolute_like(f))
    }

    /// The sharing mode coogle picks for it: one child per project when it depends on the
    /// directory it runs in, else [`Sharing::guess`].
    pub fn sharing(&self) -> Sharing {
        if self.depends_on_directory() {
            return Sharing::PerProject;
        }
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
        if let Some(file) = &self.env_file {
            block["envFile"] = json!(file);
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

fn absolute_like(s: &str) -> bool {
    s.starts_with('/') || s.starts_with('~')
}

/// An argument that names a file relative to the working directory: `.`, `./x`, `../x`, or a
/// relative path to a script (`server.py`, `dist/index.js`); also as an option's value
/// (`--root=./data`). Package names (`@scope/pkg`, `pkg==1.0`) and URLs are not.
fn relative_path_like(arg: &str) -> bool {
    const SCRIPTS: [&str; 12] = [
        ".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".php", ".jar", ".pl", ".lua", ".json",
    ];
    let value = match arg.split_once('=') {
        Some((k, v)) if k.starts_with('-') => v,
        _ => arg,
    };
    if value.is_empty() || value.starts_with('-') || value.contains("://") || absolute_like(value) {
        return false;
    }
    value == "."
        || value == ".."
        || value.starts_with("./")
        || value.starts_with("../")
        || (!value.starts_with('@') && SCRIPTS.iter().any(|e| value.ends_with(e)))
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
    fn a_project_entry_runs_in_its_project() {
        let e = json!({"command": "python", "args": ["server.py"]});
        let user = Launch::of_entry(&e).unwrap();
        assert!(user.depends_on_directory());
        assert_eq!(
            user.sharing(),
            Sharing::PerProject,
            "each session's directory"
        );
        let a = user.clone().in_project("/a");
        let b = user.clone().in_project("/b");
        assert_ne!(a, b, "the same text in two projects is two programs");
        assert_eq!(a.cwd.as_deref(), Some("/a"));
        assert_eq!(
            a.sharing(),
            Sharing::Shared,
            "it runs in /a, for /a's sessions"
        );
        assert_eq!(a.server_block()["cwd"], "/a");
        let rel = Launch::of_entry(&json!({"command": "x", "cwd": "sub"})).unwrap();
        assert_eq!(rel.in_project("/a/").cwd.as_deref(), Some("/a/sub"));
    }

    #[test]
    fn what_depends_on_the_directory() {
        let depends = |command: &str, args: &[&str]| {
            Launch::of_entry(&json!({"command": command, "args": args}))
                .unwrap()
                .depends_on_directory()
        };
        assert!(depends("./run.sh", &[]));
        assert!(depends("node", &["dist/index.js"]));
        assert!(depends("uv", &["run", "--directory", ".", "srv"]));
        assert!(depends("srv", &["--root=./data"]));
        assert!(!depends(
            "npx",
            &["-y", "@modelcontextprotocol/server-memory"]
        ));
        assert!(!depends(
            "uvx",
            &["mcp-server-time==2026.1", "--local-timezone=UTC"]
        ));
        assert!(!depends("node", &["/opt/srv/index.js"]));
        assert!(!depends("/usr/bin/srv", &["https://example.com/a.json"]));
        let env_file = json!({"command": "srv", "envFile": ".env"});
        assert!(Launch::of_entry(&env_file).unwrap().depends_on_directory());
    }

    #[test]
    fn names_are_made_valid() {
        assert_eq!(server_name("memory"), "memory");
        assert_eq!(server_name("my server.v2"), "my-server-v2");
        assert_eq!(server_name("..."), "server");
    }
}
