//! The installer side of coogle: `setup` (environment, credentials, config, a test daemon, the
//! service, client configs, verification, summary), `doctor`, `uninstall`, `generate-plist`
//! and `generate-unit`.
//!
//! Every file the user owns is written through [`fsutil`] (backup, temp file, fsync, re-read,
//! rename, mode kept) and never when it did not parse. Whatever setup changes in a client
//! config is recorded in a state file beside config.json, so `uninstall` can undo exactly that
//! and nothing else. Secrets are shown masked ([`crate::config::mask`]) and never logged.
//! Nothing here runs in `coogle mcp`.

pub mod claude_cli;
pub mod claude_config;
pub mod doctor;
pub mod service;
mod ui;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::claude_json::{CLIENT_ID_VAR, CLIENT_SECRET_VAR};
use crate::config::{self, Config, Credentials, GlobalPaths};
use crate::fsutil::{self, FsError, Mode, Written};
use crate::installed::stable_exe;
use crate::output::{self, ExitCode};
use crate::secret::{self as search, mask};
use crate::service_manager::ManagerState;
use crate::{client, wire};
use claude_config::{Change, ClientKind, Shim, Upstream};
use ui::Ui;

const STEPS: u32 = 8;
/// How long the test daemon may take to list its tools (a cold `uvx` download is slow).
const TEST_TIMEOUT: Duration = Duration::from_secs(90);

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
    /// Claude Code's config (default ~/.claude.json)
    #[arg(long, value_name = "PATH")]
    pub claude_json: Option<PathBuf>,
    /// Claude Desktop's claude_desktop_config.json (default: where Claude Desktop keeps it)
    #[arg(long, value_name = "PATH")]
    pub desktop_config: Option<PathBuf>,
    /// Cursor's mcp.json (default ~/.cursor/mcp.json)
    #[arg(long, value_name = "PATH")]
    pub cursor_config: Option<PathBuf>,
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
    /// Leave the service installed
    #[arg(long)]
    pub keep_service: bool,
}

/// `coogle generate-plist`: the LaunchAgent setup would install, on stdout.
pub fn generate_plist(paths: &GlobalPaths) -> ExitCode {
    let xml = service::plist_xml(&service_spec(paths));
    output::out(&String::from_utf8_lossy(&xml));
    ExitCode::Success
}

/// `coogle generate-unit`: the systemd user unit setup would install, on stdout.
pub fn generate_unit(paths: &GlobalPaths) -> ExitCode {
    output::out(&service::unit(&service_spec(paths)));
    ExitCode::Success
}

/// PATH for the service: this shell's PATH, with the directories of uvx and npx first when
/// they are not in it (launchd and systemd start services with a minimal PATH).
fn service_path_env() -> String {
    let current = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let mut dirs: Vec<String> = Vec::new();
    for program in ["uvx", "npx", "node"] {
        if let Ok(p) = which::which(program)
            && let Some(dir) = p.parent().map(|d| d.to_string_lossy().into_owned())
            && !current.split(':').any(|d| d == dir)
            && !dirs.contains(&dir)
        {
            dirs.push(dir);
        }
    }
    dirs.push(current);
    dirs.join(":")
}

fn service_spec(paths: &GlobalPaths) -> service::ServiceSpec {
    let (config, socket) = paths.non_default();
    service::ServiceSpec {
        exe: stable_exe().path,
        config,
        socket,
        path_env: service_path_env(),
    }
}

/// The client entry for `upstream`: this binary's stable path, `mcp`, and the options that
/// lead it to this invocation's config and socket.
pub fn shim_for(paths: &GlobalPaths, upstream: Upstream) -> Shim {
    let (config, socket) = paths.non_default();
    let mut shim = Shim::new(upstream, &stable_exe().path);
    for (flag, value) in [("--config", config), ("--socket", socket)] {
        if let Some(v) = value {
            shim.options.push(flag.to_owned());
            shim.options.push(v.to_string_lossy().into_owned());
        }
    }
    shim
}

// ---------------------------------------------------------------------------------------------
// The state file: what setup changed, so uninstall can undo exactly that.

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    #[serde(default)]
    pub clients: Vec<ClientState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientState {
    pub kind: ClientKind,
    pub path: PathBuf,
    /// Backups taken before each change, oldest first.
    #[serde(default)]
    pub backups: Vec<PathBuf>,
    pub changes: Vec<Change>,
}

/// `setup-state.json` beside the default config.json.
pub fn state_path() -> PathBuf {
    config::default_path().with_file_name("setup-state.json")
}

pub fn load_state() -> Result<State, FsError> {
    let path = state_path();
    match fsutil::read_optional(&path)? {
        None => Ok(State::default()),
        Some(bytes) => {
            let v = fsutil::parse_json(&bytes, &path)?;
            serde_json::from_value(v).map_err(|e| FsError::Refused {
                path,
                detail: format!("not a coogle setup state: {e}"),
            })
        }
    }
}

