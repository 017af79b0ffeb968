//! Reading the merged config into [`Config`]: [`Reader`] takes typed fields out of JSON and
//! every error it makes names the file and the full key (`servers.google.maxConcurrent must be
//! at least 1`). Validation is all here, so a config that loads is one the daemon can run.
//!
//! No error or warning made here may contain a value: only file names and keys.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use super::keys::{
    DEFAULT_CLAUDE_JSON, DEFAULT_LOG_LEVEL, DEFAULT_MCP_SERVER_NAME, DEFAULT_SERVER,
    DEFAULT_SHUTDOWN_GRACE_MS, SERVER_KEYS, SIGN_IN_KEYS, TOP_LEVEL_KEYS, UnknownKey, deep_merge,
    defaults, unknown_keys,
};
use super::{
    Config, ConfigError, CredentialsConfig, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_IDLE_STOP,
    DEFAULT_MAX_LINE_BYTES, Host, ServerConfig, Sharing, SignInConfig, search,
};

/// How errors name the config when there was no file.
pub(super) const DEFAULTS_LABEL: &str = "<defaults>";

/// Reads typed fields out of the merged config, producing errors that name the file and key.
pub(super) struct Reader<'a> {
    pub(super) label: String,
    pub(super) home: Option<&'a Path>,
    /// The keys nobody reads, found on the way.
    pub(super) unknown: RefCell<Vec<UnknownKey>>,
}

