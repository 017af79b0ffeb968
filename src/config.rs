//! Configuration: finding, reading, merging and validating `config.json`, and resolving the
//! Google OAuth client credentials each upstream needs.
//!
//! This module owns the meaning of every config key. It accepts two shapes: the original
//! TypeScript coogle's flat shape (`mcp` + `credentials`, one upstream named `google`; also the
//! shape of the built-in [`defaults`]) and the native shape (`servers: {name: {...}}`). The
//! user's file is deep-merged over the defaults (objects merge, arrays and scalars replace).
//!
//! It must never log or put into an error a secret value (client secrets, or any `env`
//! value), and it never writes files: `~/.claude.json` and `config.json` are only read here.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use crate::secret::{Masked, mask};

/// Per-call timeout used when neither the server nor the top level sets `callTimeoutMs`.
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 120_000;
/// Longest JSON-RPC line accepted when `maxLineBytes` is not set.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 5000;
const DEFAULT_LOG_LEVEL: &str = "info";
const DEFAULT_CLAUDE_JSON: &str = "~/.claude.json";
const DEFAULT_MCP_SERVER_NAME: &str = "coogle";
const DEFAULT_SERVER: &str = "google";
const CLIENT_ID_VAR: &str = "GOOGLE_OAUTH_CLIENT_ID";
const CLIENT_SECRET_VAR: &str = "GOOGLE_OAUTH_CLIENT_SECRET";
const DEFAULTS_LABEL: &str = "<defaults>";

const TOP_LEVEL_KEYS: &[&str] = &[
    "socketPath",
    "logLevel",
    "maxLineBytes",
    "shutdownGraceMs",
    "callTimeoutMs",
    "coogleTool",
    "servers",
    "mcp",
    "credentials",
    "search",
];
const SEARCH_KEYS: &[&str] = &[
    "apiKey",
    "apiBaseUrl",
    "models",
    "timeoutMs",
    "retryBaseMs",
    "maxRetries",
    "maxConcurrent",
];
/// The search upstream's name, as `coogle mcp --server search` takes it.
pub const SEARCH_SERVER: &str = "search";
/// Gemini's REST endpoint.
pub const DEFAULT_GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "credentials",
    "maxConcurrent",
    "callTimeoutMs",
    "clientCapabilities",
];

/// The whole daemon configuration, after merging over the defaults and validating.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file that was loaded; `None` when none existed (defaults only).
    pub file: Option<PathBuf>,
    /// `socketPath`, `~` expanded; `None` means the default computed elsewhere.
    pub socket_path: Option<PathBuf>,
    /// `logLevel`, default `"info"`.
    pub log_level: String,
    /// `maxLineBytes`, default [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: usize,
    /// `shutdownGraceMs`, default 5000.
    pub shutdown_grace_ms: u64,
    /// `coogleTool`, default true: add the `coogle` tool (status, restart, async calls) to each
    /// upstream's tool list.
    pub coogle_tool: bool,
    /// The upstreams, in file order; never empty. Includes `search` (the built-in ask_google
    /// server) when a Gemini API key is found and no server of that name is configured.
    pub servers: IndexMap<String, ServerConfig>,
    /// The `search` section, read by `coogle search-server`.
    pub search: SearchConfig,
}

/// The built-in search server's settings (`search` in config.json).
#[derive(Clone, PartialEq)]
pub struct SearchConfig {
    /// `apiKey`: the Gemini API key, when written in the config (a secret: masked in Debug).
    pub api_key: Option<String>,
    /// `apiBaseUrl`, default [`DEFAULT_GEMINI_BASE_URL`]; tests point it at a loopback mock.
    pub api_base_url: String,
    /// `models.pro`, `models.flash`, `models.flashLite`: the Gemini model behind each choice.
    pub model_pro: String,
    pub model_flash: String,
    pub model_flash_lite: String,
    /// `timeoutMs`: one HTTP request's limit, default 60 s.
    pub timeout: Duration,
    /// `retryBaseMs`: the first retry's delay, doubled each time; default 1 s.
    pub retry_base: Duration,
    /// `maxRetries`: retries after the first attempt for transient errors, default 3.
    pub max_retries: u32,
    /// `maxConcurrent` of the `search` upstream, default 4 (answers take seconds; sessions
    /// should not wait for each other's).
    pub max_concurrent: usize,
}

impl fmt::Debug for SearchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchConfig")
            .field("api_key", &self.api_key.as_deref().map(mask))
            .field("api_base_url", &self.api_base_url)
            .field("model_pro", &self.model_pro)
            .field("model_flash", &self.model_flash)
            .field("model_flash_lite", &self.model_flash_lite)
            .field("timeout", &self.timeout)
            .field("retry_base", &self.retry_base)
            .field("max_retries", &self.max_retries)
            .field("max_concurrent", &self.max_concurrent)
            .finish()
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            api_key: None,
            api_base_url: DEFAULT_GEMINI_BASE_URL.to_owned(),
            model_pro: "gemini-3.1-pro-preview".to_owned(),
            model_flash: "gemini-3-flash-preview".to_owned(),
            model_flash_lite: "gemini-3.1-flash-lite-preview".to_owned(),
            timeout: Duration::from_secs(60),
            retry_base: Duration::from_secs(1),
            max_retries: 3,
            max_concurrent: 4,
        }
    }
}

/// One upstream MCP server that coogle starts and shares. Its `Debug` masks `env` values.
#[derive(Clone)]
pub struct ServerConfig {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Extra environment for the child, values as written (they may be secrets: never log them).
    pub env: IndexMap<String, String>,
    /// `cwd`, `~` expanded.
    pub cwd: Option<PathBuf>,
    pub credentials: CredentialsConfig,
    /// `maxConcurrent`, default 1, at least 1.
    pub max_concurrent: usize,
    /// The server's `callTimeoutMs`, else the top-level one, else 120 s; never zero.
    pub call_timeout: Duration,
    /// `clientCapabilities` sent in `initialize`, default `{"roots": {}, "elicitation": {}}`.
    pub client_capabilities: Value,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env: Vec<(&String, Masked<'_>)> =
            self.env.iter().map(|(k, v)| (k, Masked(v))).collect();
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .field("credentials", &self.credentials)
            .field("max_concurrent", &self.max_concurrent)
            .field("call_timeout", &self.call_timeout)
            .field("client_capabilities", &self.client_capabilities)
            .finish()
    }
}

