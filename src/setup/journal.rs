//! The installer as a transaction: every change of a client file is recorded as pending in the
//! state file before the file changes, and settled from what the file then holds. The same
//! settling finishes the record of a run that died between the two (SIGKILL, a full disk, a
//! power cut), so `share`, `unshare`, `setup` and `uninstall` always start from a record that
//! says what the client files hold.
//!
//! Settling one pending change, by what is at its place in the file now:
//! - what coogle meant to write (or, through the `claude` CLI, the same `coogle mcp` command and
//!   arguments, which the CLI may store with other keys): done, recorded as done;
//! - the original (or nothing, where there was nothing): not done, forgotten;
//! - nothing, where the `claude` CLI had removed the original to add coogle's: the original is
//!   put back (the run died between `claude mcp remove` and `add-json`);
//! - anything else: someone changed it since; forgotten, and said so.
//!
//! A file that cannot be read or parsed now keeps its pending record for a later run. This
//! module also sweeps what dead coogle processes left beside the files (temp files, locks).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::claude_cli;
use super::client_config::{self, Change, ClientKind, describe, looks_like_coogle};
use super::state::{ClientState, Pending, PendingChange, SharedEntry, State};
use super::ui::Ui;
use crate::error::InstallError;
use crate::fsutil::{self, FsError};

/// Record `pending` (replacing an earlier record of the same write) and save the state; an
/// error means the write must not happen.
pub fn begin(state: &mut State, pending: Pending) -> Result<(), FsError> {
    state
        .pending
        .retain(|p| !(p.path == pending.path && p.via_cli == pending.via_cli));
    state.pending.push(pending);
    state.save()
}

/// The pending record of a write of `path`: its changes (with the upstream each runs behind)
/// and the backup, as [`fsutil::update_journaled`]'s journal reports it.
pub fn pending(
    kind: ClientKind,
    path: &Path,
    changes: &[Change],
    upstream_at: &dyn Fn(&[String]) -> Option<String>,
    backup: Option<&Path>,
    via_cli: bool,
) -> Pending {
    Pending {
        kind,
        path: fsutil::resolve(path),
        changes: changes
            .iter()
            .map(|c| PendingChange {
                change: c.clone(),
                upstream: upstream_at(&c.location),
            })
            .collect(),
        backup: backup.map(Path::to_path_buf),
        via_cli,
    }
}

/// How one pending change was settled.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// It is in the file: recorded as done.
    Done(String),
    /// It never reached the file.
    NotMade(String),
    /// The original, which an interrupted `claude mcp` run had removed, was put back.
    PutBack(String),
    /// The entry holds something else now: left as it is.
    Changed(String),
    /// The file could not be checked: the record stays pending.
    Kept { path: PathBuf, why: String },
}

/// Settle the pending records of `only` (every file when `None`). With `dry_run`, nothing is
/// written: an original that would be put back is only reported.
pub fn settle(state: &mut State, only: Option<&Path>, dry_run: bool) -> Vec<Settled> {
    let mut out = Vec::new();
    let mut kept = Vec::new();
    for p in std::mem::take(&mut state.pending) {
        if only.is_some_and(|o| fsutil::resolve(o) != p.path) {
            kept.push(p);
            continue;
        }
        match settle_one(state, &p, dry_run, &mut out) {
            Ok(()) => {}
            Err(e) => {
                out.push(Settled::Kept {
                    path: p.path.clone(),
                    why: e.to_string(),
                });
                kept.push(p);
            }
        }
    }
    state.pending = kept;
    out
}

fn settle_one(
    state: &mut State,
    p: &Pending,
    dry_run: bool,
    out: &mut Vec<Settled>,
) -> Result<(), FsError> {
    let doc = match fsutil::read_optional(&p.path)? {
        Some(bytes) => fsutil::parse_json(&bytes, &p.path)?,
        // The file is gone: nothing of this write is anywhere to record.
        None => Value::Null,
    };
    for pc in &p.changes {
        let c = &pc.change;
        let what = format!("{} {}", p.kind.label(), describe(&c.location));
        let now = client_config::get_path(&doc, &c.location);
        if let Some(now) = now.filter(|now| is_written(now, &c.written, p.via_cli)) {
            let mut change = c.clone();
            change.written = now.clone();
            record_done(state, p, change, pc.upstream.clone());
            out.push(Settled::Done(what));
        } else if now == c.original.as_ref() {
            out.push(Settled::NotMade(what));
        } else if let (None, Some(original), true, false) =
            (now, &c.original, p.via_cli, doc.is_null())
        {
            if !dry_run {
                claude_cli::put_back(&p.path, &c.location, original)?;
            }
            out.push(Settled::PutBack(what));
        } else {
            out.push(Settled::Changed(what));
        }
    }
    Ok(())
}

