//! `coogle unshare`: give the recorded entries back exactly, then remove the upstreams
//! `share` added that no shared entry uses any more.
//!
//! An entry is restored only while it is still what `share` wrote; one the user edited since
//! is left as it is (and said so). A file whose only changes since were coogle's gets its
//! backup's exact bytes back ([`client_config::revert_file`]). An upstream is removed only
//! while it is as `share` wrote it. What could not be restored (a file that no longer parses)
//! stays recorded, so a later run can retry. A running daemon is told to reload, and keeps
//! serving a removed upstream until its next start (sessions may be using it). `--dry-run`
//! says all of that and changes nothing.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Select;
use super::daemon::{Change, tell_daemon};
use super::plan;
use crate::config::{Config, GlobalPaths};
use crate::error::InstallError;
use crate::fsutil::{self, FsError, Mode};
use crate::output::ExitCode;
use crate::setup::args::UnshareArgs;
use crate::setup::client_config::{self, Reverted, describe, shim_server};
use crate::setup::journal;
use crate::setup::state::{SharedEntry, State};
use crate::setup::ui::Ui;

/// `coogle unshare`.
pub fn unshare(paths: &GlobalPaths, args: &UnshareArgs) -> ExitCode {
    let (select, interactive) = match Select::from_flags(args.all, args.yes, &args.names, "unshare")
    {
        Ok(chosen) => chosen,
        Err(e) => return e.report(),
    };
    match run(&Ui { interactive }, paths, &select, args.dry_run) {
        Ok(true) => ExitCode::Success,
        Ok(false) => ExitCode::Failure,
        Err(e) => e.report(),
    }
}

/// Unshare everything (for `uninstall`); false when something could not be restored.
pub fn unshare_all(ui: &Ui, paths: &GlobalPaths, dry_run: bool) -> bool {
    match run(ui, paths, &Select::All, dry_run) {
        Ok(ok) => ok,
        Err(e) => {
            ui.fail(&e.to_string());
            false
        }
    }
}

fn run(ui: &Ui, paths: &GlobalPaths, select: &Select, dry_run: bool) -> Result<bool, InstallError> {
    let mut state = journal::load(ui, &[], dry_run)?;
    if state.shared.is_empty() && state.shared_upstreams.is_empty() {
        ui.ok("nothing is shared");
        return Ok(true);
    }
    let chosen = choose(ui, select, &state.shared)?;
    if dry_run {
        preview(ui, paths, &state, &chosen);
        ui.ok("dry run: nothing changed");
        return Ok(true);
    }
    let mut ok = true;
    let mut still_used = HashSet::new();
    let mut done: Vec<usize> = Vec::new();
    for (path, idx) in by_file(&state.shared, &chosen) {
        let entries: Vec<&SharedEntry> = idx.iter().map(|&i| &state.shared[i]).collect();
        match restore_file(ui, &path, &entries, &mut still_used) {
            Ok(()) => done.extend(idx),
            Err(e) => {
                ui.fail(&format!(
                    "{}: {e}; its entries stay recorded",
                    path.display()
                ));
                ok = false;
            }
        }
    }
    let mut i = 0;
    state.shared.retain(|_| {
        i += 1;
        !done.contains(&(i - 1))
    });
    ok &= save(ui, &state);
    ok &= remove_upstreams(ui, paths, &mut state, &still_used);
    ok &= save(ui, &state);
    Ok(ok)
}

/// Record what was given back; a record that cannot be written is a failure, and the next run
/// finds those entries given back already and finishes the record.
fn save(ui: &Ui, state: &State) -> bool {
    match state.save() {
        Ok(()) => true,
        Err(e) => {
            ui.fail(&format!(
                "could not record what was given back: {e}; the next `coogle unshare` finishes it"
            ));
            false
        }
    }
}

/// `--dry-run`: what giving back `chosen` would do to each file and to config.json.
fn preview(ui: &Ui, paths: &GlobalPaths, state: &State, chosen: &[usize]) {
    let mut would_remain: HashSet<&str> = HashSet::new();
    for (path, idx) in by_file(&state.shared, chosen) {
        let entries: Vec<&SharedEntry> = idx.iter().map(|&i| &state.shared[i]).collect();
        let label = entries[0].kind.label();
        let changes: Vec<_> = entries.iter().map(|e| e.change.clone()).collect();
        match client_config::preview_revert(&path, &changes) {
            Err(e) => ui.fail(&format!("{}: {e}", path.display())),
            Ok(report) => {
                for r in &report {
                    match r {
                        Reverted::Restored(w) | Reverted::Removed(w) => ui.info(&format!(
                            "{label}: would give back {w} ({})",
                            path.display()
                        )),
                        Reverted::AlreadyBack(w) => {
                            ui.info(&format!("{label}: {w} is already given back"))
                        }
                        Reverted::Skipped(w) => ui.warn(&format!(
                            "{label}: {w} was changed since it was shared; it would be left alone"
                        )),
                    }
                }
            }
        }
    }
    for (i, e) in state.shared.iter().enumerate() {
        if !chosen.contains(&i) {
            would_remain.insert(e.upstream.as_str());
        }
    }
    let cfg = paths.config_file();
    for u in &state.shared_upstreams {
        if !would_remain.contains(u.name.as_str()) {
            ui.info(&format!(
                "config: would remove upstream {} from {} (if it is still as shared and no edited entry runs it)",
                u.name,
                cfg.display()
            ));
        }
    }
}