impl Reader<'_> {
    pub(super) fn invalid(&self, detail: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.label.clone(),
            detail: detail.into(),
        }
    }

    pub(super) fn object<'v>(
        &self,
        value: &'v Value,
        key: &str,
    ) -> Result<&'v Map<String, Value>, ConfigError> {
        value
            .as_object()
            .ok_or_else(|| self.invalid(format!("{key} must be an object")))
    }

    /// A string field; absent and `null` are `None`.
    pub(super) fn string(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<String>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.invalid(format!("{at}{key} must be a string"))),
        }
    }

    pub(super) fn non_empty_string(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<String>, ConfigError> {
        match self.string(obj, key, at)? {
            Some(s) if s.is_empty() => Err(self.invalid(format!("{at}{key} must not be empty"))),
            other => Ok(other),
        }
    }

    pub(super) fn path(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<PathBuf>, ConfigError> {
        Ok(self
            .non_empty_string(obj, key, at)?
            .map(|s| expand_tilde_with(&s, self.home)))
    }

    /// A path that must be absolute once `~` is expanded: it is used by the daemon, whose own
    /// working directory says nothing about the user's intent.
    pub(super) fn absolute_path(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<PathBuf>, ConfigError> {
        match self.path(obj, key, at)? {
            Some(p) if !p.is_absolute() => Err(self.invalid(format!(
                "{at}{key} must be an absolute path (or start with ~), not {:?}",
                p.display().to_string()
            ))),
            other => Ok(other),
        }
    }

    /// A non-negative integer field; absent and `null` are `None`.
    pub(super) fn integer(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<u64>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.invalid(format!("{at}{key} must be a non-negative integer"))),
        }
    }

    pub(super) fn positive(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<u64>, ConfigError> {
        match self.integer(obj, key, at)? {
            Some(0) => Err(self.invalid(format!("{at}{key} must be at least 1"))),
            other => Ok(other),
        }
    }

    /// Note the keys of `obj` nobody reads: kept with the config for doctor, `reload` and the
    /// daemon's log to name, not logged here, where every command would print them.
    pub(super) fn note_unknown(&self, obj: &Map<String, Value>, known: &[&'static str], at: &str) {
        self.unknown
            .borrow_mut()
            .extend(unknown_keys(obj, known, at));
    }
}

/// `"~"` and `"~/x"` are taken relative to the home directory; anything else is unchanged
/// (`~user/x` is not supported and stays as written).
pub(super) fn expand_tilde_with(s: &str, home: Option<&Path>) -> PathBuf {
    match home {
        Some(home) if s == "~" => home.to_path_buf(),
        Some(home) => match s.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(s),
        },
        None => PathBuf::from(s),
    }
}

/// Instances one server may have at once besides its shared one (see `daemon::registry`).
const DEFAULT_MAX_INSTANCES: usize = 64;

/// The top-level settings, read from the merged document.
struct TopLevel {
    socket_path: Option<PathBuf>,
    search_path: Vec<PathBuf>,
    log_level: String,
    max_line_bytes: usize,
    shutdown_grace_ms: u64,
    call_timeout_ms: u64,
    coogle_tool: bool,
    max_connections: Option<usize>,
    max_instances: usize,
    idle_stop: Duration,
}

impl TopLevel {
    fn read(r: &Reader<'_>, merged: &Map<String, Value>) -> Result<TopLevel, ConfigError> {
        let socket_path = r.path(merged, "socketPath", "")?;
        let search_path = search_path(r, merged)?;
        let log_level = r
            .non_empty_string(merged, "logLevel", "")?
            .unwrap_or_else(|| DEFAULT_LOG_LEVEL.to_owned());
        let max_line_bytes = match r.positive(merged, "maxLineBytes", "")? {
            Some(n) => usize::try_from(n).map_err(|_| r.invalid("maxLineBytes is too large"))?,
            None => DEFAULT_MAX_LINE_BYTES,
        };
        let shutdown_grace_ms = r
            .integer(merged, "shutdownGraceMs", "")?
            .unwrap_or(DEFAULT_SHUTDOWN_GRACE_MS);
        let call_timeout_ms = r
            .positive(merged, "callTimeoutMs", "")?
            .unwrap_or(DEFAULT_CALL_TIMEOUT_MS);
        let idle_stop = r
            .integer(merged, "idleStopMs", "")?
            .map_or(DEFAULT_IDLE_STOP, Duration::from_millis);
        let max_connections = match r.positive(merged, "maxConnections", "")? {
            Some(n) => {
                Some(usize::try_from(n).map_err(|_| r.invalid("maxConnections is too large"))?)
            }
            None => None,
        };
        let max_instances = match r.positive(merged, "maxInstances", "")? {
            Some(n) => usize::try_from(n).map_err(|_| r.invalid("maxInstances is too large"))?,
            None => DEFAULT_MAX_INSTANCES,
        };
        let coogle_tool = match merged.get("coogleTool") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(r.invalid("coogleTool must be true or false")),
        };
        Ok(TopLevel {
            socket_path,
            search_path,
            log_level,
            max_line_bytes,
            shutdown_grace_ms,
            call_timeout_ms,
            coogle_tool,
            max_connections,
            max_instances,
            idle_stop,
        })
    }
}

/// `path`: the directories the daemon searches for upstream commands before its own PATH
/// (`coogle setup` records the user's; see [`crate::exec_path`]). Each must be absolute after
/// `~` expansion, so the working directory can never choose a program.
fn search_path(r: &Reader<'_>, merged: &Map<String, Value>) -> Result<Vec<PathBuf>, ConfigError> {
    let items = match merged.get("path") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(r.invalid("path must be an array of directories")),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let dir = v
                .as_str()
                .filter(|s| !s.is_empty())
                .map(|s| expand_tilde_with(s, r.home))
                .ok_or_else(|| r.invalid(format!("path[{i}] must be a non-empty string")))?;
            if dir.is_absolute() {
                Ok(dir)
            } else {
                Err(r.invalid(format!("path[{i}] must be an absolute directory")))
            }
        })
        .collect()
}

