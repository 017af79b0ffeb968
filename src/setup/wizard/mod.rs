//! `coogle setup`: nine steps, each in its own file. Environment, the Google OAuth client and
//! the search key, config.json, a throwaway test daemon, the service, the client configs, the
//! client's other stdio servers (`coogle share`), a run of the client entry, and a summary of
//! what changed.
//!
//! Every step has a non-interactive form (`--yes` and flags). A step that cannot go on without
//! an answer stops setup with an error and its fix; a step that fails without making the rest
//! meaningless is marked ✗ and setup goes on (exit 1 at the end).

mod clients;
mod config_file;
mod credentials;
mod environment;
mod search;
mod service;
mod share;

use std::path::PathBuf;

use super::args::SetupArgs;
use super::client_config::ClientKind;
use super::journal;
use super::ui::{self, Ui};
use super::{test_daemon, verify};
use crate::config::GlobalPaths;
use crate::error::InstallError;
use crate::output::ExitCode;
use credentials::Sources;

const STEPS: u32 = 9;

/// What the steps share.
struct Wizard<'a> {
    ui: Ui,
    args: &'a SetupArgs,
    paths: &'a GlobalPaths,
    /// config.json.
    cfg_path: PathBuf,
    /// Claude Code's config.
    claude_json: PathBuf,
    /// What changed, for the last step.
    summary: Vec<String>,
    /// The client files step 6 chose, for step 7.
    clients: Vec<(ClientKind, PathBuf)>,
    /// Client files step 6 could not change (said there): step 7 leaves them alone.
    failed_files: Vec<PathBuf>,
    /// A step failed and setup went on: exit 1.
    failed: bool,
}

/// `coogle setup`.
pub fn setup(paths: &GlobalPaths, args: &SetupArgs) -> ExitCode {
    let interactive = !args.yes;
    if interactive && !ui::has_terminal() {
        return InstallError::NeedsTerminal {
            command: "setup",
            asks: "asks questions",
        }
        .report();
    }
    let mut wizard = Wizard {
        ui: Ui { interactive },
        args,
        paths,
        cfg_path: paths.config_file(),
        claude_json: args
            .files
            .claude_json
            .clone()
            .unwrap_or_else(|| ClientKind::ClaudeCode.default_path()),
        summary: Vec::new(),
        clients: Vec::new(),
        failed_files: Vec::new(),
        failed: false,
    };
    match wizard.run() {
        Err(e) => e.report(),
        Ok(()) if wizard.failed => ExitCode::Failure,
        Ok(()) => ExitCode::Success,
    }
}

impl Wizard<'_> {
    fn run(&mut self) -> Result<(), InstallError> {
        self.ui.step(1, STEPS, "Environment");
        let exe = environment::check(&self.ui);
        // The record of what coogle changed: one that does not parse stops setup before it
        // changes anything (it is never overwritten), and what an interrupted run left
        // pending is settled first.
        let mut state = self.fatal(journal::load(
            &self.ui,
            std::slice::from_ref(&self.claude_json),
            false,
        ))?;

        self.ui.step(2, STEPS, "Google OAuth client");
        let sources = Sources {
            ui: &self.ui,
            args: self.args,
            cfg_path: &self.cfg_path,
            claude_json: &self.claude_json,
        };
        let creds = self.fatal(sources.choose())?;
        let search_key = self.fatal(search::choose(&self.ui, self.args, &self.cfg_path))?;

        self.ui.step(3, STEPS, "Config");
        self.write_config(&creds, search_key.as_deref())?;

        self.ui.step(4, STEPS, "Test daemon");
        self.test_daemon()?;

        self.ui.step(5, STEPS, "Service");
        self.install_service(&mut state, &creds);
        if let Err(e) = state.save() {
            self.ui
                .fail(&format!("could not record the setup state: {e}"));
            self.failed = true;
        }

        self.ui.step(6, STEPS, "Client configs");
        let entry = self.point_clients(&mut state, search_key.is_some());

        self.ui.step(7, STEPS, "Share other servers");
        self.share_others();

        self.ui.step(8, STEPS, "Verify");
        self.verify(entry.as_ref(), &exe);

        self.ui.step(9, STEPS, "Done");
        self.done();
        Ok(())
    }

    /// A step's error ends setup: its ✗ line here, the error and its fix on stderr.
    fn fatal<T>(&self, result: Result<T, InstallError>) -> Result<T, InstallError> {
        if let Err(e) = &result {
            self.ui.fail(&e.to_string());
        }
        result
    }

    /// Step 4: a failing test daemon stops setup unless the person chooses to go on.
    fn test_daemon(&mut self) -> Result<(), InstallError> {
        let ui = self.ui;
        if self.args.skip_test {
            ui.warn("skipped (--skip-test)");
            return Ok(());
        }
        match test_daemon::run(&ui, &self.cfg_path) {
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
                Ok(())
            }
            Err(e) => {
                ui.fail(&format!("the test daemon did not work: {e}"));
                if !ui.confirm("Continue anyway?", false) {
                    return Err(InstallError::TestDaemon(Box::new(e)));
                }
                self.failed = true;
                Ok(())
            }
        }
    }

    /// Step 8: run the Google entry as the client will.
    fn verify(&mut self, entry: Option<&serde_json::Value>, exe: &std::path::Path) {
        let ui = self.ui;
        match (entry, self.args.skip_verify) {
            (_, true) => ui.warn("skipped (--skip-verify)"),
            (None, _) => ui.warn("no client entry to run"),
            (Some(entry), false) => match verify::run(&ui, entry) {
                Ok(n) => ui.ok(&format!(
                    "the client entry `{} mcp` answered with {n} tools",
                    exe.display()
                )),
                Err(e) => {
                    ui.fail(&format!("running the client entry failed: {e}"));
                    self.failed = true;
                }
            },
        }
    }

    /// Step 9: what changed, and what to do next. After a failure it never says all is well:
    /// the failure was said at its step, and this says setup did not finish.
    fn done(&self) {
        let ui = self.ui;
        // One line per file, however many steps wrote it (config.json: the config step and the
        // share step), with the first backup, which holds the original.
        let mut said = std::collections::HashSet::new();
        for s in &self.summary {
            let file = s.split(" (backup ").next().unwrap_or(s);
            if said.insert(file) {
                ui.ok(&format!("changed: {s}"));
            }
        }
        if self.failed {
            ui.fail(
                "setup did not finish: fix what is marked ✗ above, then run `coogle setup` again",
            );
            return;
        }
        if self.summary.is_empty() {
            ui.ok("nothing needed changing: coogle was already set up");
        }
        ui.line("\nNext:");
        ui.line("  restart Claude Code (or run /mcp) so it starts `coogle mcp`");
        ui.line("  coogle status    the daemon, its upstream and sessions");
        ui.line("  coogle tools     the tools an agent sees");
        ui.line("  coogle doctor    check everything");
    }
}
