//! `coogle uninstall`: give back every client entry coogle changed (the shared servers, then
//! setup's own entries: exactly those, and only where nobody changed them since), remove the
//! service, and stop the daemon last, waiting until it has exited; then, when asked, remove
//! config.json (`--remove-config`) and everything else coogle left (`--purge`), or else say
//! what stays and where. `--dry-run` says all of it and changes nothing.
//!
//! The daemon goes last because an agent session's shim starts a new daemon when its daemon
//! goes away: while client entries still run `coogle mcp`, a stopped daemon comes back. For
//! the same reason it refuses while agent sessions use the daemon, naming them (or asks, on a
//! terminal); `--force` goes on and ends those sessions' shims first.
//!
//! It undoes what the state file records and nothing else; a step that fails is a ✗ and the
//! others still run. What could not be restored stays recorded, so a second run can retry.

mod daemon;
mod leftovers;

use std::path::PathBuf;

use super::args::UninstallArgs;
use super::client_config::{self, ClientKind, Reverted};
use super::journal;
use super::service;
use super::state::{ClientState, State};
use super::ui::{self, Ui};
use crate::config::GlobalPaths;
use crate::error::InstallError;
use crate::fsutil::{self, Written};
use crate::output::ExitCode;
use crate::service_manager::{Manager, ManagerState};

pub(super) use daemon::shutdown_daemon;