/// Merge `user` over the defaults and read it; `file` names it in errors and in the search
/// upstream's `--config`.
pub(super) fn from_value_with(
    user: Value,
    file: Option<PathBuf>,
    host: &Host<'_>,
) -> Result<Config, ConfigError> {
    let r = Reader {
        label: file
            .as_ref()
            .map_or_else(|| DEFAULTS_LABEL.to_owned(), |p| p.display().to_string()),
        home: host.home,
        unknown: RefCell::new(Vec::new()),
    };
    let Value::Object(user) = user else {
        return Err(r.invalid("the top level must be a JSON object"));
    };
    r.note_unknown(&user, TOP_LEVEL_KEYS, "");
    let native = user.get("servers").is_some_and(|v| !v.is_null());
    if native && user.contains_key("mcp") {
        tracing::warn!(config = %r.label, "both `servers` and `mcp` are set; `mcp` is ignored");
    }

    let mut merged = defaults();
    deep_merge(&mut merged, Value::Object(user));
    let merged = r.object(&merged, "the top level")?;
    let top = TopLevel::read(&r, merged)?;
    let defaults = ServerDefaults {
        call_timeout_ms: top.call_timeout_ms,
        idle_stop: top.idle_stop,
    };
    let mut servers = if native {
        native_servers(&r, merged, &defaults)?
    } else {
        flat_server(&r, merged, &defaults)?
    };
    let search = search::search_from(&r, merged.get("search"))?;
    search::add_search_upstream(
        &mut servers,
        &search,
        file.as_deref(),
        host,
        top.call_timeout_ms,
    );
    for server in servers.values_mut() {
        server.search_path = top.search_path.clone();
    }
    Ok(Config {
        file,
        socket_path: top.socket_path,
        search_path: top.search_path,
        log_level: top.log_level,
        max_line_bytes: top.max_line_bytes,
        shutdown_grace_ms: top.shutdown_grace_ms,
        coogle_tool: top.coogle_tool,
        max_connections: top.max_connections,
        max_instances: top.max_instances,
        servers,
        search,
        unknown_keys: r.unknown.into_inner(),
    })
}

/// The native shape: `servers: {name: {...}}`, in file order. A `google` server without
/// `credentials` gets the flat default's (from `~/.claude.json`); any other gets none.
fn native_servers(
    r: &Reader<'_>,
    merged: &Map<String, Value>,
    server_defaults: &ServerDefaults,
) -> Result<IndexMap<String, ServerConfig>, ConfigError> {
    let entries = r.object(&merged["servers"], "servers")?;
    if entries.is_empty() {
        return Err(r.invalid("servers must name at least one server"));
    }
    let mut servers = IndexMap::new();
    for (name, value) in entries {
        if !valid_server_name(name) {
            return Err(r.invalid(format!(
                "server name {name:?} must be non-empty and use only letters, digits, '-' and '_'"
            )));
        }
        let at = format!("servers.{name}.");
        let obj = r.object(value, &format!("servers.{name}"))?;
        r.note_unknown(obj, SERVER_KEYS, &at);
        let credentials = match obj.get("credentials") {
            None | Some(Value::Null) if name == DEFAULT_SERVER => {
                credentials_from(r, &defaults()["credentials"], "credentials.")?
            }
            None | Some(Value::Null) => CredentialsConfig::None,
            Some(c) => credentials_from(r, c, &format!("{at}credentials."))?,
        };
        let server = server_from(r, name, obj, &at, credentials, server_defaults)?;
        servers.insert(name.clone(), server);
    }
    Ok(servers)
}

/// The original flat shape: `mcp` and `credentials` make one upstream named `google`.
fn flat_server(
    r: &Reader<'_>,
    merged: &Map<String, Value>,
    defaults: &ServerDefaults,
) -> Result<IndexMap<String, ServerConfig>, ConfigError> {
    let mcp = r.object(&merged["mcp"], "mcp")?;
    r.note_unknown(mcp, SERVER_KEYS, "mcp.");
    let credentials = credentials_from(r, &merged["credentials"], "credentials.")?;
    let server = server_from(r, DEFAULT_SERVER, mcp, "mcp.", credentials, defaults)?;
    Ok(IndexMap::from([(DEFAULT_SERVER.to_owned(), server)]))
}

