//! Configuration: finding, reading, merging and validating `config.json`, and resolving the
//! Google OAuth client credentials each upstream needs.
//!
//! This module owns the meaning of every config key. It accepts two shapes: the original
//! TypeScript coogle's flat shape (`mcp` + `credentials`, one upstream named `google`; also the
//! shape of the built-in defaults) and the native shape (`servers: {name: {...}}`). The user's
//! file is deep-merged over the defaults (objects merge, arrays and scalars replace).
//!
//! Its parts: `keys` (key lists, defaults, merge), `read` (the reader and validation),
//! `search` (the search section and upstream), `credentials` (the OAuth client and the
//! child's environment), `claude_json` (the `mcpServers` walk shared with setup),
//! `cache_key`, `types` (with their redacting `Debug`) and `global_paths`.
//!
//! It must never log or put into an error a secret value (client secrets, or any `env`
//! value), and it never writes files: `~/.claude.json` and `config.json` are only read here.

mod cache_key;
pub(crate) mod claude_json;
mod credentials;
mod global_paths;
mod keys;
mod read;
mod search;
#[cfg(test)]
mod testing;
mod types;

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::{Map, Value};

pub(crate) use credentials::{OAUTH_PREFIX, env_credentials_from};
pub use global_paths::GlobalPaths;
pub use keys::{UnknownKey, native_shape};
pub use types::{
    Config, Credentials, CredentialsConfig, SearchConfig, ServerConfig, Sharing, SignInConfig,
};

use crate::{fsutil, paths};
use keys::DEFAULT_SERVER;
use read::from_value_with;

/// Per-call timeout used when neither the server nor the top level sets `callTimeoutMs`.
const DEFAULT_CALL_TIMEOUT_MS: u64 = 120_000;
/// How long a child may sit without sessions or calls before it is stopped (`idleStopMs`).
const DEFAULT_IDLE_STOP: std::time::Duration = std::time::Duration::from_secs(600);
/// Longest JSON-RPC line accepted when `maxLineBytes` is not set.
const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// The search upstream's name, as `coogle mcp --server search` takes it.
pub(crate) const SEARCH_SERVER: &str = "search";
/// Gemini's REST endpoint.
const DEFAULT_GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Everything that can go wrong while loading the config or resolving credentials.
/// Messages name the file and the key; they never contain secret values.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The I/O error is part of the message: this error is shown on one line as often as not
    /// (doctor, a warning beside another command, a reload's answer).
    #[error("could not read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
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

impl ConfigError {
    /// How to get past it, for a `hint:` or a `fix:` line: a file that is not there cannot be
    /// fixed or moved aside.
    pub fn fix(&self) -> &'static str {
        match self {
            ConfigError::Read { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
                "create it (`coogle setup` writes one), or drop --config / COOGLE_CONFIG to use the default"
            }
            ConfigError::Read { .. } => {
                "check the file's permissions, or move it aside to use the defaults"
            }
            ConfigError::Parse { .. } | ConfigError::Invalid { .. } => {
                "fix the file, or move it aside to use the defaults"
            }
            ConfigError::NoCredentials { .. } => {
                "`coogle setup --client-id ID --client-secret-env VAR`, or `\"credentials\": {\"source\": \"none\"}` for a server that needs none"
            }
            ConfigError::UnknownServer { .. } | ConfigError::NoDefaultServer { .. } => {
                "name one of the configured servers with --server"
            }
        }
    }
}

/// `$XDG_CONFIG_HOME/coogle/config.json` when that variable is an absolute path, else
/// `$HOME/.config/coogle/config.json`.
pub fn default_path() -> PathBuf {
    paths::config_home().join("coogle").join("config.json")
}