/// True when `now` is what coogle wrote: the same value, or, through the `claude` CLI (which
/// stores an entry with keys of its own), an entry that runs the same `coogle mcp` command and
/// arguments.
fn is_written(now: &Value, written: &Value, via_cli: bool) -> bool {
    now == written
        || (via_cli
            && looks_like_coogle(now)
            && now.get("command") == written.get("command")
            && now.get("args") == written.get("args"))
}

/// Record a change as done, once: a change the `claude` CLI did not finish is also in the
/// direct write that followed it, and both records settle to the same change.
fn record_done(state: &mut State, p: &Pending, change: Change, upstream: Option<String>) {
    match upstream {
        Some(upstream) => {
            if !state
                .shared
                .iter()
                .any(|e| e.path == p.path && e.change == change)
            {
                state.shared.push(SharedEntry {
                    kind: p.kind,
                    path: p.path.clone(),
                    change,
                    upstream,
                    backup: p.backup.clone(),
                });
            }
        }
        None => {
            let idx = match state.clients.iter().position(|c| c.path == p.path) {
                Some(i) => i,
                None => {
                    state.clients.push(ClientState {
                        kind: p.kind,
                        path: p.path.clone(),
                        backups: Vec::new(),
                        changes: Vec::new(),
                    });
                    state.clients.len() - 1
                }
            };
            let entry = &mut state.clients[idx];
            if let Some(b) = &p.backup
                && !entry.backups.contains(b)
            {
                entry.backups.push(b.clone());
            }
            if !entry.changes.contains(&change) {
                entry.changes.push(change);
            }
        }
    }
}

/// The state for an installer command: loaded, what an interrupted run left pending settled
/// (and said), and leftovers of dead coogle processes swept from beside `files`, the recorded
/// files and the state file. With `dry_run` nothing is written. A state file that does not
/// parse is an error: it is never overwritten.
pub fn load(ui: &Ui, files: &[PathBuf], dry_run: bool) -> Result<State, InstallError> {
    let mut state = State::load().map_err(InstallError::ReadState)?;
    if !dry_run {
        let mut all: Vec<PathBuf> = files.to_vec();
        all.extend(state.clients.iter().map(|c| c.path.clone()));
        all.extend(state.shared.iter().map(|e| e.path.clone()));
        all.extend(state.pending.iter().map(|p| p.path.clone()));
        all.push(super::state::state_path());
        all.push(crate::config::default_path());
        all.sort();
        all.dedup();
        for f in &all {
            let swept = fsutil::sweep(f);
            for t in &swept.temp_files {
                ui.info(&format!(
                    "removed {}, left by a coogle run that was interrupted",
                    t.display()
                ));
            }
            if let Some(l) = &swept.lock {
                ui.info(&format!(
                    "removed the lock {}, left by a coogle run that was interrupted",
                    l.display()
                ));
            }
        }
    }
    if state.pending.is_empty() {
        return Ok(state);
    }
    let settled = settle(&mut state, None, dry_run);
    report(ui, &settled, dry_run);
    if !dry_run {
        state.save().map_err(InstallError::WriteState)?;
    }
    Ok(state)
}

/// Say how an interrupted run's changes were settled.
fn report(ui: &Ui, settled: &[Settled], dry_run: bool) {
    ui.info("an earlier coogle run was interrupted; its changes:");
    for s in settled {
        match s {
            Settled::Done(w) => ui.ok(&format!("{w} runs coogle: recorded")),
            Settled::NotMade(w) => ui.ok(&format!("{w} was not changed")),
            Settled::PutBack(w) if dry_run => ui.warn(&format!(
                "{w} is missing (an interrupted `claude mcp` run removed it): it would be put back"
            )),
            Settled::PutBack(w) => ui.ok(&format!(
                "{w} was missing (an interrupted `claude mcp` run removed it): put back"
            )),
            Settled::Changed(w) => ui.warn(&format!(
                "{w} was changed by something else since; left as it is"
            )),
            Settled::Kept { path, why } => ui.fail(&format!(
                "could not check {}: {why}; it stays recorded for the next run",
                path.display()
            )),
        }
    }
}

/// After a write of `path` (done, or failed at any point): settle its pending record from
/// what the file holds, and save the state. Returns false, having said why, when a record
/// could not be settled or saved; the next run then finishes it.
pub fn finish(ui: &Ui, state: &mut State, path: &Path) -> bool {
    let settled = settle(state, Some(path), false);
    if settled.is_empty() {
        // Nothing was recorded for this file (it failed before its write began).
        return true;
    }
    let mut ok = true;
    for s in &settled {
        if let Settled::Kept { path, why } = s {
            ui.fail(&format!(
                "could not check {}: {why}; it stays recorded for the next run",
                path.display()
            ));
            ok = false;
        }
    }
    if let Err(e) = state.save() {
        ui.fail(&format!(
            "could not record the change: {e}; the next coogle share, unshare, setup or uninstall records it"
        ));
        ok = false;
    }
    ok
}