/// Where a server's Google OAuth client id and secret come from.
#[derive(Clone, PartialEq)]
pub enum CredentialsConfig {
    /// `{"source": "none"}`: inject nothing.
    None,
    /// `GOOGLE_OAUTH_CLIENT_ID` / `GOOGLE_OAUTH_CLIENT_SECRET` from the daemon's own environment.
    Env,
    /// `clientId` / `clientSecret` written in the config.
    Manual {
        client_id: String,
        client_secret: String,
    },
    /// The `env` block of the `mcpServers.<server_name>` entry of a `~/.claude.json`.
    ClaudeJson { path: PathBuf, server_name: String },
}

impl fmt::Debug for CredentialsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsConfig::None => f.write_str("None"),
            CredentialsConfig::Env => f.write_str("Env"),
            CredentialsConfig::Manual {
                client_id,
                client_secret,
            } => f
                .debug_struct("Manual")
                .field("client_id", &Masked(client_id))
                .field("client_secret", &Masked(client_secret))
                .finish(),
            CredentialsConfig::ClaudeJson { path, server_name } => f
                .debug_struct("ClaudeJson")
                .field("path", path)
                .field("server_name", server_name)
                .finish(),
        }
    }
}

/// A resolved OAuth client. Its `Debug` shows lengths only.
#[derive(Clone, PartialEq)]
pub struct Credentials {
    pub client_id: String,
    pub client_secret: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("client_id", &Masked(&self.client_id))
            .field("client_secret", &Masked(&self.client_secret))
            .finish()
    }
}

/// Everything that can go wrong while loading the config or resolving credentials.
/// Messages name the file and the key; they never contain secret values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("could not read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not parse {} at line {line} column {column}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// `path` is the config file, or `<defaults>` when there was none.
    #[error("invalid config {path}: {detail}")]
    Invalid { path: String, detail: String },
    #[error("no credentials for server {server}: {detail}")]
    NoCredentials { server: String, detail: String },
    #[error("no upstream named {name:?}; configured: {configured}")]
    UnknownServer { name: String, configured: String },
    #[error(
        "several upstreams are configured and none is named \"google\"; name one of: {configured}"
    )]
    NoDefaultServer { configured: String },
}

/// `$XDG_CONFIG_HOME/coogle/config.json` when that variable is an absolute path, else
/// `$HOME/.config/coogle/config.json`.
pub fn default_path() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME") {
        let xdg = PathBuf::from(xdg);
        if xdg.is_absolute() {
            return xdg.join("coogle").join("config.json");
        }
    }
    home_dir()
        .unwrap_or_default()
        .join(".config")
        .join("coogle")
        .join("config.json")
}

/// `$HOME` when set and non-empty, else the password database entry of the current user.
fn home_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("HOME")
        && !home.is_empty()
    {
        return Some(PathBuf::from(home));
    }
    passwd_home()
}

fn passwd_home() -> Option<PathBuf> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;

    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids); getpwuid_r fills it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live, correctly sized storage owned by this frame;
    // getpwuid_r (unlike getpwuid) writes only into the buffers we pass.
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: on success pw_dir points to a NUL-terminated string inside `buf`, still alive.
    let dir = unsafe { CStr::from_ptr(pwd.pw_dir) };
    let dir = std::ffi::OsStr::from_bytes(dir.to_bytes());
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// `"~"` and `"~/x"` are taken relative to the home directory; anything else is unchanged
/// (`~user/x` is not supported and stays as written).
pub fn expand_tilde(s: &str) -> PathBuf {
    expand_tilde_with(s, home_dir().as_deref())
}

fn expand_tilde_with(s: &str, home: Option<&Path>) -> PathBuf {
    match home {
        Some(home) if s == "~" => home.to_path_buf(),
        Some(home) => match s.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(s),
        },
        None => PathBuf::from(s),
    }
}

/// Merge `overlay` into `base`: objects merge key by key, recursively; arrays, scalars and
/// `null` in the overlay replace what was there.
pub fn deep_merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(slot) => deep_merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, overlay) => *slot = overlay,
    }
}

/// The built-in defaults, in the original TypeScript coogle's flat shape: one upstream
/// (`uvx workspace-mcp --tool-tier core`) whose credentials come from `~/.claude.json`.
pub fn defaults() -> Value {
    json!({
        "mcp": {
            "command": "uvx",
            "args": ["workspace-mcp", "--tool-tier", "core"],
        },
        "credentials": {
            "source": "claude-json",
            "claudeJsonPath": DEFAULT_CLAUDE_JSON,
            "mcpServerName": DEFAULT_MCP_SERVER_NAME,
        },
        "callTimeoutMs": DEFAULT_CALL_TIMEOUT_MS,
        "logLevel": DEFAULT_LOG_LEVEL,
    })
}

impl Config {
    /// Load `path` (or [`default_path`] when `None`). A missing file is not an error (defaults
    /// apply, `file` is `None`) only when `path` was `None`; an explicitly given path that does
    /// not exist is an error. Unreadable, unparsable or invalid files are errors.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let home = home_dir();
        load_with(path, &Host::process(home.as_deref()))
    }

    /// Interpret a user JSON value (not yet merged: this merges it over [`defaults`]).
    pub fn from_value(user: Value, file: Option<PathBuf>) -> Result<Config, ConfigError> {
        let home = home_dir();
        from_value_with(user, file, &Host::process(home.as_deref()))
    }

    /// The upstream to use. `None` picks the only server, else the one named `google`;
    /// an unknown name is an error listing the configured names.
    pub fn server(&self, name: Option<&str>) -> Result<&ServerConfig, ConfigError> {
        let configured = || self.servers.keys().cloned().collect::<Vec<_>>().join(", ");
        match name {
            Some(name) => self
                .servers
                .get(name)
                .ok_or_else(|| ConfigError::UnknownServer {
                    name: name.to_owned(),
                    configured: configured(),
                }),
            None if self.servers.len() == 1 => Ok(&self.servers[0]),
            None => self
                .servers
                .get(DEFAULT_SERVER)
                .ok_or_else(|| ConfigError::NoDefaultServer {
                    configured: configured(),
                }),
        }
    }
}

/// What loading reads besides the file: home (for `~`, and a `.env` there) and, to decide on the
/// default `search` upstream, the working directory and the environment. Tests pass their own,
/// so a developer's own `GOOGLE_API_KEY` or `.env` cannot change what they see.
struct Host<'a> {
    home: Option<&'a Path>,
    cwd: PathBuf,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Host<'a> {
    fn process(home: Option<&'a Path>) -> Host<'a> {
        Host {
            home,
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            env: &|var| std::env::var(var).ok(),
        }
    }
}