/// The state holds original entries, which may hold secrets: 0600.
fn save_state(state: &State) -> Result<(), FsError> {
    let path = state_path();
    if state.clients.is_empty() && state.service.is_none() {
        fsutil::remove_optional(&path)?;
        return Ok(());
    }
    let value = serde_json::to_value(state).unwrap_or(Value::Null);
    fsutil::write_own(&path, &fsutil::to_json_bytes(&value), 0o600)
}

// ---------------------------------------------------------------------------------------------
// setup

/// What credentials step decided for config.json.
enum CredChoice {
    /// config.json already resolves credentials that do not depend on a client entry.
    Keep,
    Manual(Credentials),
    Env,
    None,
}

pub fn setup(paths: &GlobalPaths, args: &SetupArgs) -> ExitCode {
    let interactive = !args.yes;
    if interactive && !ui::has_terminal() {
        output::error_text(
            "coogle setup asks questions and needs a terminal",
            Some(
                "run `coogle setup --yes` with flags for scripts and CI (see `coogle setup --help`)",
            ),
        );
        return ExitCode::Usage;
    }
    let ui = Ui { interactive };
    let mut failed = false;
    let mut summary: Vec<String> = Vec::new();
    let claude_json = args
        .claude_json
        .clone()
        .unwrap_or_else(|| ClientKind::ClaudeCode.default_path());

    // 1. Environment
    ui.step(1, STEPS, "Environment");
    let stable = stable_exe();
    let exe = stable.path;
    if stable.homebrew_opt {
        ui.ok(&format!(
            "coogle {} at {} (Homebrew's stable opt link)",
            wire::VERSION,
            exe.display()
        ));
    } else {
        ui.ok(&format!("coogle {} at {}", wire::VERSION, exe.display()));
    }
    for (program, hint) in [
        (
            "uvx",
            "install uv (it provides uvx): `curl -LsSf https://astral.sh/uv/install.sh | sh` or `brew install uv`",
        ),
        (
            "node",
            "only needed for npm-based MCP servers: install Node.js (`brew install node`)",
        ),
        ("npx", "comes with Node.js"),
    ] {
        match which::which(program) {
            Ok(path) => {
                let version =
                    crate::process::run_bounded(&path, &["--version"], Duration::from_secs(15))
                        .ok()
                        .and_then(|v| v.lines().next().map(str::to_owned))
                        .unwrap_or_else(|| "version unknown".into());
                ui.ok(&format!("{program} {version} at {}", path.display()));
            }
            Err(_) => {
                ui.warn(&format!("{program} not found on PATH"));
                ui.info(&format!("hint: {hint}"));
            }
        }
    }
    ui.ok(&format!(
        "platform {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));

    // 2. Credentials
    ui.step(2, STEPS, "Google OAuth client");
    let cfg_path = paths.config_file();
    let creds = match credentials_step(&ui, args, &cfg_path, &claude_json) {
        Ok(c) => c,
        Err(message) => {
            ui.fail(&message);
            output::error_text(
                &message,
                Some(
                    "pass --client-id ID --client-secret-env VAR, or --credentials-source env|none",
                ),
            );
            return ExitCode::Usage;
        }
    };

    let search_key = match search_step(&ui, args, &cfg_path) {
        Ok(k) => k,
        Err(message) => {
            ui.fail(&message);
            output::error_text(
                &message,
                Some("pass --api-key-env VAR with the key in VAR, or --no-search"),
            );
            return ExitCode::Usage;
        }
    };

    // 3. Write config
    ui.step(3, STEPS, "Config");
    let upstream = upstream_from_client(&cfg_path, &claude_json);
    if let Some((from, block)) = &upstream {
        ui.ok(&format!(
            "upstream: {} (as {from} ran it; its other env kept: {})",
            command_line(block),
            env_names(block)
        ));
    }
    match write_config(
        &cfg_path,
        &creds,
        upstream.map(|(_, b)| b),
        search_key.as_deref(),
    ) {
        Ok(Written::Unchanged) => match fsutil::tighten(&cfg_path, 0o600) {
            Ok(true) => ui.ok(&format!(
                "{} is up to date; restricted it to mode 0600",
                cfg_path.display()
            )),
            Ok(false) => ui.ok(&format!("{} is up to date", cfg_path.display())),
            Err(e) => ui.warn(&e.to_string()),
        },
        Ok(w) => {
            ui.ok(&format!("wrote {} (mode 0600)", cfg_path.display()));
            if let Written::Replaced { backup } = &w {
                ui.info(&format!("backup: {}", backup.display()));
                summary.push(format!(
                    "config {} (backup {})",
                    cfg_path.display(),
                    backup.display()
                ));
            } else {
                summary.push(format!("config {}", cfg_path.display()));
            }
        }
        Err(e) => {
            ui.fail(&e.to_string());
            output::error(&e, Some("fix or move the file aside, then run setup again"));
            return ExitCode::Failure;
        }
    }

    // 4. Test daemon
    ui.step(4, STEPS, "Test daemon");
    if args.skip_test {
        ui.warn("skipped (--skip-test)");
    } else {
        match test_daemon(&ui, &cfg_path) {
            Ok(report) => {
                let listed: Vec<String> = report
                    .tools
                    .iter()
                    .map(|(name, n)| format!("{n} from {name}"))
                    .collect();
                ui.ok(&format!(
                    "a throwaway daemon started and listed {} tools ({})",
                    report.tools.iter().map(|(_, n)| n).sum::<usize>(),
                    listed.join(", ")
                ));
                for (name, state) in &report.upstreams {
                    ui.info(&format!("upstream {name}: {state}"));
                }
            }
            Err(e) => {
                ui.fail(&format!("the test daemon did not work: {e}"));
                if !ui.confirm("Continue anyway?", false) {
                    output::error_text(
                        &format!("the test daemon did not work: {e}"),
                        Some(
                            "see the messages above; `coogle serve --log-stderr` shows the daemon's log; --skip-test skips this step",
                        ),
                    );
                    return ExitCode::Failure;
                }
                failed = true;
            }
        }
    }

    let mut state = match load_state() {
        Ok(s) => s,
        Err(e) => {
            ui.warn(&format!("{e}; starting a new record"));
            State::default()
        }
    };

    // 5. Service
    ui.step(5, STEPS, "Service");
    let want_service = !args.no_service
        && ui.confirm(
            "Install the service so the daemon starts when you log in?",
            true,
        );
    if !want_service {
        ui.warn("not installed: `coogle mcp` starts the daemon on demand");
    } else {
        match service::install(&service_spec(paths)) {
            Ok(inst) => {
                match &inst.written {
                    Written::Unchanged => ui.ok(&format!("{} is up to date", inst.path.display())),
                    _ => ui.ok(&format!("wrote {}", inst.path.display())),
                }
                if inst.written != Written::Unchanged {
                    summary.push(format!("service {}", inst.path.display()));
                }
                state.service = Some(inst.path.clone());
                if matches!(creds, CredChoice::Env) {
                    ui.warn(
                        "the service starts the daemon without this shell's environment: it will not see GOOGLE_OAUTH_CLIENT_ID/SECRET",
                    );
                    ui.info("hint: `coogle setup --credentials-source manual` writes them into config.json (mode 0600)");
                }
                match inst.manager {
                    ManagerState::Started => ui.ok("enabled and started"),
                    ManagerState::Unavailable(why) => {
                        let manager = if cfg!(target_os = "macos") {
                            "launchd"
                        } else {
                            "a systemd user manager"
                        };
                        ui.warn(&format!(
                            "{manager} is not available here ({why}); the service file is written but not enabled"
                        ));
                        ui.info(
                            "the daemon still starts on demand with `coogle mcp`; once systemd runs: `systemctl --user enable --now coogle.service`",
                        );
                    }
                    ManagerState::Failed(why) => {
                        ui.fail(&format!("the service manager refused: {why}"));
                        failed = true;
                    }
                }
            }
            Err(e) => {
                ui.fail(&e.to_string());
                failed = true;
            }
        }
    }
    if let Err(e) = save_state(&state) {
        ui.warn(&format!("could not record the setup state: {e}"));
    }

    // 6. Client configs
    ui.step(6, STEPS, "Client configs");
    let mut verify_entry: Option<Value> = None;
    let shim = shim_for(paths, Upstream::Google);
    let search_shim = shim_for(paths, Upstream::Search);
    let shims: Vec<&Shim> = if search_key.is_some() {
        vec![&shim, &search_shim]
    } else {
        vec![&shim]
    };
    if args.no_client {
        ui.warn("skipped (--no-client)");
    } else {
        for (kind, path) in chosen_clients(&ui, args, &claude_json) {
            if kind != ClientKind::ClaudeCode
                && !path.exists()
                && !path.parent().is_some_and(Path::is_dir)
            {
                ui.warn(&format!(
                    "{}: {} does not exist (not installed?); skipped",
                    kind.label(),
                    path.display()
                ));
                continue;
            }
            let cli = (kind == ClientKind::ClaudeCode
                && !args.no_claude_cli
                && args.claude_json.is_none())
            .then(claude_cli::ClaudeCli::find)
            .flatten();
            for shim in &shims {
                let patched = match &cli {
                    Some(cli) => claude_cli::patch(&path, shim, cli),
                    None => claude_config::patch_file(&path, kind, shim),
                };
                match patched {
                    Ok(p) => {
                        report_patch(&ui, kind, &p, &mut summary);
                        if shim.upstream == Upstream::Google
                            && (kind == ClientKind::ClaudeCode || verify_entry.is_none())
                        {
                            verify_entry = Some(shim.entry(kind));
                        }
                        if !p.changes.is_empty() {
                            record(&mut state, kind, &p);
                            if let Err(e) = save_state(&state) {
                                ui.warn(&format!("could not record the change: {e}"));
                            }
                        }
                    }
                    Err(e) => {
                        ui.fail(&format!("{}: {e}", kind.label()));
                        if matches!(e, FsError::Parse { .. } | FsError::NotAnObject { .. }) {
                            ui.info("hint: fix the file (or restore a backup), then run `coogle setup` again");
                        }
                        failed = true;
                        break;
                    }
                }
            }
        }
    }

    // 7. Verify
    ui.step(7, STEPS, "Verify");
    match (&verify_entry, args.skip_verify) {
        (_, true) => ui.warn("skipped (--skip-verify)"),
        (None, _) => ui.warn("no client entry to run"),
        (Some(entry), false) => match verify(&ui, entry) {
            Ok(n) => ui.ok(&format!(
                "the client entry `{} mcp` answered with {n} tools",
                exe.display()
            )),
            Err(e) => {
                ui.fail(&format!("running the client entry failed: {e}"));
                failed = true;
            }
        },
    }

    // 8. Done
    ui.step(8, STEPS, "Done");
    if summary.is_empty() {
        ui.ok("nothing needed changing: coogle was already set up");
    } else {
        for s in &summary {
            ui.ok(&format!("changed: {s}"));
        }
    }
    ui.line("\nNext:");
    ui.line("  restart Claude Code (or run /mcp) so it starts `coogle mcp`");
    ui.line("  coogle status    the daemon, its upstream and sessions");
    ui.line("  coogle tools     the tools an agent sees");
    ui.line("  coogle doctor    check everything");
    if failed {
        ExitCode::Failure
    } else {
        ExitCode::Success
    }
}

fn report_patch(ui: &Ui, kind: ClientKind, p: &claude_config::Patched, summary: &mut Vec<String>) {
    if p.via_claude_cli {
        ui.ok(&format!(
            "{}: registered through `claude mcp add-json --scope user`",
            kind.label()
        ));
    }
    if let Some(e) = &p.cli_error {
        ui.warn(&format!(
            "{}: the claude CLI did not do it ({e}); patched the file directly",
            kind.label()
        ));
    }
    match &p.written {
        Written::Unchanged => ui.ok(&format!(
            "{}: {} already points at coogle",
            kind.label(),
            p.path.display()
        )),
        w => {
            for c in &p.changes {
                let what = claude_config::describe(&c.location);
                if c.original.is_some() {
                    ui.ok(&format!("{}: replaced {what} with coogle", kind.label()));
                } else {
                    ui.ok(&format!("{}: added {what}", kind.label()));
                }
            }
            match w {
                Written::Replaced { backup } => {
                    ui.info(&format!("backup: {}", backup.display()));
                    summary.push(format!(
                        "{} {} (backup {})",
                        kind.label(),
                        p.path.display(),
                        backup.display()
                    ));
                }
                _ => summary.push(format!("{} {} (new file)", kind.label(), p.path.display())),
            }
        }
    }
}

fn record(state: &mut State, kind: ClientKind, p: &claude_config::Patched) {
    let idx = match state.clients.iter().position(|c| c.path == p.path) {
        Some(i) => i,
        None => {
            state.clients.push(ClientState {
                kind,
                path: p.path.clone(),
                backups: Vec::new(),
                changes: Vec::new(),
            });
            state.clients.len() - 1
        }
    };
    let entry = &mut state.clients[idx];
    if let Written::Replaced { backup } = &p.written {
        entry.backups.push(backup.clone());
    }
    entry.changes.extend(p.changes.iter().cloned());
}

fn chosen_clients(ui: &Ui, args: &SetupArgs, claude_json: &Path) -> Vec<(ClientKind, PathBuf)> {
    let path_for = |kind: ClientKind| match kind {
        ClientKind::ClaudeCode => claude_json.to_path_buf(),
        ClientKind::ClaudeDesktop => args
            .desktop_config
            .clone()
            .unwrap_or_else(|| kind.default_path()),
        ClientKind::Cursor => args
            .cursor_config
            .clone()
            .unwrap_or_else(|| kind.default_path()),
    };
    let kinds: Vec<ClientKind> = if !args.client.is_empty() {
        if args.client.contains(&ClientChoice::All) {
            ClientKind::ALL.to_vec()
        } else {
            ClientKind::ALL
                .into_iter()
                .filter(|k| {
                    args.client.contains(&match k {
                        ClientKind::ClaudeCode => ClientChoice::ClaudeCode,
                        ClientKind::ClaudeDesktop => ClientChoice::ClaudeDesktop,
                        ClientKind::Cursor => ClientChoice::Cursor,
                    })
                })
                .collect()
        }
    } else if ui.interactive {
        let items: Vec<String> = ClientKind::ALL
            .iter()
            .map(|k| format!("{} ({})", k.label(), path_for(*k).display()))
            .collect();
        let defaults: Vec<bool> = ClientKind::ALL
            .iter()
            .map(|k| *k == ClientKind::ClaudeCode || path_for(*k).exists())
            .collect();
        ui.multi_select("Point these clients at coogle", &items, &defaults)
            .into_iter()
            .map(|i| ClientKind::ALL[i])
            .collect()
    } else {
        vec![ClientKind::ClaudeCode]
    };
    kinds.into_iter().map(|k| (k, path_for(k))).collect()
}

fn show_credentials(ui: &Ui, c: &Credentials, from: &str) {
    ui.ok(&format!(
        "client id {}, secret {} ({from})",
        mask(&c.client_id),
        mask(&c.client_secret)
    ));
}

fn secret_from_env(args: &SetupArgs) -> Result<Option<String>, String> {
    match &args.client_secret_env {
        None => Ok(None),
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_owned())),
            _ => Err(format!(
                "--client-secret-env names {var}, but {var} is not set"
            )),
        },
    }
}

