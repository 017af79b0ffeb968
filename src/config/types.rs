//! The loaded configuration's types. Their `Debug` is written by hand so that a secret (a
//! client secret, an API key, any `env` value) is shown as its length only; nothing here may
//! derive `Debug` over a secret field.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::Value;

use super::DEFAULT_GEMINI_BASE_URL;
use crate::secret::{Masked, mask};

/// The whole daemon configuration, after merging over the defaults and validating.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file that was loaded; `None` when none existed (defaults only).
    pub file: Option<PathBuf>,
    /// `socketPath`, `~` expanded; `None` means the default computed elsewhere.
    pub socket_path: Option<PathBuf>,
    /// `path`, `~` expanded: where the daemon looks for upstream commands first.
    pub search_path: Vec<PathBuf>,
    /// `logLevel`, default `"info"`.
    pub log_level: String,
    /// `maxLineBytes`, default 16 MiB.
    pub max_line_bytes: usize,
    /// `shutdownGraceMs`, default 5000.
    pub shutdown_grace_ms: u64,
    /// `maxConnections`: open connections at the most (default: what the daemon's file limit
    /// leaves room for, up to 4096).
    pub max_connections: Option<usize>,
    /// `maxInstances`, default 64: instances one server may run at once besides its shared one
    /// (one per project, session or `passEnv` values); past it an unused one is stopped, and
    /// when all are in use a new session is refused.
    pub max_instances: usize,
    /// `coogleTool`, default true: add the `coogle` tool (status, restart, async calls) to each
    /// upstream's tool list.
    pub coogle_tool: bool,
    /// The upstreams, in file order; never empty. Includes `search` (the built-in ask_google
    /// server) when a Gemini API key is found and no server of that name is configured.
    pub servers: IndexMap<String, ServerConfig>,
    /// The `search` section, read by `coogle search-server`.
    pub search: SearchConfig,
    /// Keys in the file coogle does not know (typos, most often), in file order.
    pub unknown_keys: Vec<super::UnknownKey>,
}

/// The built-in search server's settings (`search` in config.json).
#[derive(Clone, PartialEq)]
pub struct SearchConfig {
    /// `apiKey`: the Gemini API key, when written in the config (a secret: masked in Debug).
    pub api_key: Option<String>,
    /// `apiBaseUrl`, default Gemini's public endpoint; tests point it at a loopback mock.
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
/// Equality is how `reload` tells a changed server from one left as it was.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Extra environment for the child, values as written (they may be secrets: never log them).
    pub env: IndexMap<String, String>,
    /// `cwd`, `~` expanded; always absolute. The child runs there (a project's entry runs in its
    /// project, as its client runs it); without it, in the user's home, never where the daemon
    /// happened to be started.
    pub cwd: Option<PathBuf>,
    /// `envFile`: a dotenv file whose variables the child gets (Cursor's `envFile`), read at
    /// each start, under `env`; a relative one is taken from the directory the child runs in.
    pub env_file: Option<PathBuf>,
    /// `passEnv`: variables the child takes from the session's own environment (`AWS_PROFILE`,
    /// say). Sessions whose values differ get separate instances, as projects do for
    /// `per-project`; nothing else of any session's environment reaches a child.
    pub pass_env: Vec<String>,
    pub credentials: CredentialsConfig,
    /// `maxConcurrent`, default 1, at least 1.
    pub max_concurrent: usize,
    /// The server's `callTimeoutMs`, else the top-level one, else 120 s; never zero.
    pub call_timeout: Duration,
    /// `clientCapabilities` sent in `initialize`, default `{"roots": {}, "elicitation": {}}`.
    pub client_capabilities: Value,
    /// `idleStopMs` (the server's, else the top level's, else 10 minutes): the child is parked
    /// (stopped, to start again on demand) after this long with nothing in flight, nothing
    /// waiting and no live subscription or task, whether or not sessions are connected. Zero:
    /// never.
    pub idle_stop: Duration,
    /// `stateful`: the child keeps state in its process that sessions rely on (a browser's open
    /// tabs), so it is never parked while a session is connected. Default: guessed from the
    /// command line (see [`Sharing::stateful_guess`]).
    pub stateful: bool,
    /// `sharing`: who shares one child (default by the kind of server, see [`Sharing::guess`]).
    pub sharing: Sharing,
    /// `signIn`: how the server asks its user to sign in, when it does (default: see
    /// [`SignInConfig::guess`]). `None`: its answers are never read for a sign-in.
    pub sign_in: Option<SignInConfig>,
    /// The top-level `path`, for finding `command` and as the head of the child's PATH.
    pub search_path: Vec<PathBuf>,
}