fn load_with(path: Option<&Path>, host: &Host<'_>) -> Result<Config, ConfigError> {
    let explicit = path.is_some();
    let path = path.map_or_else(default_path, Path::to_path_buf);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
            tracing::debug!(path = %path.display(), "no config file; using the defaults");
            return from_value_with(Value::Object(Map::new()), None, host);
        }
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    let user = parse_json(&text, &path)?;
    from_value_with(user, Some(path), host)
}

/// Parse JSON text, turning a failure into [`ConfigError::Parse`] with the position.
fn parse_json(text: &str, path: &Path) -> Result<Value, ConfigError> {
    serde_json::from_str(text).map_err(|e| {
        let (line, column) = (e.line(), e.column());
        let full = e.to_string();
        // serde_json appends " at line L column C"; we say it ourselves, once.
        let suffix = format!(" at line {line} column {column}");
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        ConfigError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })
}

/// Reads typed fields out of the merged config, producing errors that name the file and key.
struct Reader<'a> {
    label: String,
    home: Option<&'a Path>,
}

impl Reader<'_> {
    fn invalid(&self, detail: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.label.clone(),
            detail: detail.into(),
        }
    }

    fn object<'v>(
        &self,
        value: &'v Value,
        key: &str,
    ) -> Result<&'v Map<String, Value>, ConfigError> {
        value
            .as_object()
            .ok_or_else(|| self.invalid(format!("{key} must be an object")))
    }

    /// A string field; absent and `null` are `None`.
    fn string(
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

    fn non_empty_string(
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

    fn path(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<Option<PathBuf>, ConfigError> {
        Ok(self
            .non_empty_string(obj, key, at)?
            .map(|s| expand_tilde_with(&s, self.home)))
    }

    /// A non-negative integer field; absent and `null` are `None`.
    fn integer(
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

    fn positive(
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

    fn warn_unknown(&self, obj: &Map<String, Value>, known: &[&str], at: &str) {
        let unknown = unknown_keys(obj, known, at);
        if !unknown.is_empty() {
            tracing::warn!(
                config = %self.label,
                keys = %unknown.join(", "),
                "ignoring unknown config keys"
            );
        }
    }
}

/// The keys of `obj` not in `known`, as full key paths (`at` is the prefix, e.g. `servers.x.`).
fn unknown_keys(obj: &Map<String, Value>, known: &[&str], at: &str) -> Vec<String> {
    obj.keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| format!("{at}{k}"))
        .collect()
}

fn from_value_with(
    user: Value,
    file: Option<PathBuf>,
    host: &Host<'_>,
) -> Result<Config, ConfigError> {
    let r = Reader {
        label: file
            .as_ref()
            .map_or_else(|| DEFAULTS_LABEL.to_owned(), |p| p.display().to_string()),
        home: host.home,
    };
    let Value::Object(user) = user else {
        return Err(r.invalid("the top level must be a JSON object"));
    };
    r.warn_unknown(&user, TOP_LEVEL_KEYS, "");
    let native = user.get("servers").is_some_and(|v| !v.is_null());
    if native && user.contains_key("mcp") {
        tracing::warn!(config = %r.label, "both `servers` and `mcp` are set; `mcp` is ignored");
    }

    let mut merged = defaults();
    deep_merge(&mut merged, Value::Object(user));
    let merged = r.object(&merged, "the top level")?;

    let socket_path = r.path(merged, "socketPath", "")?;
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
    let coogle_tool = match merged.get("coogleTool") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(r.invalid("coogleTool must be true or false")),
    };

    let mut servers = IndexMap::new();
    if native {
        let entries = r.object(&merged["servers"], "servers")?;
        if entries.is_empty() {
            return Err(r.invalid("servers must name at least one server"));
        }
        for (name, value) in entries {
            if !valid_server_name(name) {
                return Err(r.invalid(format!(
                    "server name {name:?} must be non-empty and use only letters, digits, '-' and '_'"
                )));
            }
            let at = format!("servers.{name}.");
            let obj = r.object(value, &format!("servers.{name}"))?;
            r.warn_unknown(obj, SERVER_KEYS, &at);
            let credentials = match obj.get("credentials") {
                None | Some(Value::Null) if name == DEFAULT_SERVER => {
                    credentials_from(&r, &defaults()["credentials"], "credentials.")?
                }
                None | Some(Value::Null) => CredentialsConfig::None,
                Some(c) => credentials_from(&r, c, &format!("{at}credentials."))?,
            };
            let server = server_from(&r, name, obj, &at, credentials, call_timeout_ms)?;
            servers.insert(name.clone(), server);
        }
    } else {
        let mcp = r.object(&merged["mcp"], "mcp")?;
        r.warn_unknown(mcp, SERVER_KEYS, "mcp.");
        let credentials = credentials_from(&r, &merged["credentials"], "credentials.")?;
        let server = server_from(
            &r,
            DEFAULT_SERVER,
            mcp,
            "mcp.",
            credentials,
            call_timeout_ms,
        )?;
        servers.insert(DEFAULT_SERVER.to_owned(), server);
    }

    let search = search_from(&r, merged.get("search"))?;
    if !servers.contains_key(SEARCH_SERVER) && search_key_available(search.api_key.as_deref(), host)
    {
        let mut args = vec!["search-server".to_owned()];
        if let Some(f) = &file {
            args.push("--config".to_owned());
            args.push(f.display().to_string());
        }
        // Retries with backoff can outlast one request's timeout several times over.
        let budget = search.timeout * (search.max_retries + 1)
            + search.retry_base * ((1u32 << search.max_retries.min(16)) - 1);
        servers.insert(
            SEARCH_SERVER.to_owned(),
            ServerConfig {
                name: SEARCH_SERVER.to_owned(),
                command: std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| "coogle".to_owned()),
                args,
                env: IndexMap::new(),
                cwd: None,
                credentials: CredentialsConfig::None,
                max_concurrent: search.max_concurrent,
                call_timeout: budget.max(Duration::from_millis(call_timeout_ms)),
                client_capabilities: json!({}),
            },
        );
    }

    Ok(Config {
        file,
        socket_path,
        log_level,
        max_line_bytes,
        shutdown_grace_ms,
        coogle_tool,
        servers,
        search,
    })
}

/// True when the search server would find a Gemini API key: the environment, the config, or a
/// `.env` file in the working directory or home (what `coogle search-server` reads).
fn search_key_available(config_key: Option<&str>, host: &Host<'_>) -> bool {
    let config = config_key.map(|k| json!({"search": {"apiKey": k}}));
    crate::secret::find_key(
        host.env,
        config.as_ref(),
        &host.cwd,
        host.home.unwrap_or(Path::new("/nonexistent")),
    )
    .is_some()
}

fn search_from(r: &Reader<'_>, value: Option<&Value>) -> Result<SearchConfig, ConfigError> {
    let mut search = SearchConfig::default();
    let obj = match value {
        None | Some(Value::Null) => return Ok(search),
        Some(v) => r.object(v, "search")?,
    };
    r.warn_unknown(obj, SEARCH_KEYS, "search.");
    search.api_key = r
        .string(obj, "apiKey", "search.")?
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty());
    if let Some(url) = r.non_empty_string(obj, "apiBaseUrl", "search.")? {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(r.invalid("search.apiBaseUrl must be an http(s) URL"));
        }
        search.api_base_url = url.trim_end_matches('/').to_owned();
    }
    if let Some(models) = obj.get("models").filter(|m| !m.is_null()) {
        let models = r.object(models, "search.models")?;
        r.warn_unknown(models, &["pro", "flash", "flashLite"], "search.models.");
        for (key, slot) in [
            ("pro", &mut search.model_pro),
            ("flash", &mut search.model_flash),
            ("flashLite", &mut search.model_flash_lite),
        ] {
            if let Some(m) = r.non_empty_string(models, key, "search.models.")? {
                *slot = m;
            }
        }
    }
    if let Some(ms) = r.positive(obj, "timeoutMs", "search.")? {
        search.timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = r.integer(obj, "retryBaseMs", "search.")? {
        search.retry_base = Duration::from_millis(ms);
    }
    if let Some(n) = r.integer(obj, "maxRetries", "search.")? {
        search.max_retries =
            u32::try_from(n.min(10)).map_err(|_| r.invalid("search.maxRetries is too large"))?;
    }
    if let Some(n) = r.positive(obj, "maxConcurrent", "search.")? {
        search.max_concurrent = usize::try_from(n).unwrap_or(usize::MAX);
    }
    Ok(search)
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
    default_timeout_ms: u64,
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
    let cwd = r.path(obj, "cwd", at)?;
    let max_concurrent = match r.positive(obj, "maxConcurrent", at)? {
        Some(n) => {
            usize::try_from(n).map_err(|_| r.invalid(format!("{at}maxConcurrent is too large")))?
        }
        None => 1,
    };
    let call_timeout_ms = r
        .positive(obj, "callTimeoutMs", at)?
        .unwrap_or(default_timeout_ms);
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
        credentials,
        max_concurrent,
        call_timeout: Duration::from_millis(call_timeout_ms),
        client_capabilities,
    })
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

