//! Doctor's checks of what is installed: the small shim beside coogle, config.json, each
//! upstream's OAuth client and command, the programs upstreams commonly run, the search
//! server's API key, and the service.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use serde_json::Value;

use super::super::service;
use super::{Doctor, same_file};
use crate::config::{Config, ServerConfig};
use crate::exec_path;
use crate::paths::Platform;
use crate::secret::{check_key, find_key_here, mask};
use crate::service_manager::{Manager, ServiceStatus};
use crate::shim_identity::{self, Verdict};

/// Whether the search server is set up: its own config section or a `search` upstream.
pub(super) fn search_wanted(cfg_path: &Path) -> bool {
    std::fs::read(cfg_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|c| c.get("search").is_some() || c.pointer("/servers/search").is_some())
}

impl Doctor<'_> {
    /// `coogle-mcp` beside this coogle is the one of this build (what `coogle mcp` checks
    /// before it hands a session to it): without it, or with a broken one, every session runs
    /// in coogle's larger image, which works but costs memory.
    pub(super) fn shim_sibling(&mut self) {
        let Some(dir) = std::env::current_exe()
            .ok()
            .map(|e| crate::process::live_exe(&e))
            .and_then(|e| e.parent().map(Path::to_path_buf))
        else {
            return;
        };
        let sibling = dir.join(crate::shim::SHIM_EXE);
        let fix = "reinstall coogle: coogle and coogle-mcp come from one build";
        match shim_identity::check(&sibling, crate::wire::VERSION) {
            Verdict::Trusted => self.ok(&format!("{} (the small shim)", sibling.display())),
            Verdict::Missing => self.warn(
                &format!(
                    "no {} beside coogle: sessions run in coogle's larger image",
                    crate::shim::SHIM_EXE
                ),
                fix,
            ),
            Verdict::Refused(why) => self.warn(
                &format!(
                    "{} {why}: sessions run in coogle's larger image",
                    sibling.display()
                ),
                fix,
            ),
        }
    }

    /// config.json loads (or there is none and the defaults apply).
    pub(super) fn config(&mut self) -> Option<Config> {
        match Config::load(self.paths.config.as_deref()) {
            Ok(c) => {
                match &c.file {
                    Some(f) => {
                        self.ok(&format!("config {} loads", f.display()));
                        for k in &c.unknown_keys {
                            let fix = match k.did_you_mean {
                                Some(known) => format!("rename it to {known}"),
                                None => {
                                    "remove it, or check the key's spelling in the README".into()
                                }
                            };
                            self.warn(&format!("config: {k}; coogle ignores it"), &fix);
                        }
                    }
                    None => self.warn(
                        &format!(
                            "no config at {}: built-in defaults",
                            self.paths.config_file().display()
                        ),
                        "`coogle setup` writes one",
                    ),
                }
                Some(c)
            }
            Err(e) => {
                self.fail(&format!("config: {e}"), e.fix());
                None
            }
        }
    }

    /// Each upstream's OAuth client resolves and its command is on PATH.
    pub(super) fn servers(&mut self, config: &Config) {
        for server in config.servers.values() {
            self.credentials(server);
            self.command(server);
        }
    }

    fn credentials(&mut self, server: &ServerConfig) {
        match server.resolve_credentials() {
            Ok(Some(c)) => self.ok(&format!(
                "{}: OAuth client id {}, secret {}",
                server.name,
                mask(&c.client_id),
                mask(&c.client_secret)
            )),
            Ok(None) => self.ok(&format!(
                "{}: no OAuth client configured (none needed)",
                server.name
            )),
            Err(e) => self.fail(&e.to_string(), e.fix()),
        }
    }

    /// The command resolves with the PATH the daemon has at its poorest: the recorded `path`
    /// plus a GUI app's PATH (a daemon started by launchd, or by Claude Desktop's `coogle
    /// mcp`), not just this shell's.
    fn command(&mut self, server: &ServerConfig) {
        let (name, command) = (&server.name, &server.command);
        let daemon = match server.env.get("PATH") {
            Some(p) => OsString::from(p),
            None => exec_path::daemon_path(
                &server.search_path,
                Some(OsStr::new(exec_path::GUI_PATH)),
                &Platform::current(),
            ),
        };
        let cwd = server.cwd.as_deref();
        if let Some(p) = exec_path::resolve(command, &daemon, cwd) {
            return self.ok(&format!("{name}: {command} found at {}", p.display()));
        }
        let here = std::env::var_os("PATH").unwrap_or_default();
        match exec_path::resolve(command, &here, cwd) {
            Some(p) => {
                let dir = p.parent().unwrap_or(&p).display().to_string();
                self.fail(
                    &format!(
                        "{name}: {command} is at {}, but a daemon started without your shell's PATH (by launchd, systemd or Claude Desktop) would not find it",
                        p.display()
                    ),
                    &format!(
                        "`coogle setup --yes` records this shell's PATH in config.json (`path`), or add \"{dir}\" to `path` there yourself"
                    ),
                )
            }
            None => {
                let fix = if command == "uvx" {
                    "install uv: `curl -LsSf https://astral.sh/uv/install.sh | sh` or `brew install uv`"
                } else {
                    "install it, or fix `command` in the config"
                };
                self.fail(&format!("{name}: {command} not found on PATH"), fix)
            }
        }
    }

    /// `uvx` and `node`: worth knowing, not required.
    pub(super) fn programs(&mut self) {
        for (program, fix) in [
            (
                "uvx",
                "install uv (`brew install uv`) if an upstream runs with uvx",
            ),
            ("node", "install Node.js if an upstream runs with npx"),
        ] {
            match which::which(program) {
                Ok(p) => self.ok(&format!("{program} at {}", p.display())),
                Err(_) => self.warn(&format!("{program} not found on PATH"), fix),
            }
        }
    }

    /// The search server's Gemini API key: found and plausible, or not needed.
    pub(super) fn search_key(&mut self, search_wanted: bool) {
        match find_key_here(&self.paths.config_file()) {
            Some(found) => match check_key(&found.key) {
                Ok(()) => self.ok(&format!(
                    "search: Gemini API key {} ({})",
                    mask(&found.key),
                    found.source
                )),
                Err(e) => self.fail(
                    &format!("search: {e} (from {})", found.source),
                    "put a real key from https://aistudio.google.com/apikey in config.json search.apiKey (`coogle setup --search --api-key-env VAR`)",
                ),
            },
            None if search_wanted => self.fail(
                "search: the search server is configured but no Gemini API key is found",
                "`coogle setup --search --api-key-env VAR`, or set GOOGLE_API_KEY for the daemon",
            ),
            None => self.ok("search: not set up (optional; `coogle setup --search` adds ask_google)"),
        }
    }

    /// The service runs this binary and is running. Returns its state, `None` when none is
    /// installed.
    pub(super) fn service(&mut self) -> Option<ServiceStatus> {
        let manager = Manager::current();
        let path = manager.installed_path().to_path_buf();
        if !path.exists() {
            self.warn(
                "no service installed: the daemon starts on demand",
                "`coogle setup` installs one",
            );
            return None;
        }
        let exe = self.exe.clone();
        match service::installed_program_with(&manager) {
            Some(p) if same_file(Path::new(&p), &exe) => {
                self.ok(&format!("service {} runs this binary", path.display()))
            }
            Some(p) => self.fail(
                &format!("service {} runs {p}, not {}", path.display(), exe.display()),
                "`coogle setup --yes` rewrites it",
            ),
            None => self.fail(
                &format!("service {} cannot be read", path.display()),
                "`coogle setup --yes` rewrites it",
            ),
        }
        let status = manager.status();
        match &status {
            ServiceStatus::Running => self.ok("service is loaded and running"),
            // launchd keeps an agent that exited 0 loaded and leaves it: the daemon it would
            // run may be serving already, started on demand.
            ServiceStatus::Loaded => self.warn(
                "service is loaded but not running (a daemon started on demand may be serving)",
                &format!("`{}`", manager.restart_command()),
            ),
            ServiceStatus::Stopped => self.fail(
                "service is installed but not running",
                &format!("`{}`", manager.enable_command()),
            ),
            // A unit file written where no systemd runs (a container, WSL without systemd):
            // sessions start the daemon on demand, as without a service.
            ServiceStatus::Unknown(why) => self.warn(
                &format!(
                    "service {} is installed, but the service manager is not available here ({why}): the daemon starts on demand",
                    path.display()
                ),
                "",
            ),
        }
        Some(status)
    }
}
