//! Carrying out a share: config.json first (the new upstreams, 0600, only when the result
//! loads, and recorded before it is written), then each client file (its rewrites in one atomic
//! write, or the `claude` CLI for user-scope entries), each change recorded as pending before
//! the file changes and settled right after (see `journal`), and last a running daemon asked
//! to `reload`, so it serves the new upstreams without stopping anyone's calls (see `daemon`).
//!
//! When the record cannot be written (a full disk), no client file is changed: a client entry
//! coogle does not know it changed is one `unshare` could never give back.

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
use crate::setup::client_config::{self, ClientKind, Intent, Journal, Patched};
use crate::setup::journal;
use crate::setup::launch::shim_for;
use crate::setup::state::{AddedUpstream, State};
use crate::setup::ui::Ui;

/// Share `chosen` (see the module doc for the order of writes), recording in `state`.
pub fn apply(
    ui: &Ui,
    paths: &GlobalPaths,
    opts: &ShareOptions,
    chosen: &[&Candidate],
    state: &mut State,
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
    let mut outcome = Outcome::default();
    let added: Vec<(String, Value)> = assigned
        .iter()
        .filter_map(|a| Some((a.upstream.clone(), a.block.clone()?)))
        .collect();
    let config_changed = !added.is_empty();
    if config_changed {
        add_upstreams(ui, state, &cfg_path, &added, &mut outcome)?;
    }
    let (command, options) = {
        let shim = shim_for(paths, client_config::Upstream::Google);
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
        let mut unrecorded = false;
        let result = {
            let mut journal = |intent: Intent<'_>| {
                let pending = journal::pending(
                    kind,
                    &path,
                    intent.changes,
                    &upstream_at,
                    intent.backup,
                    intent.via_cli,
                );
                journal::begin(state, pending).inspect_err(|_| unrecorded = true)
            };
            rewrite_file(kind, &path, &rewrites, opts.use_cli, &mut journal)
        };
        match result {
            Ok(p) => report(ui, kind, &p, &mut outcome),
            Err(e) if unrecorded => {
                ui.fail(&format!(
                    "{}: could not record the change ({e}); {} was left unchanged",
                    kind.label(),
                    path.display()
                ));
                outcome.failed = true;
            }
            Err(e) => {
                ui.fail(&format!("{}: {e}", kind.label()));
                outcome.failed = true;
            }
        }
        outcome.failed |= !journal::finish(ui, state, &path);
    }
    if config_changed {
        tell_daemon(ui, paths, Change::Added);
    }
    Ok(outcome)
}

/// Record the upstreams, then add them to config.json; when the record cannot be written,
/// config.json is not touched, and when config.json cannot be, the record is taken back.
fn add_upstreams(
    ui: &Ui,
    state: &mut State,
    cfg_path: &Path,
    added: &[(String, Value)],
    outcome: &mut Outcome,
) -> Result<(), InstallError> {
    let before = state.shared_upstreams.clone();
    for (name, block) in added {
        if !state
            .shared_upstreams
            .iter()
            .any(|u| u.name == *name && u.block == *block)
        {
            state.shared_upstreams.push(AddedUpstream {
                name: name.clone(),
                block: block.clone(),
            });
        }
    }
    state.save().map_err(InstallError::WriteState)?;
    let written = match write_config(cfg_path, added) {
        Ok(w) => w,
        Err(e) => {
            state.shared_upstreams = before;
            // Best effort: an upstream recorded but never added is removed by nobody and
            // harms nothing (unshare removes only what is still as written).
            let _ = state.save();
            return Err(InstallError::WriteConfig(e));
        }
    };
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
    Ok(())
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
    journal: &mut Journal<'_>,
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
            claude_cli::apply(path, &plan, &stored_ok, &cli, journal)
        }
        None => client_config::apply_file(path, &plan, journal),
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
            client_config::describe(&c.location),
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