impl Config {
    /// Load `path` (or [`default_path`] when `None`). A missing file is not an error (defaults
    /// apply, `file` is `None`) only when `path` was `None`; an explicitly given path that does
    /// not exist is an error. Unreadable, unparsable or invalid files are errors.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let home = paths::home();
        load_with(path, &Host::process(Some(&home)))
    }

    /// Interpret a user JSON value (not yet merged: this merges it over the defaults).
    pub fn from_value(user: Value, file: Option<PathBuf>) -> Result<Config, ConfigError> {
        let home = paths::home();
        from_value_with(user, file, &Host::process(Some(&home)))
    }

    /// The upstream to use. `None` picks the only server, else the one named `google`;
    /// an unknown name is an error listing the configured names.
    pub fn server(&self, name: Option<&str>) -> Result<&ServerConfig, ConfigError> {
        pick_server(&self.servers, name)
    }
}

/// The rule of [`Config::server`] over any server map, so the daemon, whose map grows on
/// `reload`, resolves names exactly as a loaded config does.
pub fn pick_server<'a>(
    servers: &'a IndexMap<String, ServerConfig>,
    name: Option<&str>,
) -> Result<&'a ServerConfig, ConfigError> {
    let configured = || servers.keys().cloned().collect::<Vec<_>>().join(", ");
    match name {
        Some(name) => servers.get(name).ok_or_else(|| ConfigError::UnknownServer {
            name: name.to_owned(),
            configured: configured(),
        }),
        None if servers.len() == 1 => Ok(&servers[0]),
        None => servers
            .get(DEFAULT_SERVER)
            .ok_or_else(|| ConfigError::NoDefaultServer {
                configured: configured(),
            }),
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
        Err(error) => return Err(ConfigError::Read { path, error }),
    };
    let user = parse_json(&text, &path)?;
    from_value_with(user, Some(path), host)
}

/// `socketPath` from the config file at `path` (default: [`default_path`]) read on its own, for
/// when the whole config does not load: a mistake elsewhere in the file must not cut new
/// sessions off a healthy daemon. `None` when the file is missing or does not parse, or has no
/// usable `socketPath`.
pub fn lenient_socket_path(path: Option<&Path>) -> Option<PathBuf> {
    let path = path.map_or_else(default_path, Path::to_path_buf);
    let text = std::fs::read(&path).ok()?;
    let value = fsutil::parse_json_bytes(&text).ok()?;
    let socket = value
        .get("socketPath")?
        .as_str()
        .filter(|s| !s.is_empty())?;
    Some(read::expand_tilde_with(socket, Some(&paths::home())))
}

/// Parse JSON text, turning a failure into [`ConfigError::Parse`] with the position.
fn parse_json(text: &str, path: &Path) -> Result<Value, ConfigError> {
    fsutil::parse_json_bytes(text.as_bytes()).map_err(|s| ConfigError::Parse {
        path: path.to_path_buf(),
        line: s.line,
        column: s.column,
        message: s.message,
    })
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use serde_json::json;
    use std::time::Duration;

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
            Err(ConfigError::Read { path, error }) => {
                assert_eq!(path, missing);
                assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("an explicit missing path must be an error, got {other:?}"),
        }
        let dir_err = load_with(Some(dir.path()), &host()).unwrap_err();
        assert!(matches!(dir_err, ConfigError::Read { .. }), "{dir_err:?}");
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
    fn socket_path_read_leniently() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        // Valid JSON, invalid config: the socket is still found, `~` expanded.
        std::fs::write(&file, r#"{"socketPath": "~/c.sock", "logLevel": 5}"#).unwrap();
        assert!(Config::load(Some(&file)).is_err());
        assert_eq!(
            lenient_socket_path(Some(&file)),
            Some(paths::home().join("c.sock"))
        );
        // Not JSON at all, or no socketPath: nothing to go on.
        assert_eq!(lenient_socket_path(Some(&data("broken_config.json"))), None);
        std::fs::write(&file, r#"{"socketPath": ""}"#).unwrap();
        assert_eq!(lenient_socket_path(Some(&file)), None);
        assert_eq!(lenient_socket_path(Some(&dir.path().join("absent"))), None);
    }

    #[test]
    fn default_path_ends_in_coogle_config() {
        assert!(default_path().ends_with("coogle/config.json"));
    }
}