impl ServerConfig {
    /// The environment to add to the child: `env` entries first, then the resolved credentials
    /// as `GOOGLE_OAUTH_CLIENT_ID` and `GOOGLE_OAUTH_CLIENT_SECRET` (they override `env`).
    ///
    /// A credentials lookup that fails (no `~/.claude.json`, no entry, variable unset) does not
    /// stop the child: the upstream may not need them, and it reports its own error better.
    /// That is logged as a warning and just `env` is returned. Only a `~/.claude.json` that
    /// exists but does not parse is an error, so a broken file is never silently ignored.
    pub fn child_env(&self) -> Result<Vec<(String, String)>, ConfigError> {
        self.child_env_with(|name| std::env::var(name).ok())
    }

    fn child_env_with(
        &self,
        getenv: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let credentials = match self.resolve_credentials_with(getenv) {
            Ok(c) => c,
            Err(e @ ConfigError::Parse { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(
                    server = %self.name,
                    error = %e,
                    "starting the upstream without Google OAuth credentials"
                );
                None
            }
        };
        let mut out: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(k, _)| {
                credentials.is_none()
                    || (k.as_str() != CLIENT_ID_VAR && k.as_str() != CLIENT_SECRET_VAR)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(c) = credentials {
            out.push((CLIENT_ID_VAR.to_owned(), c.client_id));
            out.push((CLIENT_SECRET_VAR.to_owned(), c.client_secret));
        }
        Ok(out)
    }

    /// The credentials this server is configured with: `Ok(None)` for
    /// [`CredentialsConfig::None`], an error for every failure to find them.
    pub fn resolve_credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        self.resolve_credentials_with(|name| std::env::var(name).ok())
    }

    fn resolve_credentials_with(
        &self,
        getenv: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Credentials>, ConfigError> {
        let missing = |detail: String| ConfigError::NoCredentials {
            server: self.name.clone(),
            detail,
        };
        match &self.credentials {
            CredentialsConfig::None => Ok(None),
            CredentialsConfig::Manual {
                client_id,
                client_secret,
            } => Ok(Some(Credentials {
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
            })),
            CredentialsConfig::Env => {
                let var = |name: &str| {
                    getenv(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                        missing(format!("{name} is not set in coogle's environment"))
                    })
                };
                Ok(Some(Credentials {
                    client_id: var(CLIENT_ID_VAR)?,
                    client_secret: var(CLIENT_SECRET_VAR)?,
                }))
            }
            CredentialsConfig::ClaudeJson { path, server_name } => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| missing(format!("could not read {}: {e}", path.display())))?;
                let root = parse_json(&text, path)?;
                claude_json_credentials(&root, server_name)
                    .map(Some)
                    .map_err(|detail| missing(format!("{} {detail}", path.display())))
            }
        }
    }

    /// A stable key for "the same upstream program": the FNV-1a 64-bit hash, as 16 lowercase hex
    /// digits, of `command`, each of `args`, the `env` variable names (sorted, so reordering
    /// them does not matter) and `cwd`. Every field is length-prefixed so that fields cannot run
    /// into each other. Env values and credentials are left out on purpose: the key may be
    /// written to disk and must not depend on, or leak anything about, secrets.
    pub fn cache_key(&self) -> String {
        let mut h = Fnv1a::new();
        h.field(b"command");
        h.field(self.command.as_bytes());
        h.field(b"args");
        h.count(self.args.len());
        for arg in &self.args {
            h.field(arg.as_bytes());
        }
        h.field(b"env");
        let mut keys: Vec<&str> = self.env.keys().map(String::as_str).collect();
        keys.sort_unstable();
        h.count(keys.len());
        for key in keys {
            h.field(key.as_bytes());
        }
        h.field(b"cwd");
        match &self.cwd {
            Some(cwd) => {
                use std::os::unix::ffi::OsStrExt;
                h.count(1);
                h.field(cwd.as_os_str().as_bytes());
            }
            None => h.count(0),
        }
        format!("{:016x}", h.0)
    }
}

