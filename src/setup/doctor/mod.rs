//! `coogle doctor`: every check of the installation with ✓, ! (worth knowing) or ✗ (broken)
//! and the command that fixes it, one function per check. Exit 1 when any check is ✗. It only
//! reads: it never writes a file or starts a daemon.

mod clients;
mod daemon;
mod install;
mod shared;
mod upstreams;

use std::path::{Path, PathBuf};

use super::args::DoctorArgs;
use super::client_config::{ClientKind, Shim, Upstream};
use super::launch::shim_for;
use super::ui::Ui;
use crate::config::GlobalPaths;
use crate::installed::stable_exe;
use crate::output::ExitCode;
use crate::wire;

/// What every check may look at, and the count of ✗.
struct Doctor<'a> {
    ui: Ui,
    paths: &'a GlobalPaths,
    /// The stable path of this binary, which the service and client entries should run.
    exe: PathBuf,
    /// The Google entry setup would write.
    shim: Shim,
    /// There is a config.json: setup ran (it writes one first) or the person wrote one. Before
    /// that, what setup would do is not yet a problem, and the built-in defaults' Google entry
    /// (named `coogle` in `~/.claude.json`) is nobody's.
    set_up: bool,
    failures: usize,
    warnings: usize,
}

impl Doctor<'_> {
    fn ok(&self, text: &str) {
        self.ui.ok(text);
    }

    fn warn(&mut self, text: &str, fix: &str) {
        self.warnings += 1;
        self.ui.warn(text);
        if !fix.is_empty() {
            self.ui.info(&format!("fix: {fix}"));
        }
    }

    fn fail(&mut self, text: &str, fix: &str) {
        self.failures += 1;
        self.ui.fail(text);
        if !fix.is_empty() {
            self.ui.info(&format!("fix: {fix}"));
        }
    }
}

/// `coogle doctor`.
pub fn run(paths: &GlobalPaths, args: &DoctorArgs) -> ExitCode {
    let mut d = Doctor {
        ui: Ui { interactive: false },
        paths,
        exe: stable_exe().path,
        shim: shim_for(paths, Upstream::Google),
        set_up: paths.config_file().exists(),
        failures: 0,
        warnings: 0,
    };
    d.ok(&format!("coogle {} at {}", wire::VERSION, d.exe.display()));
    d.shim_sibling();
    let config = d.config();
    let search_wanted = install::search_wanted(&paths.config_file());
    // The built-in defaults' upstream is what setup would configure, not a broken one.
    if let Some(config) = config.as_ref().filter(|_| d.set_up) {
        d.servers(config);
    }
    d.programs();
    d.search_key(search_wanted);
    let service = d.service();
    let claude_json = args
        .claude_json
        .clone()
        .unwrap_or_else(|| ClientKind::ClaudeCode.default_path());
    for kind in ClientKind::ALL {
        d.client(kind, &claude_json, search_wanted);
    }
    if let Some(config) = &config {
        d.shared(config, &claude_json);
    }
    let socket = paths.socket(config.as_ref());
    let (info, status) = daemon::ask(&socket);
    d.daemon(&socket, &info, &service);
    if let Some(status) = &status {
        d.upstreams(status, config.as_ref());
    }
    d.socket_permissions(&socket);
    d.verdict()
}

impl Doctor<'_> {
    fn verdict(&self) -> ExitCode {
        if self.failures == 0 && !self.set_up {
            self.ui
                .line("\ncoogle is not set up yet: `coogle setup` does it.");
            ExitCode::Success
        } else if self.failures == 0 && self.warnings > 0 {
            self.ui.line(&format!(
                "\nNo problems found ({} note{} marked ! above).",
                self.warnings,
                if self.warnings == 1 { "" } else { "s" }
            ));
            ExitCode::Success
        } else if self.failures == 0 {
            self.ui.line("\nEverything looks right.");
            ExitCode::Success
        } else {
            self.ui.line(&format!(
                "\n{} problem{} found.",
                self.failures,
                if self.failures == 1 { "" } else { "s" }
            ));
            ExitCode::Failure
        }
    }
}

/// The same file, through links.
fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
}
