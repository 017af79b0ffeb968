//! Carrying out a share: config.json first (the new upstreams, 0600, only when the result
//! loads), then each client file (its rewrites in one atomic write, or the `claude` CLI for
//! user-scope entries), each change recorded in the state file as soon as it is made, and
//! last a running daemon asked to `reload`, so it serves the new upstreams without stopping
//! anyone's calls (see `daemon`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::daemon::{Change, tell_daemon};
use super::plan::{self, Assigned, Rewrite};
use super::scan::Candidate;
use super::{Outcome, ShareOptions};
use crate::config::GlobalPaths;
use crate::error::InstallError;
use crate::fsutil::{self, FsError, Written};
use crate::setup::claude_cli::{self, ClaudeCli};
use crate::setup::claude_config::{self, ClientKind, Patched};
use crate::setup::launch::shim_for;
use crate::setup::state::{AddedUpstream, SharedEntry, State};
use crate::setup::ui::Ui;

/// Share `chosen` (see the module doc for the order of writes).
pub fn apply(
    ui: &Ui,
    paths: &GlobalPaths,
    opts: &ShareOptions,
    chosen: &[&Candidate],
) -> Result<Outcome, InstallError> {
    let cfg_path = paths.config_file();
    let user = read_config(&cfg_path)?;
    let native = crate::config::native_shape(&user);
    let servers = native["servers"].as_object().cloned().unwrap_or_default();
    let assigned = plan::assign(chosen, &servers);
    show_plan(ui, chosen, &assigned, opts.dry_run);
    if opts.dry_run {
        ui.ok("dry run: nothing changed");
        return Ok(Outcome::default());
    }
    let mut state = State::load().map_err(InstallError::ReadState)?;
    let mut outcome = Outcome::default();
    let added: Vec<(String, Value)> = assigned
        .iter()
        .filter_map(|a| Some((a.upstream.clone(), a.block.clone()?)))
        .collect();
    let config_changed = !added.is_empty();
    if config_changed {
        let written = write_config(&cfg_path, &added).map_err(InstallError::WriteConfig)?;
        state
            .shared_upstreams
            .extend(added.iter().map(|(name, block)| AddedUpstream {
                name: name.clone(),
                block: block.clone(),
            }));
        save(ui, &state);
        let names: Vec<&str> = added.iter().map(|(n, _)| n.as_str()).collect();
        ui.ok(&format!(
            "config: added upstream{} {} to {} (mode 0600)",
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            cfg_path.display()
        ));
        if let Written::Replaced { backup } = &written {
            ui.info(&format!("backup: {}", backup.display()));
        }
        outcome
            .summary
            .push(format!("config {}", cfg_path.display()));
    }
    let (command, options) = {
        let shim = shim_for(paths, claude_config::Upstream::Google);
        (shim.command, shim.options)
    };
    for (kind, path, group) in by_file(chosen, &assigned) {
        let rewrites: Vec<Rewrite> = group
            .iter()
            .map(|(c, a)| Rewrite {
                location: c.location.clone(),
                original: c.entry.clone(),
                written: plan::shared_entry(&c.entry, &command, &options, &a.upstream),
            })
            .collect();
        let upstream_at = |loc: &[String]| {
            group
                .iter()
                .find(|(c, _)| c.location == loc)
                .map(|(_, a)| a.upstream.clone())
        };
        match rewrite_file(kind, &path, &rewrites, opts.use_cli) {
            Ok(p) => {
                report(ui, kind, &p, &mut outcome);
                record(&mut state, kind, &p, &upstream_at);
                save(ui, &state);
            }
            Err(e) => {
                ui.fail(&format!("{}: {e}", kind.label()));
                outcome.failed = true;
            }
        }
    }
    if config_changed {
        tell_daemon(ui, paths, Change::Added);
    }
    Ok(outcome)
}

/// The user's config.json as written (`{}` when there is none); one that does not parse is
/// an error, and nothing is changed.
fn read_config(path: &Path) -> Result<Value, InstallError> {
    let target = fsutil::resolve(path);
    match fsutil::read_optional(&target).map_err(InstallError::WriteConfig)? {
        None => Ok(json!({})),
        Some(bytes) => fsutil::parse_json(&bytes, &target).map_err(InstallError::WriteConfig),
    }
}