/// Find the OAuth client in a parsed `~/.claude.json`: `mcpServers.<name>.env` at the top level
/// first, then under each `projects.*` in file order; the first entry with both variables wins.
/// The error is the rest of a sentence that starts with the file's path; it holds no values.
fn claude_json_credentials(root: &Value, server_name: &str) -> Result<Credentials, String> {
    let mut candidates: Vec<(String, &Value)> = Vec::new();
    if let Some(entry) = root.get("mcpServers").and_then(|s| s.get(server_name)) {
        candidates.push((format!("mcpServers.{server_name}"), entry));
    }
    if let Some(projects) = root.get("projects").and_then(Value::as_object) {
        for (project, value) in projects {
            if let Some(entry) = value.get("mcpServers").and_then(|s| s.get(server_name)) {
                candidates.push((
                    format!("projects.{project:?}.mcpServers.{server_name}"),
                    entry,
                ));
            }
        }
    }
    let mut incomplete = Vec::new();
    for (location, entry) in &candidates {
        let env = entry.get("env");
        let var = |name: &str| {
            env.and_then(|e| e.get(name))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
        };
        match (var(CLIENT_ID_VAR), var(CLIENT_SECRET_VAR)) {
            (Some(id), Some(secret)) => {
                return Ok(Credentials {
                    client_id: id.to_owned(),
                    client_secret: secret.to_owned(),
                });
            }
            (id, secret) => {
                let lacks: Vec<&str> = [(CLIENT_ID_VAR, id), (CLIENT_SECRET_VAR, secret)]
                    .into_iter()
                    .filter(|(_, v)| v.is_none())
                    .map(|(n, _)| n)
                    .collect();
                incomplete.push(format!("{location}.env lacks {}", lacks.join(" and ")));
            }
        }
    }
    if incomplete.is_empty() {
        Err(format!(
            "has no mcpServers entry named {server_name:?} with {CLIENT_ID_VAR} and {CLIENT_SECRET_VAR}"
        ))
    } else {
        Err(format!(
            "has no mcpServers entry named {server_name:?} with {CLIENT_ID_VAR} and {CLIENT_SECRET_VAR} ({})",
            incomplete.join("; ")
        ))
    }
}