/// Indexes of the recorded entries `select` picks: by upstream or entry name.
fn choose(ui: &Ui, select: &Select, shared: &[SharedEntry]) -> Result<Vec<usize>, InstallError> {
    let entry_name = |e: &SharedEntry| e.change.location.last().cloned().unwrap_or_default();
    match select {
        Select::All => Ok((0..shared.len()).collect()),
        Select::Names(names) => {
            let hit = |e: &SharedEntry, n: &String| e.upstream == *n || entry_name(e) == *n;
            let missing: Vec<&str> = names
                .iter()
                .filter(|n| !shared.iter().any(|e| hit(e, n)))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                let mut found: Vec<String> = shared.iter().map(|e| e.upstream.clone()).collect();
                found.dedup();
                return Err(InstallError::NothingNamed {
                    what: "shared server",
                    names: missing.join(", "),
                    found: found.join(", "),
                });
            }
            Ok((0..shared.len())
                .filter(|&i| names.iter().any(|n| hit(&shared[i], n)))
                .collect())
        }
        Select::Ask { .. } => {
            let items: Vec<String> = shared
                .iter()
                .map(|e| {
                    let at = describe(&e.change.location);
                    format!("{} {at} (upstream {})", e.kind.label(), e.upstream)
                })
                .collect();
            Ok(ui.multi_select("Give these entries back", &items, &vec![true; items.len()]))
        }
    }
}

/// The chosen indexes grouped by file, in record order.
fn by_file(shared: &[SharedEntry], chosen: &[usize]) -> Vec<(PathBuf, Vec<usize>)> {
    let mut out: Vec<(PathBuf, Vec<usize>)> = Vec::new();
    for &i in chosen {
        let path = &shared[i].path;
        match out.iter_mut().find(|(p, _)| p == path) {
            Some((_, v)) => v.push(i),
            None => out.push((path.clone(), vec![i])),
        }
    }
    out
}

/// Revert one file's entries; an edited entry that still runs its upstream keeps it in use.
fn restore_file(
    ui: &Ui,
    path: &Path,
    entries: &[&SharedEntry],
    still_used: &mut HashSet<String>,
) -> Result<(), FsError> {
    let label = entries[0].kind.label();
    let changes: Vec<_> = entries.iter().map(|e| e.change.clone()).collect();
    let mut backups: Vec<PathBuf> = entries.iter().filter_map(|e| e.backup.clone()).collect();
    backups.dedup();
    let (_, report) = client_config::revert_file(path, &changes, &backups)?;
    let now = fsutil::read_optional(path)?
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .unwrap_or(Value::Null);
    for r in &report {
        match r {
            Reverted::Restored(w) | Reverted::Removed(w) => {
                ui.ok(&format!("{label}: gave back {w}"))
            }
            Reverted::AlreadyBack(w) => ui.ok(&format!("{label}: {w} was already given back")),
            Reverted::Skipped(w) => {
                ui.warn(&format!(
                    "{label}: {w} was changed since it was shared; left alone"
                ));
            }
        }
    }
    for e in entries {
        let current = client_config::get_path(&now, &e.change.location);
        if let Some(cur) = current
            && cur != e.change.original.as_ref().unwrap_or(&Value::Null)
            && client_config::looks_like_coogle(cur)
            && shim_server(cur) == e.upstream
        {
            still_used.insert(e.upstream.clone());
        }
    }
    Ok(())
}

/// Remove the upstreams `share` added that nothing uses now.
fn remove_upstreams(
    ui: &Ui,
    paths: &GlobalPaths,
    state: &mut State,
    still_used: &HashSet<String>,
) -> bool {
    let used: HashSet<&str> = state.shared.iter().map(|e| e.upstream.as_str()).collect();
    let (unused, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut state.shared_upstreams)
        .into_iter()
        .partition(|u| !used.contains(u.name.as_str()) && !still_used.contains(&u.name));
    state.shared_upstreams = kept;
    if unused.is_empty() {
        return true;
    }
    for name in still_used {
        ui.info(&format!(
            "upstream {name} stays: an edited entry still runs it"
        ));
    }
    let remove: Vec<(String, Value)> = unused
        .iter()
        .map(|u| (u.name.clone(), u.block.clone()))
        .collect();
    let cfg = paths.config_file();
    let mut edited = Vec::new();
    let target = fsutil::resolve(&cfg);
    let result = fsutil::update_json(&cfg, Mode::Exactly(0o600), fsutil::Lock::None, |doc| {
        let Some(doc) = doc else { return Ok(None) };
        let (new, e) = plan::remove_servers(doc, &remove);
        edited = e;
        if &new == doc {
            return Ok(None);
        }
        Config::from_value(new.clone(), Some(target.clone())).map_err(|e| FsError::Refused {
            path: target.clone(),
            detail: format!("the config without the shared upstreams would not load: {e}"),
        })?;
        Ok(Some(new))
    });
    if let Err(e) = result {
        ui.fail(&format!("config: {e}"));
        state.shared_upstreams.extend(unused);
        return false;
    }
    for u in &unused {
        if edited.contains(&u.name) {
            ui.warn(&format!(
                "config: upstream {} was edited since it was shared; kept",
                u.name
            ));
        } else {
            ui.ok(&format!("config: removed upstream {}", u.name));
        }
    }
    if unused.iter().any(|u| !edited.contains(&u.name)) {
        tell_daemon(ui, paths, Change::Removed);
    }
    true
}