fn credentials_step(
    ui: &Ui,
    args: &SetupArgs,
    cfg_path: &Path,
    claude_json: &Path,
) -> Result<CredChoice, String> {
    let from_flags = || -> Result<Option<Credentials>, String> {
        let secret = secret_from_env(args)?;
        match (&args.client_id, secret) {
            (Some(id), Some(secret)) => Ok(Some(Credentials {
                client_id: id.clone(),
                client_secret: secret,
            })),
            (None, None) => Ok(None),
            _ => Err("--client-id and --client-secret-env go together".into()),
        }
    };
    let from_claude = || -> Option<(String, Credentials)> {
        let bytes = std::fs::read(claude_json).ok()?;
        let doc: Value = serde_json::from_slice(&bytes).ok()?;
        claude_config::find_credentials(&doc, ClientKind::ClaudeCode)
            .map(|(at, c)| (format!("{at} in {}", claude_json.display()), c))
    };
    let from_env = || -> Option<Credentials> {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Some(Credentials {
            client_id: get(CLIENT_ID_VAR)?,
            client_secret: get(CLIENT_SECRET_VAR)?,
        })
    };
    let prompt = |ui: &Ui| -> Result<CredChoice, String> {
        ui.info("Create an OAuth client (Desktop app) at https://console.cloud.google.com/apis/credentials");
        let id = ui.input("Google OAuth client id").unwrap_or_default();
        if id.is_empty() {
            ui.warn("no client id: the upstream gets no Google OAuth client");
            return Ok(CredChoice::None);
        }
        let secret = ui
            .password("Google OAuth client secret")
            .unwrap_or_default();
        if secret.is_empty() {
            return Err("a client id needs its secret".into());
        }
        let c = Credentials {
            client_id: id,
            client_secret: secret,
        };
        show_credentials(ui, &c, "entered");
        Ok(CredChoice::Manual(c))
    };
    match args.credentials_source {
        CredentialsSource::None => {
            ui.ok("none: the upstream gets no Google OAuth client");
            Ok(CredChoice::None)
        }
        CredentialsSource::Env => {
            match from_env() {
                Some(c) => show_credentials(ui, &c, "this shell's environment"),
                None => ui.warn(
                    "GOOGLE_OAUTH_CLIENT_ID/SECRET are not set here; the daemon must get them from its environment",
                ),
            }
            Ok(CredChoice::Env)
        }
        CredentialsSource::Manual => match from_flags()? {
            Some(c) => {
                show_credentials(ui, &c, "flags");
                Ok(CredChoice::Manual(c))
            }
            None if ui.interactive => prompt(ui),
            None => {
                Err("--credentials-source manual needs --client-id and --client-secret-env".into())
            }
        },
        CredentialsSource::ClaudeJson => match from_claude() {
            Some((from, c)) => {
                show_credentials(ui, &c, &from);
                Ok(CredChoice::Manual(c))
            }
            // A second run: the first moved the client out of ~/.claude.json into config.json.
            None if matches!(
                existing_config_credentials(ui, cfg_path),
                Some(CredChoice::Keep)
            ) =>
            {
                Ok(CredChoice::Keep)
            }
            None => Err(format!(
                "no mcpServers entry with GOOGLE_OAUTH_CLIENT_ID and GOOGLE_OAUTH_CLIENT_SECRET in {}",
                claude_json.display()
            )),
        },
        CredentialsSource::Auto => {
            if let Some(c) = from_flags()? {
                show_credentials(ui, &c, "flags");
                return Ok(CredChoice::Manual(c));
            }
            if let Some(choice) = existing_config_credentials(ui, cfg_path) {
                return Ok(choice);
            }
            if let Some((from, c)) = from_claude() {
                show_credentials(ui, &c, &from);
                if ui.confirm("Use this OAuth client?", true) {
                    return Ok(CredChoice::Manual(c));
                }
                return prompt(ui);
            }
            if let Some(c) = from_env() {
                show_credentials(ui, &c, "GOOGLE_OAUTH_CLIENT_ID/SECRET in this environment");
                return Ok(CredChoice::Manual(c));
            }
            if ui.interactive {
                ui.warn(&format!(
                    "no Google OAuth client found in {} or the environment",
                    claude_json.display()
                ));
                return prompt(ui);
            }
            Err(format!(
                "no Google OAuth client found in config.json, {} or the environment",
                claude_json.display()
            ))
        }
    }
}