/// FNV-1a, 64 bit: tiny, dependency-free and stable across Rust versions (unlike `DefaultHasher`).
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn count(&mut self, n: usize) {
        self.bytes(&(n as u64).to_le_bytes());
    }

    fn field(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.bytes(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: &str = "/home/tester";

    fn data(name: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(name)
    }

    fn home() -> Option<&'static Path> {
        Some(Path::new(HOME))
    }

    /// The fake home, no environment, and a working directory that does not exist (no `.env`).
    fn host() -> Host<'static> {
        Host {
            home: home(),
            cwd: PathBuf::from("/nonexistent/cwd"),
            env: &|_| None,
        }
    }

    fn from(user: Value) -> Result<Config, ConfigError> {
        from_value_with(user, None, &host())
    }

    /// The `search` section: defaults, overrides, and the search upstream it adds when the
    /// config holds a key (with `--config` naming the file it came from).
    #[test]
    fn search_section() {
        let d = from(json!({})).unwrap().search;
        assert_eq!(d, SearchConfig::default());
        assert_eq!(d.model_pro, "gemini-3.1-pro-preview");
        let c = from_value_with(
            json!({"search": {"apiKey": " AIza-config-key ", "apiBaseUrl": "http://127.0.0.1:1/v1/",
                   "models": {"flashLite": "lite-x"}, "timeoutMs": 500, "retryBaseMs": 0,
                   "maxRetries": 1, "maxConcurrent": 2}}),
            Some(PathBuf::from("/etc/coogle.json")),
            &host(),
        )
        .unwrap();
        assert_eq!(c.search.api_key.as_deref(), Some("AIza-config-key"));
        assert_eq!(c.search.api_base_url, "http://127.0.0.1:1/v1");
        assert_eq!(c.search.model_flash_lite, "lite-x");
        assert_eq!(c.search.model_flash, "gemini-3-flash-preview");
        assert_eq!(c.search.timeout, Duration::from_millis(500));
        assert!(!format!("{:?}", c.search).contains("AIza-config-key"));
        let search = &c.servers[SEARCH_SERVER];
        assert_eq!(
            search.args,
            ["search-server", "--config", "/etc/coogle.json"]
        );
        assert_eq!(search.max_concurrent, 2);
        assert_eq!(search.credentials, CredentialsConfig::None);
        // A server the user named `search` is theirs; coogle adds nothing.
        let c = from(
            json!({"servers": {"google": {"command": "g"}, "search": {"command": "mine"}},
                            "search": {"apiKey": "k"}}),
        )
        .unwrap();
        assert_eq!(c.servers[SEARCH_SERVER].command, "mine");
        assert_eq!(
            invalid_detail(json!({"search": {"apiBaseUrl": "ftp://x"}})),
            "search.apiBaseUrl must be an http(s) URL"
        );
        assert_eq!(
            invalid_detail(json!({"search": {"timeoutMs": 0}})),
            "search.timeoutMs must be at least 1"
        );
    }

    /// The default `search` upstream exists exactly when a Gemini API key is found: in the
    /// environment (either variable), the config, or a `.env` in the working directory or home.
    #[test]
    fn default_search_upstream_follows_the_api_key() {
        let dir = tempfile::tempdir().unwrap();
        let (cwd, home) = (dir.path().join("cwd"), dir.path().join("home"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let names = |env: &dyn Fn(&str) -> Option<String>, file: Option<PathBuf>| {
            let host = Host {
                home: Some(&home),
                cwd: cwd.clone(),
                env,
            };
            let c = from_value_with(json!({}), file, &host).unwrap();
            (c.servers.keys().cloned().collect::<Vec<_>>(), c)
        };
        let none = |_: &str| None;
        assert_eq!(
            names(&none, None).0,
            ["google"],
            "no key, no search upstream"
        );

        for var in ["GOOGLE_API_KEY", "GEMINI_API_KEY"] {
            let env = |v: &str| (v == var).then(|| "AIza-from-env".to_owned());
            let (names, c) = names(&env, Some(PathBuf::from("/etc/coogle.json")));
            assert_eq!(names, ["google", "search"], "{var}");
            let search = &c.servers[SEARCH_SERVER];
            assert_eq!(
                search.command,
                std::env::current_exe().unwrap().display().to_string()
            );
            assert_eq!(
                search.args,
                ["search-server", "--config", "/etc/coogle.json"]
            );
            // Four 60 s attempts and 1 + 2 + 4 s of backoff fit in the call timeout.
            assert_eq!(search.call_timeout, Duration::from_secs(4 * 60 + 7));
            assert_eq!(search.max_concurrent, 4);
        }
        let blank = |_: &str| Some("  ".to_owned());
        assert_eq!(
            names(&blank, None).0,
            ["google"],
            "a blank variable is no key"
        );

        std::fs::write(home.join(".env"), "GEMINI_API_KEY=AIza-home\n").unwrap();
        let (names_home, c) = names(&none, None);
        assert_eq!(names_home, ["google", "search"], ".env in home");
        assert_eq!(c.servers[SEARCH_SERVER].args, ["search-server"]);
        std::fs::remove_file(home.join(".env")).unwrap();
        std::fs::write(cwd.join(".env"), "export GOOGLE_API_KEY='AIza-cwd'\n").unwrap();
        assert_eq!(names(&none, None).0, ["google", "search"], ".env in cwd");
    }

    fn invalid_detail(user: Value) -> String {
        match from(user) {
            Err(ConfigError::Invalid { path, detail }) => {
                assert_eq!(path, DEFAULTS_LABEL);
                detail
            }
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    fn server_with(credentials: CredentialsConfig, env: &[(&str, &str)]) -> ServerConfig {
        ServerConfig {
            name: "google".into(),
            command: "uvx".into(),
            args: vec!["workspace-mcp".into()],
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: None,
            credentials,
            max_concurrent: 1,
            call_timeout: Duration::from_secs(1),
            client_capabilities: json!({}),
        }
    }

    fn claude(server_name: &str) -> CredentialsConfig {
        CredentialsConfig::ClaudeJson {
            path: data("claude.json"),
            server_name: server_name.into(),
        }
    }

    fn no_env(_: &str) -> Option<String> {
        None
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
    fn defaults_are_the_flat_shape_without_socket_path() {
        let d = defaults();
        assert_eq!(
            d,
            json!({
                "mcp": {"command": "uvx", "args": ["workspace-mcp", "--tool-tier", "core"]},
                "credentials": {"source": "claude-json", "claudeJsonPath": "~/.claude.json", "mcpServerName": "coogle"},
                "callTimeoutMs": 120000,
                "logLevel": "info",
            })
        );
        assert!(d.get("socketPath").is_none());
    }

    #[test]
    fn legacy_fixture_loads() {
        let path = data("legacy_config.json");
        let config = load_with(Some(&path), &host()).unwrap();
        assert_eq!(config.file.as_deref(), Some(path.as_path()));
        assert_eq!(
            config.socket_path,
            Some(PathBuf::from("/home/tester/coogle.sock"))
        );
        assert_eq!(config.log_level, "debug");
        assert_eq!(config.servers.keys().collect::<Vec<_>>(), ["google"]);
        let google = &config.servers["google"];
        assert_eq!(google.command, "uvx");
        assert_eq!(google.args, ["workspace-mcp", "--tool-tier", "core"]);
        assert_eq!(google.call_timeout, Duration::from_millis(90_000));
        assert_eq!(
            google.credentials,
            CredentialsConfig::Manual {
                client_id: "123-abc.apps.googleusercontent.com".into(),
                client_secret: "GOCSPX-fake-secret".into(),
            }
        );
        // The public entry points agree with the home-injected ones.
        let public = Config::load(Some(&path)).unwrap();
        assert_eq!(public.servers["google"].credentials, google.credentials);
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
    fn native_fixture_loads_both_servers_in_order() {
        let path = data("native_config.json");
        let config = load_with(Some(&path), &host()).unwrap();
        assert_eq!(
            config.socket_path,
            Some(PathBuf::from("/tmp/coogle-test/daemon.sock"))
        );
        assert_eq!(config.log_level, "warn");
        assert_eq!(config.max_line_bytes, 1_048_576);
        assert_eq!(config.shutdown_grace_ms, 2500);
        assert_eq!(
            config.servers.keys().collect::<Vec<_>>(),
            ["google", "search"]
        );

        let google = &config.servers["google"];
        assert_eq!(google.args, ["workspace-mcp", "--tool-tier", "extended"]);
        assert_eq!(
            google.env.iter().collect::<Vec<_>>(),
            [
                (&"WORKSPACE_MCP_PORT".to_owned(), &"8765".to_owned()),
                (&"OAUTHLIB_INSECURE_TRANSPORT".to_owned(), &"1".to_owned()),
            ]
        );
        assert_eq!(google.cwd, Some(PathBuf::from("/home/tester/work")));
        assert_eq!(google.max_concurrent, 2);
        assert_eq!(google.call_timeout, Duration::from_millis(5000));
        assert_eq!(
            google.client_capabilities,
            json!({"roots": {"listChanged": true}})
        );
        assert_eq!(
            google.credentials,
            CredentialsConfig::ClaudeJson {
                path: PathBuf::from("/home/tester/.claude.json"),
                server_name: "workspace".into(),
            }
        );

        let search = &config.servers["search"];
        assert_eq!(search.command, "npx");
        assert_eq!(search.args, ["-y", "@example/search-mcp"]);
        assert_eq!(search.env["SEARCH_REGION"], "eu");
        assert_eq!(search.max_concurrent, 4);
        assert_eq!(
            search.call_timeout,
            Duration::from_millis(60_000),
            "falls back to the top-level callTimeoutMs"
        );
        assert_eq!(search.credentials, CredentialsConfig::None);
        assert_eq!(
            search.client_capabilities,
            json!({"roots": {}, "elicitation": {}})
        );
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
    fn deep_merge_semantics() {
        let mut base = json!({
            "a": {"x": 1, "y": {"deep": true, "keep": 1}},
            "arr": [1, 2, 3],
            "s": "base",
            "n": 5,
            "gone": {"k": 1},
        });
        deep_merge(
            &mut base,
            json!({
                "a": {"y": {"deep": false}, "z": 2},
                "arr": [9],
                "s": {"now": "object"},
                "n": null,
                "new": [1],
            }),
        );
        assert_eq!(
            base,
            json!({
                "a": {"x": 1, "y": {"deep": false, "keep": 1}, "z": 2},
                "arr": [9],
                "s": {"now": "object"},
                "n": null,
                "gone": {"k": 1},
                "new": [1],
            })
        );
        // Key order of the base is kept, new keys come last.
        assert_eq!(
            base.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["a", "arr", "s", "n", "gone", "new"]
        );
        let mut scalar = json!(1);
        deep_merge(&mut scalar, json!({"a": 1}));
        assert_eq!(scalar, json!({"a": 1}));
    }

    #[test]
    fn broken_fixture_names_file_and_line() {
        let path = data("broken_config.json");
        let err = load_with(Some(&path), &host()).unwrap_err();
        match &err {
            ConfigError::Parse {
                path: p,
                line,
                column,
                message,
            } => {
                assert_eq!(p, &path);
                assert_eq!(*line, 4);
                assert_eq!(*column, 3);
                assert!(!message.contains("at line"), "{message}");
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("at line 4 column 3"), "{text}");
    }

    #[test]
    fn missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        match load_with(Some(&missing), &host()) {
            Err(ConfigError::Read { path, source }) => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("an explicit missing path must be an error, got {other:?}"),
        }
        let dir_err = load_with(Some(dir.path()), &host()).unwrap_err();
        assert!(matches!(dir_err, ConfigError::Read { .. }), "{dir_err:?}");
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
    fn unknown_keys_are_ignored_and_named() {
        let config = from(json!({"theme": "dark", "mcp": {"extra": 1}})).unwrap();
        assert_eq!(config.servers["google"].command, "uvx");
        let user = json!({"theme": "dark", "logLevel": "x", "servers": {}, "zzz": 1});
        assert_eq!(
            unknown_keys(user.as_object().unwrap(), TOP_LEVEL_KEYS, ""),
            ["theme", "zzz"]
        );
        let server = json!({"command": "c", "comand": "typo", "maxConcurrent": 1});
        assert_eq!(
            unknown_keys(server.as_object().unwrap(), SERVER_KEYS, "servers.g."),
            ["servers.g.comand"]
        );
    }

    #[test]
    fn claude_json_top_level_entry() {
        let server = server_with(claude("workspace"), &[]);
        let creds = server.resolve_credentials().unwrap().unwrap();
        assert_eq!(creds.client_id, "top-level-id.apps.googleusercontent.com");
        assert_eq!(creds.client_secret, "GOCSPX-top-level-fake");
    }

    #[test]
    fn claude_json_project_entry() {
        let server = server_with(claude("coogle"), &[]);
        let creds = server.resolve_credentials().unwrap().unwrap();
        assert_eq!(creds.client_id, "project-id.apps.googleusercontent.com");
        assert_eq!(creds.client_secret, "GOCSPX-project-fake");
    }

    #[test]
    fn claude_json_top_level_wins_over_projects() {
        let root = json!({
            "projects": {"/p": {"mcpServers": {"x": {"env": {
                "GOOGLE_OAUTH_CLIENT_ID": "project", "GOOGLE_OAUTH_CLIENT_SECRET": "ps"}}}}},
            "mcpServers": {"x": {"env": {
                "GOOGLE_OAUTH_CLIENT_ID": "top", "GOOGLE_OAUTH_CLIENT_SECRET": "ts"}}},
        });
        assert_eq!(
            claude_json_credentials(&root, "x").unwrap().client_id,
            "top"
        );
        let first_project = json!({"projects": {
            "/a": {"mcpServers": {"x": {"env": {"GOOGLE_OAUTH_CLIENT_ID": "a", "GOOGLE_OAUTH_CLIENT_SECRET": "as"}}}},
            "/b": {"mcpServers": {"x": {"env": {"GOOGLE_OAUTH_CLIENT_ID": "b", "GOOGLE_OAUTH_CLIENT_SECRET": "bs"}}}},
        }});
        assert_eq!(
            claude_json_credentials(&first_project, "x")
                .unwrap()
                .client_id,
            "a"
        );
    }

    #[test]
    fn claude_json_missing_server() {
        let server = server_with(claude("nope"), &[]);
        let err = server.resolve_credentials().unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ConfigError::NoCredentials { .. }), "{err:?}");
        assert!(
            text.starts_with("no credentials for server google: "),
            "{text}"
        );
        assert!(
            text.contains(&data("claude.json").display().to_string()),
            "{text}"
        );
        assert!(
            text.contains("has no mcpServers entry named \"nope\" with GOOGLE_OAUTH_CLIENT_ID and GOOGLE_OAUTH_CLIENT_SECRET"),
            "{text}"
        );
    }

    #[test]
    fn claude_json_missing_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claude.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {"coogle": {"env": {"GOOGLE_OAUTH_CLIENT_ID": "only-the-id"}}}}"#,
        )
        .unwrap();
        let server = server_with(
            CredentialsConfig::ClaudeJson {
                path: path.clone(),
                server_name: "coogle".into(),
            },
            &[],
        );
        let text = server.resolve_credentials().unwrap_err().to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(
            text.contains("mcpServers.coogle.env lacks GOOGLE_OAUTH_CLIENT_SECRET"),
            "{text}"
        );
        assert!(!text.contains("only-the-id"), "{text}");
    }

    #[test]
    fn claude_json_missing_file_is_strict_error_but_child_env_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        let server = server_with(
            CredentialsConfig::ClaudeJson {
                path: dir.path().join("absent.json"),
                server_name: "coogle".into(),
            },
            &[("A", "1")],
        );
        let err = server.resolve_credentials().unwrap_err();
        assert!(err.to_string().contains("could not read"), "{err}");
        assert_eq!(
            server.child_env().unwrap(),
            [("A".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn corrupt_claude_json_is_an_error_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claude.json");
        std::fs::write(
            &path,
            "{\n  \"mcpServers\": {\n    \"coogle\": {\"env\": {\"GOOGLE_OAUTH_CLIENT_SECRET\": \"s3cret\"}}\n  },,\n}\n",
        )
        .unwrap();
        let server = server_with(
            CredentialsConfig::ClaudeJson {
                path: path.clone(),
                server_name: "coogle".into(),
            },
            &[],
        );
        for err in [
            server.resolve_credentials().unwrap_err(),
            server.child_env().unwrap_err(),
        ] {
            match &err {
                ConfigError::Parse { path: p, line, .. } => {
                    assert_eq!(p, &path);
                    assert_eq!(*line, 4);
                }
                other => panic!("expected a parse error, got {other:?}"),
            }
            assert!(!err.to_string().contains("s3cret"));
            assert!(!format!("{err:?}").contains("s3cret"));
        }
    }

    #[test]
    fn child_env_falls_back_when_entry_missing() {
        let server = server_with(claude("nope"), &[("A", "1"), ("B", "2")]);
        assert_eq!(
            server.child_env().unwrap(),
            [
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "2".to_owned())
            ]
        );
    }

    #[test]
    fn child_env_order_and_override() {
        let server = server_with(
            claude("workspace"),
            &[
                ("A", "1"),
                ("GOOGLE_OAUTH_CLIENT_ID", "from-env"),
                ("B", "2"),
                ("GOOGLE_OAUTH_CLIENT_SECRET", "from-env-secret"),
            ],
        );
        assert_eq!(
            server.child_env().unwrap(),
            [
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "2".to_owned()),
                (
                    "GOOGLE_OAUTH_CLIENT_ID".to_owned(),
                    "top-level-id.apps.googleusercontent.com".to_owned()
                ),
                (
                    "GOOGLE_OAUTH_CLIENT_SECRET".to_owned(),
                    "GOCSPX-top-level-fake".to_owned()
                ),
            ]
        );
        // Without credentials, env is passed through untouched, Google variables included.
        let none = server_with(
            CredentialsConfig::None,
            &[("GOOGLE_OAUTH_CLIENT_ID", "x"), ("A", "1")],
        );
        assert_eq!(none.resolve_credentials().unwrap(), None);
        assert_eq!(
            none.child_env().unwrap(),
            [
                ("GOOGLE_OAUTH_CLIENT_ID".to_owned(), "x".to_owned()),
                ("A".to_owned(), "1".to_owned())
            ]
        );
    }

    #[test]
    fn env_source_reads_the_daemon_environment() {
        let server = server_with(CredentialsConfig::Env, &[("A", "1")]);
        let getenv = |name: &str| match name {
            "GOOGLE_OAUTH_CLIENT_ID" => Some("env-id".to_owned()),
            "GOOGLE_OAUTH_CLIENT_SECRET" => Some("env-secret".to_owned()),
            _ => None,
        };
        let creds = server.resolve_credentials_with(getenv).unwrap().unwrap();
        assert_eq!(creds.client_id, "env-id");
        assert_eq!(creds.client_secret, "env-secret");
        assert_eq!(server.child_env_with(getenv).unwrap().len(), 3);

        let err = server.resolve_credentials_with(no_env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no credentials for server google: GOOGLE_OAUTH_CLIENT_ID is not set in coogle's environment"
        );
        assert_eq!(
            server.child_env_with(no_env).unwrap(),
            [("A".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn manual_credentials_resolve() {
        let server = server_with(
            CredentialsConfig::Manual {
                client_id: "id".into(),
                client_secret: "secret".into(),
            },
            &[],
        );
        assert_eq!(
            server.resolve_credentials_with(no_env).unwrap(),
            Some(Credentials {
                client_id: "id".into(),
                client_secret: "secret".into()
            })
        );
    }

    #[test]
    fn debug_never_shows_secrets() {
        let secret = "GOCSPX-very-secret-value-1234567890";
        let id = "123456789012-abcdefghijklmnopqrstuvwxyz012345.apps.googleusercontent.com";
        let creds = Credentials {
            client_id: id.into(),
            client_secret: secret.into(),
        };
        let shown = format!("{creds:?}");
        assert_eq!(
            shown,
            format!(
                "Credentials {{ client_id: <{} chars>, client_secret: <35 chars> }}",
                id.len()
            )
        );
        let manual = CredentialsConfig::Manual {
            client_id: id.into(),
            client_secret: secret.into(),
        };
        let shown = format!("{manual:?} {manual:#?}");
        assert!(!shown.contains(secret), "{shown}");
        assert!(!shown.contains("GOCSPX"), "{shown}");
        assert!(!shown.contains("apps.googleusercontent"), "{shown}");
        assert!(shown.starts_with("Manual { client_id: <"), "{shown}");

        // The whole loaded config, too.
        let config = load_with(Some(&data("legacy_config.json")), &host()).unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("GOCSPX-fake-secret"), "{shown}");
        assert!(shown.contains("<18 chars>"), "{shown}");
    }

    #[test]
    fn server_resolution() {
        let one = from(json!({"servers": {"search": {"command": "s"}}})).unwrap();
        assert_eq!(one.server(None).unwrap().name, "search");

        let two =
            from(json!({"servers": {"search": {"command": "s"}, "google": {"command": "g"}}}))
                .unwrap();
        assert_eq!(two.server(None).unwrap().name, "google");
        assert_eq!(two.server(Some("search")).unwrap().name, "search");
        let err = two.server(Some("x")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no upstream named \"x\"; configured: search, google"
        );

        let neither =
            from(json!({"servers": {"a": {"command": "a"}, "b": {"command": "b"}}})).unwrap();
        let err = neither.server(None).unwrap_err();
        assert!(
            matches!(err, ConfigError::NoDefaultServer { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("a, b"), "{err}");
    }

    #[test]
    fn cache_key_is_stable_and_ignores_values() {
        let base = server_with(CredentialsConfig::None, &[("A", "1"), ("B", "2")]);
        let key = base.cache_key();
        assert_eq!(key.len(), 16);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(key, base.clone().cache_key());

        let mut other_values = server_with(CredentialsConfig::Env, &[("B", "x"), ("A", "y")]);
        other_values.max_concurrent = 9;
        assert_eq!(
            other_values.cache_key(),
            key,
            "values, order and credentials do not count"
        );

        let mut changed = base.clone();
        changed.command = "uv".into();
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.args.push("--x".into());
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.env.insert("C".into(), "3".into());
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.cwd = Some(PathBuf::from("/tmp"));
        assert_ne!(changed.cache_key(), key);

        // Field boundaries matter: ["ab"] is not ["a", "b"].
        let mut split = base.clone();
        split.args = vec!["a".into(), "b".into()];
        let mut joined = base.clone();
        joined.args = vec!["ab".into()];
        assert_ne!(split.cache_key(), joined.cache_key());
    }

    #[test]
    fn fnv1a_matches_reference_vectors() {
        let mut h = Fnv1a::new();
        assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
        h.bytes(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn default_path_ends_in_coogle_config() {
        assert!(default_path().ends_with("coogle/config.json"));
    }

    #[test]
    fn server_debug_masks_env_values() {
        let config = Config::from_value(
            serde_json::json!({"servers": {"search": {
                "command": "coogle", "env": {"GEMINI_API_KEY": "AIza-very-secret-value"}
            }}}),
            None,
        )
        .unwrap();
        let text = format!("{config:?}");
        assert!(text.contains("GEMINI_API_KEY"), "{text}");
        assert!(!text.contains("very-secret"), "{text}");
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
}
