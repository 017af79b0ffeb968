//! `coogle share` and `coogle unshare`: moving any stdio MCP server entry of Claude Code,
//! Claude Desktop or Cursor behind the daemon, and giving the original entries back.
//!
//! Sharing an entry adds an upstream to config.json (its command, args, env and cwd: the env's
//! secrets move into that 0600 file and never onto an argv), then rewrites the entry to
//! `coogle mcp --server NAME`, with setup's machinery (backup, atomic write under Claude Code's
//! lock, the `claude` CLI for user-scope entries where setup uses it, unparsable files
//! refused). config.json is written first, so an entry never names an upstream that does not
//! exist. Every rewrite is recorded in the state file (the exact original value, where it
//! was, the backup) so `unshare` and `uninstall` can give it back exactly.
//!
//! Its parts: `launch` (what an entry starts; equal launches share one upstream), `scan` (the
//! entries of every client file), `plan` (names, replacements, config edits: pure), `apply`
//! (writing the files and the record), `daemon` (a running daemon told to reload) and
//! `unshare`.

mod apply;
mod daemon;
mod launch;
mod plan;
mod scan;
mod unshare;

use std::path::PathBuf;

use super::args::ShareArgs;
use super::client_config::ClientKind;
use super::journal;
use super::ui::{self, Ui};
use crate::config::GlobalPaths;
use crate::error::InstallError;
use crate::output::ExitCode;
use scan::Candidate;

pub use unshare::{unshare, unshare_all};

/// Which entries to share.
#[derive(Debug, Clone, PartialEq)]
pub enum Select {
    All,
    /// Entries with these names (in any client and project).
    Names(Vec<String>),
    /// Ask (a terminal is needed); `checked`: whether every entry starts checked.
    Ask {
        checked: bool,
    },
}

impl Select {
    /// From `share`'s or `unshare`'s flags (`--all`, `--yes`, names), with whether to ask on a
    /// terminal; asking without one is a usage error saying what to pass.
    pub fn from_flags(
        all: bool,
        yes: bool,
        names: &[String],
        command: &'static str,
    ) -> Result<(Select, bool), InstallError> {
        let select = if all || (yes && names.is_empty()) {
            Select::All
        } else if !names.is_empty() {
            Select::Names(names.to_vec())
        } else {
            Select::Ask { checked: true }
        };
        let interactive = ui::has_terminal() && !yes;
        if matches!(select, Select::Ask { .. }) && !interactive {
            return Err(InstallError::NeedsSelection { command });
        }
        Ok((select, interactive))
    }
}

/// How a share runs: from `coogle share`'s flags, or setup's.
#[derive(Debug, Clone)]
pub struct ShareOptions {
    pub select: Select,
    pub dry_run: bool,
    /// The client files to look in.
    pub files: Vec<(ClientKind, PathBuf)>,
    /// Register user-scope Claude Code entries with the `claude` CLI when it is found.
    pub use_cli: bool,
}

/// What a share did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Lines for setup's summary: the files changed.
    pub summary: Vec<String>,
    /// Something failed and the rest went on: exit 1.
    pub failed: bool,
}

/// `coogle share`.
pub fn share(paths: &GlobalPaths, args: &ShareArgs) -> ExitCode {
    let (select, interactive) = match Select::from_flags(args.all, args.yes, &args.names, "share") {
        Ok(chosen) => chosen,
        Err(e) => return e.report(),
    };
    let path_for = |kind: ClientKind| {
        match kind {
            ClientKind::ClaudeCode => args.files.claude_json.clone(),
            ClientKind::ClaudeDesktop => args.files.desktop_config.clone(),
            ClientKind::Cursor => args.files.cursor_config.clone(),
        }
        .unwrap_or_else(|| kind.default_path())
    };
    let opts = ShareOptions {
        select,
        dry_run: args.dry_run,
        files: ClientKind::ALL.iter().map(|k| (*k, path_for(*k))).collect(),
        use_cli: !args.no_claude_cli && args.files.claude_json.is_none(),
    };
    match run(&Ui { interactive }, paths, &opts) {
        Err(e) => e.report(),
        Ok(o) if o.failed => ExitCode::Failure,
        Ok(_) => ExitCode::Success,
    }
}

/// Share what `opts` selects; setup's step calls this too. A client file that cannot be read
/// or parsed is a failure (said once, exit 1), and is never written; the other files go on.
pub fn run(ui: &Ui, paths: &GlobalPaths, opts: &ShareOptions) -> Result<Outcome, InstallError> {
    let files: Vec<PathBuf> = opts.files.iter().map(|(_, p)| p.clone()).collect();
    // What an interrupted run left is settled first, so what is shared is what the files say.
    let mut state = journal::load(ui, &files, opts.dry_run)?;
    let found = scan::scan(&opts.files);
    let mut outcome = Outcome::default();
    for (kind, e) in &found.refused {
        ui.fail(&format!("{}: {e}", kind.label()));
        ui.info("hint: fix the file (or restore a backup), then run `coogle share` again");
        outcome.failed = true;
    }
    for (what, why) in &found.unsupported {
        ui.warn(&format!("{what} {why}; left alone"));
    }
    if found.candidates.is_empty() {
        let counts = format!(
            "{} already shared, {} not stdio",
            found.already_shared, found.not_stdio
        );
        if outcome.failed {
            ui.info(&format!("nothing else to share ({counts})"));
        } else {
            ui.ok(&format!("nothing to share ({counts})"));
        }
        return Ok(outcome);
    }
    let chosen = choose(ui, &opts.select, &found.candidates)?;
    if chosen.is_empty() {
        ui.ok("nothing chosen; nothing changed");
        return Ok(outcome);
    }
    let done = apply::apply(ui, paths, opts, &chosen, &mut state)?;
    outcome.summary = done.summary;
    outcome.failed |= done.failed;
    Ok(outcome)
}

/// The candidates `select` picks, in file order.
fn choose<'a>(
    ui: &Ui,
    select: &Select,
    candidates: &'a [Candidate],
) -> Result<Vec<&'a Candidate>, InstallError> {
    match select {
        Select::All => Ok(candidates.iter().collect()),
        Select::Names(names) => {
            let matches =
                |c: &Candidate, n: &String| c.name() == n || launch::server_name(c.name()) == *n;
            let missing: Vec<&String> = names
                .iter()
                .filter(|n| !candidates.iter().any(|c| matches(c, n)))
                .collect();
            if !missing.is_empty() {
                let mut found: Vec<&str> = candidates.iter().map(Candidate::name).collect();
                found.dedup();
                return Err(InstallError::NothingNamed {
                    what: "stdio server entry",
                    names: join(missing.iter().map(|s| s.as_str())),
                    found: join(found.into_iter()),
                });
            }
            Ok(candidates
                .iter()
                .filter(|c| names.iter().any(|n| matches(c, n)))
                .collect())
        }
        Select::Ask { checked } => {
            let items: Vec<String> = candidates
                .iter()
                .map(|c| format!("{}  ({})", c.describe(), c.launch.command_line()))
                .collect();
            let picked = ui.multi_select(
                "Share these servers through coogle (one child for all sessions)",
                &items,
                &vec![*checked; items.len()],
            );
            Ok(picked.into_iter().map(|i| &candidates[i]).collect())
        }
    }
}

fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}