/// Who shares one child of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Every session (the default).
    Shared,
    /// The sessions of one project (`CLAUDE_PROJECT_DIR`, else the client's working
    /// directory); the child runs in that directory. For servers that act on "here".
    PerProject,
    /// Each session its own child, stopped with the session. For servers that hold one user's
    /// interactive state, such as a browser.
    PerSession,
}

/// How a server asks its user to sign in, as workspace-mcp does for Google: it answers a call
/// for an account that is not signed in with a URL after a fixed text, and starts a flow that
/// another such call would only replace. The daemon then answers the calls that were already
/// waiting for that account with the same URL, and tells every session once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInConfig {
    /// `urlMarker`: the text right before the URL in the answer.
    pub url_marker: String,
    /// `accountArgument`: the call argument that names the account; without it, the server
    /// has one account.
    pub account_argument: Option<String>,
}

impl SignInConfig {
    /// workspace-mcp's (Google Workspace MCP): `Authorization URL: https://accounts.google.com/…`,
    /// for the account in `user_google_email`.
    pub fn workspace_mcp() -> SignInConfig {
        SignInConfig {
            url_marker: "Authorization URL:".to_owned(),
            account_argument: Some("user_google_email".to_owned()),
        }
    }

    /// The default for a server: workspace-mcp's way for the built-in `google` server (named
    /// `default_server`) and for any server whose command line runs workspace-mcp; none for
    /// every other, whose answers may say anything.
    pub fn guess(
        name: &str,
        default_server: &str,
        command: &str,
        args: &[String],
    ) -> Option<SignInConfig> {
        (name == default_server || command_line(command, args).contains("workspace-mcp"))
            .then(SignInConfig::workspace_mcp)
    }
}

/// What a command line's words say it runs: browser automation.
const BROWSERS: [&str; 6] = [
    "playwright",
    "puppeteer",
    "chrome-devtools",
    "browser",
    "selenium",
    "chrome-mcp",
];

/// A command line in lower case, to guess by.
fn command_line(command: &str, args: &[String]) -> String {
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

impl Sharing {
    pub fn parse(s: &str) -> Option<Sharing> {
        match s {
            "shared" => Some(Sharing::Shared),
            "per-project" => Some(Sharing::PerProject),
            "per-session" => Some(Sharing::PerSession),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Shared => "shared",
            Sharing::PerProject => "per-project",
            Sharing::PerSession => "per-session",
        }
    }

    /// Whether a server keeps interactive state in its process, by what it is: browser
    /// automation (open tabs, logins) does.
    pub fn stateful_guess(command: &str, args: &[String]) -> bool {
        let line = command_line(command, args);
        BROWSERS.iter().any(|k| line.contains(k))
    }

    /// The default for a server, by what it is: browser automation keeps one user's
    /// interactive state (per session); filesystem and git servers act on a directory (per
    /// project); everything else is shared.
    pub fn guess(command: &str, args: &[String]) -> Sharing {
        let line = command_line(command, args);
        const PER_PROJECT: [&str; 4] = [
            "server-filesystem",
            "filesystem",
            "mcp-server-git",
            "server-git",
        ];
        if Sharing::stateful_guess(command, args) {
            Sharing::PerSession
        } else if PER_PROJECT.iter().any(|k| line.contains(k)) {
            Sharing::PerProject
        } else {
            Sharing::Shared
        }
    }
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
            .field("env_file", &self.env_file)
            .field("pass_env", &self.pass_env)
            .field("credentials", &self.credentials)
            .field("max_concurrent", &self.max_concurrent)
            .field("call_timeout", &self.call_timeout)
            .field("client_capabilities", &self.client_capabilities)
            .field("sign_in", &self.sign_in)
            .field("search_path", &self.search_path)
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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::config::{Config, load_with};

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
}