/// A portable environment variable name: what `passEnv` may list.
fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn server_from(
    r: &Reader<'_>,
    name: &str,
    obj: &Map<String, Value>,
    at: &str,
    credentials: CredentialsConfig,
    defaults: &ServerDefaults,
) -> Result<ServerConfig, ConfigError> {
    let command = r
        .non_empty_string(obj, "command", at)?
        .ok_or_else(|| r.invalid(format!("{at}command is required")))?;
    let args = match obj.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| r.invalid(format!("{at}args must be an array of strings")))?,
        Some(_) => return Err(r.invalid(format!("{at}args must be an array of strings"))),
    };
    let mut env = IndexMap::new();
    match obj.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(vars)) => {
            for (key, value) in vars {
                if key.is_empty() || key.contains('=') || key.contains('\0') {
                    return Err(r.invalid(format!("{at}env has an invalid variable name {key:?}")));
                }
                let Some(value) = value.as_str() else {
                    return Err(r.invalid(format!("{at}env.{key} must be a string")));
                };
                env.insert(key.clone(), value.to_owned());
            }
        }
        Some(_) => return Err(r.invalid(format!("{at}env must be an object of strings"))),
    }
    let cwd = r.absolute_path(obj, "cwd", at)?;
    // Relative to the directory the child runs in, as a client reads it.
    let env_file = r.path(obj, "envFile", at)?;
    let pass_env = match obj.get("passEnv") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut names = Vec::new();
            for item in items {
                let name = item.as_str().filter(|n| valid_env_name(n)).ok_or_else(|| {
                    r.invalid(format!(
                        "{at}passEnv must be a list of variable names (letters, digits and _)"
                    ))
                })?;
                if !names.iter().any(|n: &String| n == name) {
                    names.push(name.to_owned());
                }
            }
            names
        }
        Some(_) => {
            return Err(r.invalid(format!(
                "{at}passEnv must be a list of variable names (letters, digits and _)"
            )));
        }
    };
    let max_concurrent = match r.positive(obj, "maxConcurrent", at)? {
        Some(n) => {
            usize::try_from(n).map_err(|_| r.invalid(format!("{at}maxConcurrent is too large")))?
        }
        None => 1,
    };
    let call_timeout_ms = r
        .positive(obj, "callTimeoutMs", at)?
        .unwrap_or(defaults.call_timeout_ms);
    let idle_stop = match r.integer(obj, "idleStopMs", at)? {
        Some(ms) => Duration::from_millis(ms),
        None => defaults.idle_stop,
    };
    let sharing = match r.string(obj, "sharing", at)? {
        Some(s) => Sharing::parse(&s).ok_or_else(|| {
            r.invalid(format!(
                "{at}sharing must be \"shared\", \"per-project\" or \"per-session\""
            ))
        })?,
        None => Sharing::guess(&command, &args),
    };
    let stateful = match obj.get("stateful") {
        None | Some(Value::Null) => Sharing::stateful_guess(&command, &args),
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(r.invalid(format!("{at}stateful must be true or false"))),
    };
    let sign_in = match obj.get("signIn") {
        None | Some(Value::Null) => SignInConfig::guess(name, DEFAULT_SERVER, &command, &args),
        Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(SignInConfig::workspace_mcp()),
        Some(Value::Object(o)) => {
            let at = format!("{at}signIn.");
            r.note_unknown(o, SIGN_IN_KEYS, &at);
            let url_marker = r
                .non_empty_string(o, "urlMarker", &at)?
                .ok_or_else(|| r.invalid(format!("{at}urlMarker is required")))?;
            Some(SignInConfig {
                url_marker,
                account_argument: r.non_empty_string(o, "accountArgument", &at)?,
            })
        }
        Some(_) => {
            return Err(r.invalid(format!(
                "{at}signIn must be true, false or an object with urlMarker (and accountArgument)"
            )));
        }
    };
    let client_capabilities = match obj.get("clientCapabilities") {
        None | Some(Value::Null) => json!({"roots": {}, "elicitation": {}}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(r.invalid(format!("{at}clientCapabilities must be an object"))),
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        command,
        args,
        env,
        cwd,
        env_file,
        pass_env,
        credentials,
        max_concurrent,
        call_timeout: Duration::from_millis(call_timeout_ms),
        client_capabilities,
        idle_stop,
        stateful,
        sharing,
        sign_in,
        search_path: Vec::new(),
    })
}

