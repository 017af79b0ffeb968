//! `coogle doctor`: every check of the installation with ✓, ! (worth knowing) or ✗ (broken)
//! and the command that fixes it. Exit 1 when any check is ✗. It only reads: it never writes a
//! file or starts a daemon.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::claude_config::{self, ClientKind, Upstream};
use super::{DoctorArgs, service, ui::Ui};
use crate::config::{Config, GlobalPaths};
use crate::installed::stable_exe;
use crate::output::ExitCode;
use crate::secret::{self as search, mask};
use crate::{client, service_manager, wire};

#[derive(Default)]
struct Tally {
    failures: usize,
}

impl Tally {
    fn ok(&self, ui: &Ui, text: &str) {
        ui.ok(text);
    }
    fn warn(&self, ui: &Ui, text: &str, fix: &str) {
        ui.warn(text);
        if !fix.is_empty() {
            ui.info(&format!("fix: {fix}"));
        }
    }
    fn fail(&mut self, ui: &Ui, text: &str, fix: &str) {
        self.failures += 1;
        ui.fail(text);
        if !fix.is_empty() {
            ui.info(&format!("fix: {fix}"));
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
}

pub fn run(paths: &GlobalPaths, args: &DoctorArgs) -> ExitCode {
    let ui = Ui { interactive: false };
    let mut t = Tally::default();
    let home = crate::paths::home();

    // Binary
    let exe = stable_exe().path;
    let shim = super::shim_for(paths, Upstream::Google);
    t.ok(
        &ui,
        &format!("coogle {} at {}", wire::VERSION, exe.display()),
    );

    // Config
    let cfg_path = paths.config_file();
    let config = match Config::load(paths.config.as_deref()) {
        Ok(c) => {
            match &c.file {
                Some(f) => t.ok(&ui, &format!("config {} loads", f.display())),
                None => t.warn(
                    &ui,
                    &format!("no config at {}: built-in defaults", cfg_path.display()),
                    "`coogle setup` writes one",
                ),
            }
            Some(c)
        }
        Err(e) => {
            t.fail(
                &ui,
                &format!("config: {e}"),
                "fix the file, or move it aside and run `coogle setup`",
            );
            None
        }
    };

    // Whether the search server is set up: its own config section, a `search` upstream, or a
    // key config.json holds.
    let search_wanted = std::fs::read(&cfg_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|c| c.get("search").is_some() || c.pointer("/servers/search").is_some());

    // Credentials and programs
    if let Some(config) = &config {
        for server in config.servers.values() {
            match server.resolve_credentials() {
                Ok(Some(c)) => t.ok(
                    &ui,
                    &format!(
                        "{}: OAuth client id {}, secret {}",
                        server.name,
                        mask(&c.client_id),
                        mask(&c.client_secret)
                    ),
                ),
                Ok(None) => t.ok(
                    &ui,
                    &format!("{}: no OAuth client configured (none needed)", server.name),
                ),
                Err(e) => t.fail(
                    &ui,
                    &e.to_string(),
                    "`coogle setup --client-id ID --client-secret-env VAR`",
                ),
            }
            match which::which(&server.command) {
                Ok(p) => t.ok(
                    &ui,
                    &format!(
                        "{}: {} found at {}",
                        server.name,
                        server.command,
                        p.display()
                    ),
                ),
                Err(_) => {
                    let fix = if server.command == "uvx" {
                        "install uv: `curl -LsSf https://astral.sh/uv/install.sh | sh` or `brew install uv`"
                    } else {
                        "install it, or fix `command` in the config"
                    };
                    t.fail(
                        &ui,
                        &format!("{}: {} not found on PATH", server.name, server.command),
                        fix,
                    )
                }
            }
        }
    }
    for program in ["uvx", "node"] {
        match which::which(program) {
            Ok(p) => t.ok(&ui, &format!("{program} at {}", p.display())),
            Err(_) => t.warn(
                &ui,
                &format!("{program} not found on PATH"),
                if program == "uvx" {
                    "install uv (`brew install uv`) if an upstream runs with uvx"
                } else {
                    "install Node.js if an upstream runs with npx"
                },
            ),
        }
    }

    // The search server's Gemini API key
    let cfg_value: Option<Value> = std::fs::read(&cfg_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let cwd = std::env::current_dir().unwrap_or_else(|_| home.clone());
    match search::find_key(
        &|v| std::env::var(v).ok(),
        cfg_value.as_ref(),
        &cwd,
        &home,
    ) {
        Some(found) => match search::check_key(&found.key) {
            Ok(()) => t.ok(
                &ui,
                &format!(
                    "search: Gemini API key {} ({})",
                    mask(&found.key),
                    found.source
                ),
            ),
            Err(e) => t.fail(
                &ui,
                &format!("search: {e} (from {})", found.source),
                "put a real key from https://aistudio.google.com/apikey in config.json search.apiKey (`coogle setup --search --api-key-env VAR`)",
            ),
        },
        None if search_wanted => t.fail(
            &ui,
            "search: the search server is configured but no Gemini API key is found",
            "`coogle setup --search --api-key-env VAR`, or set GOOGLE_API_KEY for the daemon",
        ),
        None => t.ok(
            &ui,
            "search: not set up (optional; `coogle setup --search` adds ask_google)",
        ),
    }

    // Service
    let service_path = service_manager::installed_path();
    let service_installed = service_path.exists();
    if service_installed {
        match service::installed_program() {
            Some(p) if same_file(Path::new(&p), &exe) => t.ok(
                &ui,
                &format!("service {} runs this binary", service_path.display()),
            ),
            Some(p) => t.fail(
                &ui,
                &format!(
                    "service {} runs {p}, not {}",
                    service_path.display(),
                    exe.display()
                ),
                "`coogle setup --yes` rewrites it",
            ),
            None => t.fail(
                &ui,
                &format!("service {} cannot be read", service_path.display()),
                "`coogle setup --yes` rewrites it",
            ),
        }
        match service_manager::is_active() {
            Some(true) => t.ok(&ui, "service is loaded and running"),
            Some(false) => t.fail(
                &ui,
                "service is installed but not running",
                if cfg!(target_os = "macos") {
                    "`launchctl bootstrap gui/$UID ~/Library/LaunchAgents/dev.coogle.daemon.plist`"
                } else {
                    "`systemctl --user enable --now coogle.service`"
                },
            ),
            None => t.warn(&ui, "the service manager is not available here", ""),
        }
    } else {
        t.warn(
            &ui,
            "no service installed: the daemon starts on demand",
            "`coogle setup` installs one",
        );
    }

    // Client configs
    let claude_json = args
        .claude_json
        .clone()
        .unwrap_or_else(|| ClientKind::ClaudeCode.default_path());
    for kind in ClientKind::ALL {
        let path = if kind == ClientKind::ClaudeCode {
            claude_json.clone()
        } else {
            kind.default_path()
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => {
                if kind == ClientKind::ClaudeCode {
                    t.warn(
                        &ui,
                        &format!("{} not found", path.display()),
                        "`coogle setup`",
                    );
                }
                continue;
            }
        };
        let doc: Value = match serde_json::from_slice(&bytes) {
            Ok(d) => d,
            Err(e) => {
                t.fail(
                    &ui,
                    &format!("{}: {} does not parse: {e}", kind.label(), path.display()),
                    "fix the file or restore a backup",
                );
                continue;
            }
        };
        let entries = claude_config::entries(&doc, kind);
        let ours: Vec<_> = entries.iter().filter(|(_, e)| shim.is_exact(e)).collect();
        let stale: Vec<_> = entries
            .iter()
            .filter(|(_, e)| {
                claude_config::looks_like_coogle(e)
                    && !shim.is_exact(e)
                    && !e
                        .get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| same_file(Path::new(c), &exe))
            })
            .collect();
        let google = claude_config::google_entries(&doc, kind);
        for (loc, _) in &google {
            t.fail(
                &ui,
                &format!(
                    "{}: {} starts Google Workspace MCP directly, beside coogle",
                    kind.label(),
                    claude_config::describe(loc)
                ),
                "`coogle setup --yes` points it at coogle",
            );
        }
        for (loc, e) in &stale {
            t.fail(
                &ui,
                &format!(
                    "{}: {} runs {}, not this binary",
                    kind.label(),
                    claude_config::describe(loc),
                    e.get("command").and_then(Value::as_str).unwrap_or("?")
                ),
                "`coogle setup --yes`",
            );
        }
        if search_wanted {
            let search_shim = super::shim_for(paths, Upstream::Search);
            match entries.iter().find(|(_, e)| search_shim.is_exact(e)) {
                Some((loc, _)) => t.ok(
                    &ui,
                    &format!(
                        "{}: {} serves the search server",
                        kind.label(),
                        claude_config::describe(loc)
                    ),
                ),
                None if kind == ClientKind::ClaudeCode => t.warn(
                    &ui,
                    &format!("{}: no entry for the search server", kind.label()),
                    "`coogle setup --yes --search`",
                ),
                None => {}
            }
        }
        if !ours.is_empty() {
            let at: Vec<String> = ours
                .iter()
                .map(|(l, _)| claude_config::describe(l))
                .collect();
            t.ok(
                &ui,
                &format!("{}: {} points at this binary", kind.label(), at.join(", ")),
            );
        } else if google.is_empty() && stale.is_empty() && kind == ClientKind::ClaudeCode {
            t.fail(
                &ui,
                &format!("{}: no coogle entry in {}", kind.label(), path.display()),
                "`coogle setup --yes`",
            );
        }
    }

    // Daemon
    let socket = paths.socket(config.as_ref());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let (info, status) = match &rt {
        Ok(rt) => rt.block_on(async {
            let socket = &socket;
            let bounded = |m: &'static str| async move {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    client::control(socket, m, Value::Null),
                )
                .await
                .ok()
                .and_then(Result::ok)
            };
            (bounded("info").await, bounded("status").await)
        }),
        Err(_) => (None, None),
    };
    match &info {
        Some(info) => {
            let v = info["version"].as_str().unwrap_or("?");
            if v == wire::VERSION {
                t.ok(
                    &ui,
                    &format!(
                        "daemon {v} answers on {} (pid {})",
                        socket.display(),
                        info["pid"]
                    ),
                )
            } else {
                t.fail(
                    &ui,
                    &format!(
                        "daemon on {} runs coogle {v}, this binary is {}",
                        socket.display(),
                        wire::VERSION
                    ),
                    "`systemctl --user restart coogle.service` (macOS: `launchctl kickstart -k gui/$UID/dev.coogle.daemon`), or `coogle stop` when no service runs it (the next `coogle mcp` starts this version)",
                )
            }
        }
        None if service_installed => t.fail(
            &ui,
            &format!("no daemon answers on {}", socket.display()),
            "start the service, or run `coogle serve`",
        ),
        None => t.warn(
            &ui,
            &format!(
                "no daemon answers on {} (it starts on demand)",
                socket.display()
            ),
            "",
        ),
    }
    if let Some(status) = &status {
        for u in status["upstreams"].as_array().into_iter().flatten() {
            let name = u["name"].as_str().unwrap_or("?");
            let state = u["state"].as_str().unwrap_or("?");
            if state == "ready" {
                t.ok(
                    &ui,
                    &format!("upstream {name} connected ({} tools)", u["tools"]),
                );
            } else if matches!(state, "starting" | "initializing") {
                // A moment after login or a restart: not broken, just not there yet.
                t.warn(
                    &ui,
                    &format!("upstream {name} is {state}"),
                    "run `coogle doctor` again in a few seconds",
                );
            } else {
                let err = u["lastError"].as_str().unwrap_or("");
                t.fail(
                    &ui,
                    format!("upstream {name} is {state} {err}").trim(),
                    "`coogle logs` shows why; `coogle restart` retries",
                );
            }
            let pending: Vec<&Value> = u["signIn"].as_array().into_iter().flatten().collect();
            for s in &pending {
                t.fail(
                    &ui,
                    &format!("upstream {name} waits for a Google sign-in"),
                    &format!(
                        "open {} and sign in, then retry the call",
                        s["url"].as_str().unwrap_or("the sign-in link")
                    ),
                );
            }
            if pending.is_empty() && state == "ready" {
                t.ok(&ui, &format!("upstream {name}: no Google sign-in pending"));
            }
        }
    }