/// Add the upstreams to config.json (0600, backup first), only when the result loads.
pub(super) fn write_config(path: &Path, added: &[(String, Value)]) -> Result<Written, FsError> {
    crate::setup::config_write::update_config(path, |doc| {
        plan::add_servers(doc.unwrap_or(&json!({})), added)
    })
}

fn show_plan(ui: &Ui, chosen: &[&Candidate], assigned: &[Assigned], dry_run: bool) {
    let verb = if dry_run { "would run" } else { "runs" };
    for (c, a) in chosen.iter().zip(assigned) {
        let new = if a.block.is_some() { ", new" } else { "" };
        ui.info(&format!(
            "{} {verb} behind upstream {} ({}{new}): {}",
            c.describe(),
            a.upstream,
            c.launch.sharing().as_str(),
            c.launch.command_line()
        ));
    }
}

type Group<'a> = Vec<(&'a Candidate, &'a Assigned)>;

/// The candidates grouped by file, files in the order first seen.
fn by_file<'a>(
    chosen: &[&'a Candidate],
    assigned: &'a [Assigned],
) -> Vec<(ClientKind, PathBuf, Group<'a>)> {
    let mut out: Vec<(ClientKind, PathBuf, Group<'a>)> = Vec::new();
    for (c, a) in chosen.iter().zip(assigned) {
        match out.iter_mut().find(|(_, p, _)| *p == c.path) {
            Some((_, _, g)) => g.push((c, a)),
            None => out.push((c.kind, c.path.clone(), vec![(c, a)])),
        }
    }
    out
}

/// Rewrite one file's entries: user-scope Claude Code entries through the `claude` CLI when
/// `use_cli` and it is found, everything else directly.
fn rewrite_file(
    kind: ClientKind,
    path: &Path,
    rewrites: &[Rewrite],
    use_cli: bool,
) -> Result<Patched, FsError> {
    let plan = plan::file_plan(rewrites);
    let cli = (kind == ClientKind::ClaudeCode && use_cli)
        .then(ClaudeCli::find)
        .flatten();
    match cli {
        Some(cli) => {
            // The CLI may normalize what it stores: it is ours when it runs the same shim.
            let stored_ok = |stored: &Value| {
                rewrites.iter().any(|r| {
                    stored.get("command") == r.written.get("command")
                        && stored.get("args") == r.written.get("args")
                })
            };
            claude_cli::apply(path, &plan, &stored_ok, &cli)
        }
        None => claude_config::apply_file(path, &plan),
    }
}

fn report(ui: &Ui, kind: ClientKind, p: &Patched, outcome: &mut Outcome) {
    let label = kind.label();
    if p.via_claude_cli {
        ui.ok(&format!(
            "{label}: user-scope entries registered through `claude mcp add-json --scope user`"
        ));
    }
    if let Some(e) = &p.cli_error {
        ui.warn(&format!(
            "{label}: the claude CLI did not do it ({e}); patched the file directly"
        ));
    }
    for c in &p.changes {
        let args = c.written.get("args").and_then(Value::as_array);
        let server = args.and_then(|a| a.get(2)).and_then(Value::as_str);
        ui.ok(&format!(
            "{label}: {} now runs `coogle mcp --server {}`",
            claude_config::describe(&c.location),
            server.unwrap_or("?")
        ));
    }
    if let Written::Replaced { backup } = &p.written {
        ui.info(&format!("backup: {}", backup.display()));
        outcome.summary.push(format!(
            "{label} {} (backup {})",
            p.path.display(),
            backup.display()
        ));
    }
}

fn record(
    state: &mut State,
    kind: ClientKind,
    p: &Patched,
    upstream_at: &dyn Fn(&[String]) -> Option<String>,
) {
    let backup = match &p.written {
        Written::Replaced { backup } => Some(backup.clone()),
        _ => None,
    };
    for change in &p.changes {
        let Some(upstream) = upstream_at(&change.location) else {
            continue;
        };
        state.shared.push(SharedEntry {
            kind,
            path: p.path.clone(),
            change: change.clone(),
            upstream,
            backup: backup.clone(),
        });
    }
}

pub(super) fn save(ui: &Ui, state: &State) {
    if let Err(e) = state.save() {
        ui.warn(&format!("could not record the change: {e}"));
    }
}
