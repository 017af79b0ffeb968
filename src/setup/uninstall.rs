//! `coogle uninstall`: stop and remove the service, stop a daemon started on demand, give
//! back the client entries setup replaced (exactly those, and only where nobody changed them
//! since), and, when asked, remove config.json.
//!
//! It undoes what the state file records and nothing else; a step that fails is a ✗ and the
//! others still run. What could not be restored stays recorded, so a second run can retry.

use serde_json::Value;

use super::args::UninstallArgs;
use super::claude_config::{self, Reverted};
use super::service;
use super::state::{ClientState, State};
use super::ui::{self, Ui};
use crate::client;
use crate::config::GlobalPaths;
use crate::error::InstallError;
use crate::fsutil::{self, Written};
use crate::output::ExitCode;
use crate::service_manager::ManagerState;

/// `coogle uninstall`.
pub fn uninstall(paths: &GlobalPaths, args: &UninstallArgs) -> ExitCode {
    if !args.yes && !ui::has_terminal() {
        return InstallError::NeedsTerminal {
            command: "uninstall",
            asks: "asks for confirmation",
        }
        .report();
    }
    let ui = Ui {
        interactive: !args.yes,
    };
    let mut state = match super::journal::load(&ui, &[], false) {
        Ok(s) => s,
        Err(e) => return e.report(),
    };
    if !args.yes {
        ui.line("This stops and removes the coogle service and restores the client entries setup replaced.");
        if !ui.confirm("Uninstall?", false) {
            ui.line("nothing changed");
            return ExitCode::Success;
        }
    }
    let mut ok = true;
    ui.line("Service");
    if args.keep_service {
        ui.warn("kept (--keep-service)");
    } else {
        ok &= remove_service(&ui, &mut state);
        stop_daemon(&ui, paths);
    }
    ui.line("Shared servers");
    ok &= super::share::unshare_all(&ui, paths, false);
    // unshare wrote its part of the record; the rest is this run's.
    if let Ok(now) = State::load() {
        state.shared = now.shared;
        state.shared_upstreams = now.shared_upstreams;
        state.pending = now.pending;
    }
    ui.line("Client configs");
    ok &= restore_clients(&ui, &mut state);
    ui.line("Config");
    ok &= config_file(&ui, paths, args.remove_config);
    // The directories setup created for the service are not removed yet.
    state.created_dirs.clear();
    if let Err(e) = state.save() {
        ui.fail(&e.to_string());
        ok = false;
    }
    if ok {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}

fn remove_service(ui: &Ui, state: &mut State) -> bool {
    match service::uninstall() {
        Ok((None, _)) => ui.ok("no service installed"),
        Ok((Some(path), manager)) => {
            ui.ok(&format!("removed {}", path.display()));
            match manager {
                ManagerState::Started => ui.ok("stopped and disabled"),
                ManagerState::Unavailable(why) => {
                    ui.warn(&format!("service manager not available ({why})"))
                }
                ManagerState::Failed(why) => ui.warn(&format!("the service manager said: {why}")),
            }
            state.service = None;
        }
        Err(e) => {
            ui.fail(&e.to_string());
            return false;
        }
    }
    true
}

/// Stop a daemon that runs without the service (started on demand).
fn stop_daemon(ui: &Ui, paths: &GlobalPaths) {
    if let Some(socket) = shutdown_daemon(paths) {
        ui.ok(&format!("stopped the daemon on {}", socket.display()));
    }
}

/// Ask the daemon on this invocation's socket to shut down; returns the socket when one did.
pub(super) fn shutdown_daemon(paths: &GlobalPaths) -> Option<std::path::PathBuf> {
    let socket = paths.socket_loading_config();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(client::control(&socket, "shutdown", Value::Null))
        .is_ok()
        .then_some(socket)
}

/// Revert every recorded client change; what fails stays recorded.
fn restore_clients(ui: &Ui, state: &mut State) -> bool {
    if state.clients.is_empty() {
        ui.ok("setup recorded no client changes; nothing to restore");
    }
    let mut kept = Vec::new();
    for c in std::mem::take(&mut state.clients) {
        if !restore_client(ui, &c) {
            kept.push(c);
        }
    }
    let ok = kept.is_empty();
    state.clients = kept;
    ok
}

fn restore_client(ui: &Ui, c: &ClientState) -> bool {
    let label = c.kind.label();
    let (written, report) = match claude_config::revert_file(&c.path, &c.changes, &c.backups) {
        Ok(r) => r,
        Err(e) => {
            ui.fail(&format!("{label}: {e}"));
            return false;
        }
    };
    for r in &report {
        match r {
            Reverted::Restored(w) => ui.ok(&format!("{label}: restored {w}")),
            Reverted::Removed(w) => ui.ok(&format!("{label}: removed {w}")),
            Reverted::AlreadyBack(w) => ui.ok(&format!("{label}: {w} was already restored")),
            Reverted::Skipped(w) => {
                ui.warn(&format!("{label}: {w} was changed since setup; left alone"))
            }
        }
    }
    if let Written::Replaced { backup } = written {
        ui.info(&format!(
            "{} (backup of the patched file: {})",
            c.path.display(),
            backup.display()
        ));
    }
    true
}

fn config_file(ui: &Ui, paths: &GlobalPaths, remove: bool) -> bool {
    let cfg = paths.config_file();
    if !remove {
        ui.ok(&format!(
            "kept {} (--remove-config removes it)",
            cfg.display()
        ));
        return true;
    }
    match fsutil::remove_optional(&cfg) {
        Ok(true) => ui.ok(&format!("removed {}", cfg.display())),
        Ok(false) => ui.ok(&format!("{} did not exist", cfg.display())),
        Err(e) => {
            ui.fail(&e.to_string());
            return false;
        }
    }
    true
}