    // Socket permissions
    let dir = socket.parent().unwrap_or(Path::new("/"));
    match std::fs::symlink_metadata(dir) {
        Ok(m) => {
            let mode = m.permissions().mode() & 0o777;
            if m.file_type().is_symlink() || m.uid() != crate::paths::uid() || mode != 0o700 {
                t.fail(
                    &ui,
                    &format!(
                        "socket directory {} is mode {mode:o}, owner uid {} (want 0700, uid {})",
                        dir.display(),
                        m.uid(),
                        crate::paths::uid()
                    ),
                    &format!("`chmod 700 {}`", dir.display()),
                );
            } else {
                t.ok(
                    &ui,
                    &format!("socket directory {} is private (0700)", dir.display()),
                );
            }
        }
        Err(_) => t.warn(
            &ui,
            &format!("socket directory {} does not exist yet", dir.display()),
            "",
        ),
    }
    if let Ok(m) = std::fs::symlink_metadata(&socket) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            t.fail(
                &ui,
                &format!("socket {} is mode {mode:o}", socket.display()),
                "`coogle restart` recreates it with 0600",
            );
        }
    }

    if t.failures == 0 {
        ui.line("\nEverything looks right.");
        ExitCode::Success
    } else {
        ui.line(&format!(
            "\n{} problem{} found.",
            t.failures,
            if t.failures == 1 { "" } else { "s" }
        ));
        ExitCode::Failure
    }
}
