//! The installer commands' options, as clap parses them: `setup`, `doctor` and `uninstall`.
//! Only declarations live here; what each option does is decided by the command.

use std::path::PathBuf;

use super::client_config::ClientKind;

/// Where the daemon's OAuth client comes from, as `setup --credentials-source` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CredentialsSource {
    /// Flags, then what config.json already has, then ~/.claude.json, then the environment,
    /// then a prompt; what is found is written into config.json (mode 0600)
    Auto,
    /// Copy the client from ~/.claude.json into config.json (setup removes it from the entry)
    ClaudeJson,
    /// The daemon reads GOOGLE_OAUTH_CLIENT_ID/SECRET from its own environment
    Env,
    /// From --client-id and --client-secret-env (or prompts), written into config.json
    Manual,
    /// The upstream needs no Google OAuth client
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientChoice {
    ClaudeCode,
    ClaudeDesktop,
    Cursor,
    All,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SetupArgs {
    /// Do not ask: take every answer from the flags and defaults (for scripts and CI)
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The Google OAuth client id
    #[arg(long, value_name = "ID")]
    pub client_id: Option<String>,
    /// Read the Google OAuth client secret from this environment variable (never from argv)
    #[arg(long, value_name = "VAR")]
    pub client_secret_env: Option<String>,
    /// Where the daemon gets the Google OAuth client
    #[arg(long, value_enum, default_value_t = CredentialsSource::Auto)]
    pub credentials_source: CredentialsSource,
    /// Which MCP clients to point at coogle (repeatable; default: claude-code)
    #[arg(long, value_enum)]
    pub client: Vec<ClientChoice>,
    /// Do not change any client config
    #[arg(long)]
    pub no_client: bool,
    /// Do not install the service (the daemon then starts on demand with `coogle mcp`)
    #[arg(long)]
    pub no_service: bool,
    #[command(flatten)]
    pub files: ClientFiles,
    /// Skip the throwaway test daemon
    #[arg(long)]
    pub skip_test: bool,
    /// Skip running the patched client entry to list tools
    #[arg(long)]
    pub skip_verify: bool,
    /// Set up the ask_google search server (needs a Gemini API key: GOOGLE_API_KEY or
    /// GEMINI_API_KEY, config.json, a .env file, --api-key-env, or a prompt)
    #[arg(long, conflicts_with = "no_search")]
    pub search: bool,
    /// Do not set up the search server, even when an API key is found
    #[arg(long)]
    pub no_search: bool,
    /// Read the Gemini API key from this environment variable (never from argv)
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Patch ~/.claude.json directly even when Claude Code's `claude` CLI is on PATH (by
    /// default user-scope entries are registered with `claude mcp add-json`)
    #[arg(long)]
    pub no_claude_cli: bool,
    /// Also share every other stdio MCP server of the chosen clients (`coogle share --all`);
    /// without it, `--yes` leaves them alone and the wizard asks
    #[arg(long)]
    pub share_all: bool,
}

/// Where the clients keep their configs, when not where they usually do (setup and share).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientFiles {
    /// Claude Code's config (default ~/.claude.json)
    #[arg(long, value_name = "PATH")]
    pub claude_json: Option<PathBuf>,
    /// Claude Desktop's claude_desktop_config.json (default: where Claude Desktop keeps it)
    #[arg(long, value_name = "PATH")]
    pub desktop_config: Option<PathBuf>,
    /// Cursor's mcp.json (default ~/.cursor/mcp.json)
    #[arg(long, value_name = "PATH")]
    pub cursor_config: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ShareArgs {
    /// The entries to share, by name (in any client and project); default: ask
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Share every stdio server entry
    #[arg(long, conflicts_with = "names")]
    pub all: bool,
    /// Do not ask: share the named entries, or all of them when none is named
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Show what would be shared, change nothing
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub files: ClientFiles,
    /// Patch ~/.claude.json directly even when Claude Code's `claude` CLI is on PATH
    #[arg(long)]
    pub no_claude_cli: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct UnshareArgs {
    /// The shared servers to give back, by upstream or entry name; default: ask
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Give back every shared entry
    #[arg(long, conflicts_with = "names")]
    pub all: bool,
    /// Do not ask: the named ones, or all when none is named
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Show what would be given back, change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Claude Code's config (default ~/.claude.json)
    #[arg(long, value_name = "PATH")]
    pub claude_json: Option<PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct UninstallArgs {
    /// Do not ask for confirmation
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Also remove coogle's config.json
    #[arg(long)]
    pub remove_config: bool,
    /// Leave the service installed (and its daemon running)
    #[arg(long)]
    pub keep_service: bool,
    /// Go on while agent sessions use the daemon, ending their coogle connections
    #[arg(long)]
    pub force: bool,
    /// Also remove what coogle leaves: the backups it took, its cache, its logs, and the
    /// directories setup created for the service when they are empty
    #[arg(long)]
    pub purge: bool,
    /// Show what would be undone and removed, change nothing
    #[arg(long)]
    pub dry_run: bool,
}

impl From<ClientKind> for ClientChoice {
    fn from(kind: ClientKind) -> Self {
        match kind {
            ClientKind::ClaudeCode => ClientChoice::ClaudeCode,
            ClientKind::ClaudeDesktop => ClientChoice::ClaudeDesktop,
            ClientKind::Cursor => ClientChoice::Cursor,
        }
    }
}