/// What a server's settings default to, from the top level.
pub(super) struct ServerDefaults {
    pub call_timeout_ms: u64,
    pub idle_stop: Duration,
}

fn credentials_from(
    r: &Reader<'_>,
    value: &Value,
    at: &str,
) -> Result<CredentialsConfig, ConfigError> {
    let key = at.trim_end_matches('.');
    let obj = r.object(value, key)?;
    let source = r
        .string(obj, "source", at)?
        .ok_or_else(|| r.invalid(format!("{at}source is required")))?;
    match source.as_str() {
        "none" => Ok(CredentialsConfig::None),
        "env" => Ok(CredentialsConfig::Env),
        "manual" => {
            let field = |name: &str| {
                r.non_empty_string(obj, name, at)?.ok_or_else(|| {
                    r.invalid(format!(
                        "{at}{name} is required when {at}source is \"manual\""
                    ))
                })
            };
            Ok(CredentialsConfig::Manual {
                client_id: field("clientId")?,
                client_secret: field("clientSecret")?,
            })
        }
        "claude-json" => Ok(CredentialsConfig::ClaudeJson {
            path: r
                .path(obj, "claudeJsonPath", at)?
                .unwrap_or_else(|| expand_tilde_with(DEFAULT_CLAUDE_JSON, r.home)),
            server_name: r
                .non_empty_string(obj, "mcpServerName", at)?
                .unwrap_or_else(|| DEFAULT_MCP_SERVER_NAME.to_owned()),
        }),
        other => Err(r.invalid(format!(
            "{at}source is {other:?}; expected \"claude-json\", \"env\", \"manual\" or \"none\""
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn path_is_recorded_for_every_server() {
        let config = from(json!({"path": ["~/.local/bin", "/opt/homebrew/bin"]})).unwrap();
        let want = [
            PathBuf::from("/home/tester/.local/bin"),
            PathBuf::from("/opt/homebrew/bin"),
        ];
        assert_eq!(config.search_path, want);
        assert_eq!(config.servers["google"].search_path, want);
        assert!(from(json!({})).unwrap().search_path.is_empty());
        for bad in [
            json!({"path": "a:b"}),
            json!({"path": ["bin"]}),
            json!({"path": [""]}),
        ] {
            let e = from(bad.clone()).unwrap_err().to_string();
            assert!(e.contains("path"), "{bad}: {e}");
        }
    }

    #[test]
    fn defaults_give_one_google_server() {
        let config = from(json!({})).unwrap();
        assert_eq!(config.file, None);
        assert_eq!(config.socket_path, None);
        assert_eq!(config.log_level, "info");
        assert_eq!(config.max_line_bytes, DEFAULT_MAX_LINE_BYTES);
        assert_eq!(config.shutdown_grace_ms, 5000);
        assert_eq!(config.servers.len(), 1);
        let google = &config.servers["google"];
        assert_eq!(google.name, "google");
        assert_eq!(google.command, "uvx");
        assert_eq!(google.args, ["workspace-mcp", "--tool-tier", "core"]);
        assert!(google.env.is_empty());
        assert_eq!(google.cwd, None);
        assert_eq!(google.call_timeout, Duration::from_secs(120));
        assert_eq!(google.max_concurrent, 1);
        assert_eq!(
            google.client_capabilities,
            json!({"roots": {}, "elicitation": {}})
        );
        assert_eq!(
            google.credentials,
            CredentialsConfig::ClaudeJson {
                path: PathBuf::from("/home/tester/.claude.json"),
                server_name: "coogle".into(),
            }
        );
    }

    #[test]
    fn flat_mcp_accepts_env_cwd_and_max_concurrent() {
        let config = from(json!({
            "mcp": {"args": ["x"], "env": {"A": "1"}, "cwd": "~", "maxConcurrent": 3},
            "credentials": {"source": "none"},
        }))
        .unwrap();
        let google = &config.servers["google"];
        assert_eq!(google.command, "uvx", "command comes from the defaults");
        assert_eq!(google.args, ["x"], "arrays replace");
        assert_eq!(google.env["A"], "1");
        assert_eq!(google.cwd, Some(PathBuf::from(HOME)));
        assert_eq!(google.max_concurrent, 3);
        assert_eq!(google.credentials, CredentialsConfig::None);
    }

    #[test]
    fn native_servers_replace_the_flat_default() {
        let config = from(json!({
            "mcp": {"command": "ignored"},
            "servers": {"google": {"command": "gws"}, "other": {"command": "o"}},
        }))
        .unwrap();
        assert_eq!(
            config.servers.keys().collect::<Vec<_>>(),
            ["google", "other"]
        );
        let google = &config.servers["google"];
        assert_eq!(google.command, "gws");
        assert!(
            google.args.is_empty(),
            "args default to empty, not the flat default"
        );
        assert_eq!(google.call_timeout, Duration::from_secs(120));
        assert_eq!(
            google.credentials,
            CredentialsConfig::ClaudeJson {
                path: PathBuf::from("/home/tester/.claude.json"),
                server_name: "coogle".into(),
            },
            "a native `google` without credentials gets the flat default"
        );
        assert_eq!(config.servers["other"].credentials, CredentialsConfig::None);
    }

    #[test]
    fn credentials_sources() {
        let creds = |c: Value| {
            from(json!({"servers": {"s": {"command": "c", "credentials": c}}}))
                .unwrap()
                .servers["s"]
                .credentials
                .clone()
        };
        assert_eq!(creds(json!({"source": "env"})), CredentialsConfig::Env);
        assert_eq!(creds(json!({"source": "none"})), CredentialsConfig::None);
        assert_eq!(
            creds(json!({"source": "claude-json"})),
            CredentialsConfig::ClaudeJson {
                path: PathBuf::from("/home/tester/.claude.json"),
                server_name: "coogle".into(),
            }
        );
        assert_eq!(
            creds(
                json!({"source": "claude-json", "claudeJsonPath": "~/alt.json", "mcpServerName": "ws"})
            ),
            CredentialsConfig::ClaudeJson {
                path: PathBuf::from("/home/tester/alt.json"),
                server_name: "ws".into(),
            }
        );
    }

    #[test]
    fn expand_tilde_cases() {
        let h = home();
        assert_eq!(expand_tilde_with("~", h), PathBuf::from(HOME));
        assert_eq!(
            expand_tilde_with("~/a/b", h),
            PathBuf::from("/home/tester/a/b")
        );
        assert_eq!(expand_tilde_with("~other/x", h), PathBuf::from("~other/x"));
        assert_eq!(expand_tilde_with("/abs/~/x", h), PathBuf::from("/abs/~/x"));
        assert_eq!(expand_tilde_with("rel", h), PathBuf::from("rel"));
        assert_eq!(expand_tilde_with("~/x", None), PathBuf::from("~/x"));
    }

    #[test]
    fn validation_errors_name_the_key() {
        let cases: Vec<(Value, &str)> = vec![
            (json!([]), "the top level must be a JSON object"),
            (
                json!({"servers": {"google": {"command": "c", "maxConcurrent": 0}}}),
                "servers.google.maxConcurrent must be at least 1",
            ),
            (
                json!({"servers": {"google": {"command": "c", "maxConcurrent": -1}}}),
                "servers.google.maxConcurrent must be a non-negative integer",
            ),
            (
                json!({"servers": {"google": {"command": "c", "callTimeoutMs": 0}}}),
                "servers.google.callTimeoutMs must be at least 1",
            ),
            (
                json!({"callTimeoutMs": 0}),
                "callTimeoutMs must be at least 1",
            ),
            (
                json!({"callTimeoutMs": "soon"}),
                "callTimeoutMs must be a non-negative integer",
            ),
            (
                json!({"maxConnections": 0}),
                "maxConnections must be at least 1",
            ),
            (
                json!({"maxLineBytes": 0}),
                "maxLineBytes must be at least 1",
            ),
            (
                json!({"shutdownGraceMs": 1.5}),
                "shutdownGraceMs must be a non-negative integer",
            ),
            (json!({"logLevel": 3}), "logLevel must be a string"),
            (json!({"socketPath": ""}), "socketPath must not be empty"),
            (json!({"socketPath": 1}), "socketPath must be a string"),
            (
                json!({"servers": {"google": {"args": ["x"]}}}),
                "servers.google.command is required",
            ),
            (
                json!({"servers": {"google": {"command": ""}}}),
                "servers.google.command must not be empty",
            ),
            (
                json!({"servers": {"google": {"command": "c", "args": "x"}}}),
                "servers.google.args must be an array of strings",
            ),
            (
                json!({"servers": {"google": {"command": "c", "args": [1]}}}),
                "servers.google.args must be an array of strings",
            ),
            (
                json!({"servers": {"google": {"command": "c", "env": ["A=1"]}}}),
                "servers.google.env must be an object of strings",
            ),
            (
                json!({"servers": {"google": {"command": "c", "env": {"A": 1}}}}),
                "servers.google.env.A must be a string",
            ),
            (
                json!({"servers": {"google": {"command": "c", "env": {"A=B": "1"}}}}),
                "servers.google.env has an invalid variable name \"A=B\"",
            ),
            (
                json!({"servers": {"google": {"command": "c", "cwd": 7}}}),
                "servers.google.cwd must be a string",
            ),
            (
                json!({"servers": {"google": {"command": "c", "clientCapabilities": []}}}),
                "servers.google.clientCapabilities must be an object",
            ),
            (
                json!({"servers": {}}),
                "servers must name at least one server",
            ),
            (json!({"servers": []}), "servers must be an object"),
            (json!({"servers": {"g": 1}}), "servers.g must be an object"),
            (
                json!({"servers": {"bad name": {"command": "c"}}}),
                "server name \"bad name\" must be non-empty",
            ),
            (
                json!({"servers": {"": {"command": "c"}}}),
                "server name \"\" must be non-empty",
            ),
            (
                json!({"servers": {"s": {"command": "c", "credentials": {"source": "magic"}}}}),
                "servers.s.credentials.source is \"magic\"; expected",
            ),
            (
                json!({"servers": {"s": {"command": "c", "credentials": {}}}}),
                "servers.s.credentials.source is required",
            ),
            (
                json!({"servers": {"s": {"command": "c", "credentials": "env"}}}),
                "servers.s.credentials must be an object",
            ),
            (
                json!({"credentials": {"source": "manual", "clientId": "id"}}),
                "credentials.clientSecret is required when credentials.source is \"manual\"",
            ),
            (
                json!({"credentials": {"source": "claude-json", "mcpServerName": ""}}),
                "credentials.mcpServerName must not be empty",
            ),
            (
                json!({"mcp": {"command": 5}}),
                "mcp.command must be a string",
            ),
            (json!({"mcp": "uvx"}), "mcp must be an object"),
        ];
        for (user, expected) in cases {
            let detail = invalid_detail(user.clone());
            assert!(
                detail.starts_with(expected),
                "for {user}: expected {expected:?}, got {detail:?}"
            );
        }
    }

    #[test]
    fn invalid_error_names_the_file() {
        let err = from_value_with(
            json!({"servers": {"google": {"command": "c", "maxConcurrent": 0}}}),
            Some(PathBuf::from("/etc/coogle.json")),
            &host(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid config /etc/coogle.json: servers.google.maxConcurrent must be at least 1"
        );
        let err = invalid_detail(json!({"callTimeoutMs": 0}));
        assert_eq!(err, "callTimeoutMs must be at least 1");
        assert_eq!(
            from(json!({"callTimeoutMs": 0})).unwrap_err().to_string(),
            "invalid config <defaults>: callTimeoutMs must be at least 1"
        );
    }

    #[test]
    fn coogle_tool_switch() {
        assert!(
            Config::from_value(serde_json::json!({}), None)
                .unwrap()
                .coogle_tool
        );
        let off = Config::from_value(serde_json::json!({"coogleTool": false}), None).unwrap();
        assert!(!off.coogle_tool);
        let e = Config::from_value(serde_json::json!({"coogleTool": 1}), None).unwrap_err();
        assert!(
            e.to_string().contains("coogleTool must be true or false"),
            "{e}"
        );
    }

    /// Sign-in reading is the server's own setting: on for workspace-mcp (the built-in `google`
    /// server, or any that runs it), off for every other unless its config says how it asks.
    #[test]
    fn sign_in_is_a_servers_own_setting() {
        let google = SignInConfig::workspace_mcp();
        assert_eq!(
            from(json!({})).unwrap().servers["google"].sign_in,
            Some(google.clone())
        );
        let config = from(json!({"servers": {
            "google": {"command": "fake-mcp", "credentials": {"source": "none"}},
            "mail": {"command": "uvx", "args": ["workspace-mcp", "--tools", "gmail"]},
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "off": {"command": "uvx", "args": ["workspace-mcp"], "signIn": false},
            "on": {"command": "notes-mcp", "signIn": true},
            "own": {"command": "notes-mcp", "signIn": {"urlMarker": "Log in at", "accountArgument": "user", "extra": 1}},
            "one": {"command": "notes-mcp", "signIn": {"urlMarker": "Log in at"}},
        }}))
        .unwrap();
        let sign_in = |name: &str| config.servers[name].sign_in.clone();
        assert_eq!(sign_in("google"), Some(google.clone()), "the built-in name");
        assert_eq!(sign_in("mail"), Some(google.clone()), "runs workspace-mcp");
        assert_eq!(sign_in("time"), None);
        assert_eq!(sign_in("off"), None);
        assert_eq!(sign_in("on"), Some(google));
        assert_eq!(
            sign_in("own"),
            Some(SignInConfig {
                url_marker: "Log in at".into(),
                account_argument: Some("user".into()),
            })
        );
        assert_eq!(sign_in("one").unwrap().account_argument, None);
        assert!(
            config
                .unknown_keys
                .iter()
                .any(|u| u.key == "servers.own.signIn.extra"),
            "{:?}",
            config.unknown_keys
        );
        for (bad, says) in [
            (
                json!("yes"),
                "servers.x.signIn must be true, false or an object",
            ),
            (json!({}), "servers.x.signIn.urlMarker is required"),
            (
                json!({"urlMarker": ""}),
                "servers.x.signIn.urlMarker must not be empty",
            ),
            (
                json!({"urlMarker": "a", "accountArgument": 3}),
                "servers.x.signIn.accountArgument must be a string",
            ),
        ] {
            let e = invalid_detail(json!({"servers": {"x": {"command": "c", "signIn": bad}}}));
            assert!(e.starts_with(says), "{bad}: {e}");
        }
    }
}