/// Whether to set up the ask_google search server, and with which Gemini API key: `None`
/// leaves it out. A key from `--api-key-env`, the environment, config.json or a `.env` file is
/// used (shown masked and checked); otherwise the wizard offers to take one. Under `--yes` the
/// search server is set up when a key is found or `--search` is given (then a key must be).
fn search_step(ui: &Ui, args: &SetupArgs, cfg_path: &Path) -> Result<Option<String>, String> {
    if args.no_search {
        return Ok(None);
    }
    ui.line("  Search server (ask_google: answers grounded in Google Search, through Gemini)");
    let found = match &args.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Some((v.trim().to_owned(), format!("${var}"))),
            _ => return Err(format!("--api-key-env names {var}, but {var} is not set")),
        },
        None => {
            let config: Option<Value> = std::fs::read(cfg_path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            search::find_key(
                &|v| std::env::var(v).ok(),
                config.as_ref(),
                &cwd,
                &crate::paths::home(),
            )
            .map(|f| (f.key, f.source.to_string()))
        }
    };
    let key = match found {
        Some((key, from)) => {
            ui.ok(&format!("Gemini API key {} ({from})", mask(&key)));
            if let Err(e) = search::check_key(&key) {
                ui.warn(&e.to_string());
                if args.search && !ui.interactive {
                    return Err(format!(
                        "{e}; the search server needs a real Gemini API key"
                    ));
                }
                if !ui.interactive {
                    ui.info("the search server is not set up (`coogle setup --search --api-key-env VAR` with a real key adds it)");
                    return Ok(None);
                }
            }
            if !ui.confirm("Set up the ask_google search server with this key?", true) {
                return Ok(None);
            }
            key
        }
        None if args.search && !ui.interactive => {
            return Err(
                "--search needs a Gemini API key: GOOGLE_API_KEY, GEMINI_API_KEY, a .env file, or --api-key-env VAR".into(),
            );
        }
        None if !ui.interactive => {
            ui.info("no Gemini API key found; not set up (`coogle setup --search --api-key-env VAR` adds it)");
            return Ok(None);
        }
        None => {
            if !ui.confirm(
                "Set up the ask_google search server? (needs a Gemini API key from https://aistudio.google.com/apikey)",
                args.search,
            ) {
                return Ok(None);
            }
            let key = ui.password("Gemini API key").unwrap_or_default();
            if key.trim().is_empty() {
                ui.warn("no key entered; the search server is not set up");
                return Ok(None);
            }
            search::check_key(&key).map_err(|e| e.to_string())?;
            ui.ok(&format!("Gemini API key {} (entered)", mask(&key)));
            key.trim().to_owned()
        }
    };
    Ok(Some(key))
}