/// `coogle uninstall`.
pub fn uninstall(paths: &GlobalPaths, args: &UninstallArgs) -> ExitCode {
    let asks = !args.yes && !args.dry_run;
    if asks && !ui::has_terminal() {
        return InstallError::NeedsTerminal {
            command: "uninstall",
            asks: "asks for confirmation",
        }
        .report();
    }
    let ui = Ui { interactive: asks };
    let clients: Vec<PathBuf> = ClientKind::ALL.iter().map(|k| k.default_path()).collect();
    let mut state = match journal::load(&ui, &clients, args.dry_run) {
        Ok(s) => s,
        Err(e) => return e.report(),
    };
    // Every file coogle writes, for its backups: before the record of them is gone.
    let mut written: Vec<PathBuf> = clients;
    written.extend(state.clients.iter().map(|c| c.path.clone()));
    written.extend(state.shared.iter().map(|e| e.path.clone()));
    written.push(paths.config_file());
    written.push(crate::config::default_path());
    written.push(Manager::current().installed_path().to_path_buf());
    let running = daemon::running(paths);
    // With --keep-service the daemon keeps serving them: nothing to refuse.
    if let Some(r) = running.as_ref().filter(|r| !r.sessions.is_empty())
        && !args.force
        && !args.keep_service
    {
        ui.warn(&format!(
            "{} agent session{} use{} the daemon on {}:",
            r.sessions.len(),
            if r.sessions.len() == 1 { "" } else { "s" },
            if r.sessions.len() == 1 { "s" } else { "" },
            r.socket.display()
        ));
        for s in &r.sessions {
            ui.info(&s.describe());
        }
        if args.dry_run {
            ui.warn("uninstall would refuse while they are open (--force ends them and goes on)");
        } else if !ui.confirm(
            "Uninstall anyway? Their coogle servers stop working until they are restarted",
            false,
        ) {
            if !ui.interactive {
                return InstallError::SessionsOpen {
                    count: r.sessions.len(),
                }
                .report();
            }
            ui.line("nothing changed");
            return ExitCode::Success;
        }
    }
    if asks {
        ui.line("This gives back the client entries coogle changed, removes the coogle service and stops the daemon.");
        if !ui.confirm("Uninstall?", false) {
            ui.line("nothing changed");
            return ExitCode::Success;
        }
    }
    if args.dry_run {
        ui.line("Dry run: nothing is changed");
    }
    let mut ok = true;
    ui.line("Shared servers");
    ok &= super::share::unshare_all(&ui, paths, args.dry_run);
    if !args.dry_run {
        // unshare wrote its part of the record; the rest is this run's.
        if let Ok(now) = State::load() {
            state.shared = now.shared;
            state.shared_upstreams = now.shared_upstreams;
            state.pending = now.pending;
        }
    }
    ui.line("Client configs");
    ok &= restore_clients(&ui, &mut state, args.dry_run);
    ui.line("Service");
    if args.keep_service {
        ui.ok("kept (--keep-service)");
    } else {
        ok &= remove_service(&ui, &mut state, args.dry_run);
    }
    ui.line("Daemon");
    if args.keep_service {
        ui.ok("left running with the service (--keep-service)");
    } else {
        ok &= stop_daemon(&ui, paths, running.as_ref(), args.dry_run);
    }
    ui.line("Config");
    ok &= config_file(&ui, paths, args.remove_config, args.dry_run);
    let mut own_dirs = vec![
        ("cache", crate::paths::cache_dir()),
        ("log directory", crate::paths::log_dir()),
    ];
    own_dirs.dedup_by(|a, b| a.1 == b.1);
    let left = leftovers::find(&written, &own_dirs, &state.created_dirs);
    if args.purge {
        ui.line("Purge");
        ok &= leftovers::purge(&ui, &left, args.dry_run);
    } else if left.is_empty() {
        ui.line("Left behind");
        ui.ok("nothing");
    } else {
        ui.line("Left behind");
        leftovers::list(&ui, &left, args.dry_run);
    }
    if args.dry_run {
        ui.ok("dry run: nothing changed");
        return ExitCode::Success;
    }
    // Listed or removed above: nothing more to record about them.
    state.created_dirs.clear();
    if let Err(e) = state.save() {
        ui.fail(&e.to_string());
        ok = false;
    }
    if args.purge && args.remove_config {
        // coogle's own config directory, once nothing is left in it (the state file went
        // with the save above).
        for dir in [paths.config_file(), crate::config::default_path()] {
            if let Some(dir) = dir.parent().filter(|d| d.ends_with("coogle")) {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    if ok {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}

fn remove_service(ui: &Ui, state: &mut State, dry_run: bool) -> bool {
    if dry_run {
        let path = Manager::current().installed_path().to_path_buf();
        if path.exists() {
            ui.info(&format!(
                "would stop, disable and remove {}",
                path.display()
            ));
        } else {
            ui.ok("no service installed");
        }
        return true;
    }
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

/// Last: end the sessions' shims when forced, stop the daemon and wait until it has exited,
/// then make sure none came back.
fn stop_daemon(
    ui: &Ui,
    paths: &GlobalPaths,
    before: Option<&daemon::Running>,
    dry_run: bool,
) -> bool {
    let socket = paths.socket_loading_config();
    if dry_run {
        match before {
            Some(r) => {
                if !r.sessions.is_empty() {
                    ui.info(&format!(
                        "would end the coogle connections of {} agent session{} (--force)",
                        r.sessions.len(),
                        if r.sessions.len() == 1 { "" } else { "s" }
                    ));
                }
                ui.info(&format!(
                    "would stop the daemon (pid {}) on {} and wait for it to exit",
                    r.pid,
                    socket.display()
                ));
            }
            None => ui.ok("no daemon running"),
        }
        return true;
    }
    // Sessions may have come or gone since the start: ask again.
    if let Some(r) = daemon::running(paths).filter(|r| !r.sessions.is_empty()) {
        let left = daemon::end_sessions(&r.sessions);
        ui.ok(&format!(
            "ended the coogle connections of {} agent session{}",
            r.sessions.len(),
            if r.sessions.len() == 1 { "" } else { "s" }
        ));
        if !left.is_empty() {
            ui.warn(&format!("still running: pid {left:?}"));
        }
    }
    let mut ok = true;
    match daemon::stop(&socket) {
        Ok(Some(pid)) => ui.ok(&format!(
            "stopped the daemon (pid {pid}) on {}",
            socket.display()
        )),
        Ok(None) => ui.ok("no daemon running"),
        Err(e) => {
            ui.fail(&format!(
                "could not stop the daemon on {}: {e}",
                socket.display()
            ));
            ok = false;
        }
    }
    if let Some(r) = daemon::running(paths) {
        ui.fail(&format!(
            "a daemon (pid {}) answers on {} again: something started it meanwhile; `coogle stop` stops it",
            r.pid,
            socket.display()
        ));
        ok = false;
    }
    ok
}

/// Revert every recorded client change; what fails stays recorded.
fn restore_clients(ui: &Ui, state: &mut State, dry_run: bool) -> bool {
    if state.clients.is_empty() {
        ui.ok("setup recorded no client changes; nothing to restore");
    }
    let mut kept = Vec::new();
    for c in std::mem::take(&mut state.clients) {
        if !restore_client(ui, &c, dry_run) || dry_run {
            kept.push(c);
        }
    }
    let ok = dry_run || kept.is_empty();
    state.clients = kept;
    ok
}

fn restore_client(ui: &Ui, c: &ClientState, dry_run: bool) -> bool {
    let label = c.kind.label();
    let result = if dry_run {
        client_config::preview_revert(&c.path, &c.changes).map(|r| (Written::Unchanged, r))
    } else {
        client_config::revert_file(&c.path, &c.changes, &c.backups)
    };
    let (written, report) = match result {
        Ok(r) => r,
        Err(e) => {
            ui.fail(&format!("{label}: {e}"));
            return false;
        }
    };
    let would = if dry_run { "would be " } else { "" };
    let done = |text: String| {
        if dry_run {
            ui.info(&text)
        } else {
            ui.ok(&text)
        }
    };
    for r in &report {
        match r {
            Reverted::Restored(w) => done(format!("{label}: {w} {would}restored")),
            Reverted::Removed(w) => done(format!("{label}: {w} {would}removed")),
            Reverted::AlreadyBack(w) => ui.ok(&format!("{label}: {w} was already restored")),
            Reverted::Skipped(w) => ui.warn(&format!(
                "{label}: {w} was changed since setup; {would}left alone"
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
    true
}

fn config_file(ui: &Ui, paths: &GlobalPaths, remove: bool, dry_run: bool) -> bool {
    let cfg = paths.config_file();
    if !remove {
        ui.ok(&format!(
            "kept {} (--remove-config removes it)",
            cfg.display()
        ));
        return true;
    }
    if dry_run {
        if cfg.exists() {
            ui.info(&format!("would remove {}", cfg.display()));
        }
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
