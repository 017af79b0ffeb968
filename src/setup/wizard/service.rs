//! Step 5: the per-user service (a systemd user unit or a LaunchAgent) that starts the daemon
//! at login. Optional: without it, `coogle mcp` starts the daemon on demand. A service manager
//! that is not there is a warning; one that refuses is a failure that does not stop setup.

use super::super::launch::service_spec;
use super::super::service;
use super::super::state::State;
use super::Wizard;
use super::credentials::CredChoice;
use crate::fsutil::Written;
use crate::service_manager::{Manager, ManagerState};

impl Wizard<'_> {
    pub(super) fn install_service(&mut self, state: &mut State, creds: &CredChoice) {
        let ui = self.ui;
        let wanted = !self.args.no_service
            && ui.confirm(
                "Install the service so the daemon starts when you log in?",
                true,
            );
        if !wanted {
            // Asked for (a flag or an answer): a choice, not a warning.
            let why = if self.args.no_service {
                "--no-service"
            } else {
                "as you chose"
            };
            ui.ok(&format!(
                "not installed ({why}): `coogle mcp` starts the daemon on demand"
            ));
            return;
        }
        // The directories the service file needs that do not exist yet are coogle's to remove
        // (`uninstall --purge`, when they are empty again).
        let missing = missing_ancestors(Manager::current().installed_path());
        let inst = match service::install(&service_spec(self.paths)) {
            Ok(inst) => inst,
            Err(e) => {
                ui.fail(&e.to_string());
                self.failed = true;
                return;
            }
        };
        if inst.written == Written::Unchanged {
            ui.ok(&format!("{} is up to date", inst.path.display()));
        } else {
            ui.ok(&format!("wrote {}", inst.path.display()));
            self.summary
                .push(format!("service {}", inst.path.display()));
        }
        state.service = Some(inst.path.clone());
        for d in missing.into_iter().filter(|d| d.is_dir()) {
            if !state.created_dirs.contains(&d) {
                state.created_dirs.push(d);
            }
        }
        if matches!(creds, CredChoice::Env) {
            ui.warn(
                "the service starts the daemon without this shell's environment: it will not see GOOGLE_OAUTH_CLIENT_ID/SECRET",
            );
            ui.info("hint: `coogle setup --credentials-source manual` writes them into config.json (mode 0600)");
        }
        self.report_manager(inst.manager);
    }

    fn report_manager(&mut self, state: ManagerState) {
        let ui = self.ui;
        let manager = Manager::current();
        match state {
            ManagerState::Started => ui.ok("enabled and started"),
            ManagerState::Unavailable(why) => {
                ui.warn(&format!(
                    "{} is not available here ({why}); the service file is written but not loaded",
                    manager.name()
                ));
                let later = match manager {
                    Manager::Launchd(_) => {
                        "launchd loads it at your next login to the Mac's desktop; to load it now, from Terminal on the Mac"
                    }
                    Manager::Systemd(_) => "once systemd runs",
                };
                ui.info(&format!(
                    "the daemon still starts on demand with `coogle mcp`; {later}: `{}`",
                    manager.enable_command()
                ));
            }
            ManagerState::Failed(why) => {
                ui.fail(&format!("the service manager refused: {why}"));
                self.failed = true;
            }
        }
    }
}

/// The directories above `file` that do not exist, outermost first.
fn missing_ancestors(file: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = file
        .ancestors()
        .skip(1)
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(std::path::Path::to_path_buf)
        .collect();
    out.reverse();
    out
}