/// Credentials config.json already provides: kept as they are, except a `claude-json`
/// source, whose values are copied in (setup removes them from the client entry).
fn existing_config_credentials(ui: &Ui, cfg_path: &Path) -> Option<CredChoice> {
    if !cfg_path.exists() {
        return None;
    }
    let config = Config::load(Some(cfg_path)).ok()?;
    let server = config.server(None).ok()?;
    match &server.credentials {
        config::CredentialsConfig::None => {
            ui.ok(&format!(
                "{} says the upstream needs no OAuth client",
                cfg_path.display()
            ));
            Some(CredChoice::Keep)
        }
        config::CredentialsConfig::ClaudeJson { .. } => {
            let c = server.resolve_credentials().ok().flatten()?;
            show_credentials(
                ui,
                &c,
                "config.json, via ~/.claude.json; copied into config.json",
            );
            Some(CredChoice::Manual(c))
        }
        config::CredentialsConfig::Env => {
            match server.resolve_credentials().ok().flatten() {
                Some(c) => show_credentials(ui, &c, "the environment, as config.json says"),
                None => ui.warn(
                    "config.json takes the OAuth client from the daemon's environment; GOOGLE_OAUTH_CLIENT_ID/SECRET are not set in this shell",
                ),
            }
            // A second run keeps what the first wrote, set in this shell or not.
            Some(CredChoice::Keep)
        }
        _ => {
            let c = server.resolve_credentials().ok().flatten()?;
            show_credentials(ui, &c, &format!("already in {}", cfg_path.display()));
            Some(CredChoice::Keep)
        }
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
fn write_config(
    path: &Path,
    creds: &CredChoice,
    upstream: Option<Value>,
    search_key: Option<&str>,
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

struct TestReport {
    /// Tools listed per upstream, in config order.
    tools: Vec<(String, usize)>,
    upstreams: Vec<(String, String)>,
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("could not start the async runtime: {e}"))
}

/// Start `coogle serve` on a temporary socket with the new config, wait for it (spinner),
/// check `status` and `list_tools`, stop it. Its log goes to the temporary directory, which is
/// removed afterwards: nothing persistent is touched.
fn test_daemon(ui: &Ui, cfg_path: &Path) -> Result<TestReport, String> {
    let dir = PathBuf::from(format!(
        "/tmp/coogle-setup-{}-{}",
        crate::paths::uid(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    let socket = dir.join("run").join("coogle.sock");
    std::fs::create_dir(dir.join("run")).map_err(|e| e.to_string())?;
    let log = dir.join("serve.log");
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(&exe)
        .arg("serve")
        .arg("--config")
        .arg(cfg_path)
        .arg("--socket")
        .arg(&socket)
        .env("XDG_STATE_HOME", dir.join("state"))
        // Its upstream cache too, or it would overwrite the real daemon's.
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("CLAUDE_CODE_SESSION_ID")
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", exe.display()))?;
    let spinner = ui.spinner("starting a test daemon");
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            let deadline = Instant::now() + TEST_TIMEOUT;
            loop {
                if socket.exists() && client::control(&socket, "ping", Value::Null).await.is_ok() {
                    break;
                }
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("the daemon exited ({status})"));
                }
                if Instant::now() > deadline {
                    return Err(format!("no socket within {} s", TEST_TIMEOUT.as_secs()));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            spinner.set_message("listing tools");
            let status = client::control(&socket, "status", Value::Null)
                .await
                .map_err(|e| format!("status: {e}"))?;
            let names: Vec<String> = status["upstreams"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u["name"].as_str().map(str::to_owned))
                .collect();
            let mut tools = Vec::new();
            for name in &names {
                let params = json!({"server": name});
                let listed = loop {
                    match client::control(&socket, "list_tools", params.clone()).await {
                        Ok(v) => break v,
                        Err(e) if Instant::now() > deadline => {
                            return Err(format!("list_tools ({name}): {e}"));
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                };
                let count = listed
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(Vec::len)
                    .unwrap_or(0);
                tools.push((name.clone(), count));
            }
            let status = client::control(&socket, "status", Value::Null)
                .await
                .unwrap_or(status);
            let upstreams = status["upstreams"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|u| {
                    (
                        u["name"].as_str().unwrap_or("?").to_owned(),
                        u["state"].as_str().unwrap_or("?").to_owned(),
                    )
                })
                .collect();
            let _ = client::control(&socket, "shutdown", Value::Null).await;
            Ok(TestReport { tools, upstreams })
        })
    });
    spinner.finish_and_clear();
    // On every path, success or not, ask it to stop (SIGTERM stops its upstream's process group
    // too; a SIGKILL alone would orphan it where there is no PDEATHSIG, as on macOS).
    if let Ok(None) = child.try_wait() {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    crate::process::wait_or_kill(&mut child, Duration::from_secs(10));
    let result = result.map_err(|e| {
        let tail: Vec<String> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(8)
            .map(str::to_owned)
            .collect();
        if tail.is_empty() {
            e
        } else {
            let lines: Vec<String> = tail.into_iter().rev().collect();
            format!("{e}; its log ended with:\n      {}", lines.join("\n      "))
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Run the client entry as a client would (`<command> <args>` on stdio) and list its tools.
fn verify(ui: &Ui, entry: &Value) -> Result<usize, String> {
    use rmcp::ServiceExt;
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    let command = entry["command"]
        .as_str()
        .ok_or("the entry has no command")?;
    let args: Vec<String> = entry["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let spinner = ui.spinner("asking the client entry for its tools");
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(&args).env_remove("CLAUDE_CODE_SESSION_ID");
            let transport = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(Stdio::null())
                .spawn()
                .map(|(t, _)| t)
                .map_err(|e| format!("could not start {command}: {e}"))?;
            let info = ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("coogle-setup", wire::VERSION),
            );
            let work = async {
                let session = info.serve(transport).await.map_err(|e| e.to_string())?;
                let tools = session.list_all_tools().await.map_err(|e| e.to_string())?;
                let _ = session.cancel().await;
                Ok::<usize, String>(tools.len())
            };
            tokio::time::timeout(TEST_TIMEOUT, work)
                .await
                .map_err(|_| format!("no answer within {} s", TEST_TIMEOUT.as_secs()))?
        })
    });
    spinner.finish_and_clear();
    result
}

// ---------------------------------------------------------------------------------------------
// uninstall

pub fn uninstall(paths: &GlobalPaths, args: &UninstallArgs) -> ExitCode {
    if !args.yes && !ui::has_terminal() {
        output::error_text(
            "coogle uninstall asks for confirmation and needs a terminal",
            Some("run `coogle uninstall --yes`"),
        );
        return ExitCode::Usage;
    }
    let ui = Ui {
        interactive: !args.yes,
    };
    let mut state = match load_state() {
        Ok(s) => s,
        Err(e) => {
            output::error(&e, Some("move the file aside to uninstall without it"));
            return ExitCode::Failure;
        }
    };
    if !args.yes {
        ui.line("This stops and removes the coogle service and restores the client entries setup replaced.");
        if !ui.confirm("Uninstall?", false) {
            ui.line("nothing changed");
            return ExitCode::Success;
        }
    }
    let mut failed = false;

    ui.line("Service");
    let socket = paths.socket_loading_config();
    if args.keep_service {
        ui.warn("kept (--keep-service)");
    } else {
        match service::uninstall() {
            Ok((None, _)) => ui.ok("no service installed"),
            Ok((Some(path), manager)) => {
                ui.ok(&format!("removed {}", path.display()));
                match manager {
                    ManagerState::Started => ui.ok("stopped and disabled"),
                    ManagerState::Unavailable(why) => {
                        ui.warn(&format!("service manager not available ({why})"))
                    }
                    ManagerState::Failed(why) => {
                        ui.warn(&format!("the service manager said: {why}"))
                    }
                }
                state.service = None;
            }
            Err(e) => {
                ui.fail(&e.to_string());
                failed = true;
            }
        }
        // Stop a daemon that runs without the service (started on demand).
        if let Ok(rt) = runtime()
            && rt
                .block_on(client::control(&socket, "shutdown", Value::Null))
                .is_ok()
        {
            ui.ok(&format!("stopped the daemon on {}", socket.display()));
        }
    }

    ui.line("Client configs");
    if state.clients.is_empty() {
        ui.ok("setup recorded no client changes; nothing to restore");
    }
    let mut kept = Vec::new();
    for c in std::mem::take(&mut state.clients) {
        match claude_config::revert_file(&c.path, &c.changes, &c.backups) {
            Ok((written, report)) => {
                for r in &report {
                    match r {
                        claude_config::Reverted::Restored(w) => {
                            ui.ok(&format!("{}: restored {w}", c.kind.label()))
                        }
                        claude_config::Reverted::Removed(w) => {
                            ui.ok(&format!("{}: removed {w}", c.kind.label()))
                        }
                        claude_config::Reverted::Skipped(w) => ui.warn(&format!(
                            "{}: {w} was changed since setup; left alone",
                            c.kind.label()
                        )),
                    }
                }
                if let Written::Replaced { backup } = written {
                    ui.info(&format!(
                        "{} (backup of the patched file: {})",
                        c.path.display(),
                        backup.display()
                    ));
                }
            }
            Err(e) => {
                ui.fail(&format!("{}: {e}", c.kind.label()));
                failed = true;
                kept.push(c);
            }
        }
    }
    state.clients = kept;

    ui.line("Config");
    let cfg = paths.config_file();
    if args.remove_config {
        match fsutil::remove_optional(&cfg) {
            Ok(true) => ui.ok(&format!("removed {}", cfg.display())),
            Ok(false) => ui.ok(&format!("{} did not exist", cfg.display())),
            Err(e) => {
                ui.fail(&e.to_string());
                failed = true;
            }
        }
    } else {
        ui.ok(&format!(
            "kept {} (--remove-config removes it)",
            cfg.display()
        ));
    }
    if let Err(e) = save_state(&state) {
        ui.fail(&e.to_string());
        failed = true;
    }
    if failed {
        ExitCode::Failure
    } else {
        ExitCode::Success
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
