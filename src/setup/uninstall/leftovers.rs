//! What coogle leaves on disk once it is uninstalled, and `--purge`, which removes it: the
//! backups it took beside every file it changed (those of config.json hold the OAuth client
//! secret), the daemon's cache and log directories, and the directories setup created for the
//! service file once they are empty again. Only what coogle made is ever touched: backups by
//! their `.coogle-backup-` names beside the files coogle writes, coogle's own directories, and
//! directories the state file records as created by setup.

use std::path::{Path, PathBuf};

use super::super::ui::Ui;
use crate::fsutil;

/// What is left, grouped for people.
#[derive(Debug, Default)]
pub(super) struct Leftovers {
    /// Per file coogle wrote: its backups.
    pub backups: Vec<(PathBuf, Vec<PathBuf>)>,
    /// The cache and the log directories, when they exist.
    pub dirs: Vec<(&'static str, PathBuf)>,
    /// Directories setup created, empty now.
    pub empty_dirs: Vec<PathBuf>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.backups.is_empty() && self.dirs.is_empty() && self.empty_dirs.is_empty()
    }
}

/// `<name>.coogle-backup-…` files beside `file`, oldest first.
fn backups_of(file: &Path) -> Vec<PathBuf> {
    let target = fsutil::resolve(file);
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.coogle-backup-", name.to_string_lossy());
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// What is left beside `files` (the files coogle writes), in coogle's own directories `dirs`,
/// and of `created` (directories setup made).
pub(super) fn find(
    files: &[PathBuf],
    dirs: &[(&'static str, PathBuf)],
    created: &[PathBuf],
) -> Leftovers {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut out = Leftovers::default();
    for f in files {
        let target = fsutil::resolve(f);
        if seen.contains(&target) {
            continue;
        }
        seen.push(target.clone());
        let b = backups_of(&target);
        if !b.is_empty() {
            out.backups.push((target, b));
        }
    }
    out.dirs = dirs.iter().filter(|(_, d)| d.is_dir()).cloned().collect();
    // Innermost first, so removing one can empty the next.
    let mut created: Vec<PathBuf> = created.to_vec();
    created.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    out.empty_dirs = created.into_iter().filter(|d| d.is_dir()).collect();
    out
}

fn is_empty_dir(d: &Path) -> bool {
    std::fs::read_dir(d).is_ok_and(|mut it| it.next().is_none())
}

/// Say what stays and where (`dry_run`: what would).
pub(super) fn list(ui: &Ui, left: &Leftovers, dry_run: bool) {
    if left.is_empty() {
        return;
    }
    let verb = if dry_run { "would stay" } else { "left" };
    for (file, backups) in &left.backups {
        ui.info(&format!(
            "{verb}: {} backup{} of {} ({}.coogle-backup-*)",
            backups.len(),
            if backups.len() == 1 { "" } else { "s" },
            file.display(),
            file.display()
        ));
    }
    for (what, d) in &left.dirs {
        ui.info(&format!("{verb}: the {what} {}", d.display()));
    }
    for d in &left.empty_dirs {
        if is_empty_dir(d) {
            ui.info(&format!(
                "{verb}: {} (empty; setup created it)",
                d.display()
            ));
        }
    }
    ui.info("`coogle uninstall --purge` removes them");
}

/// Remove what is left; false when something could not be removed (said).
pub(super) fn purge(ui: &Ui, left: &Leftovers, dry_run: bool) -> bool {
    let mut ok = true;
    for (file, backups) in &left.backups {
        if dry_run {
            ui.info(&format!(
                "would remove {} backup{} of {}",
                backups.len(),
                if backups.len() == 1 { "" } else { "s" },
                file.display()
            ));
            continue;
        }
        let mut removed = 0;
        for b in backups {
            match std::fs::remove_file(b) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    ui.fail(&format!("could not remove {}: {e}", b.display()));
                    ok = false;
                }
            }
        }
        ui.ok(&format!(
            "removed {removed} backup{} of {}",
            if removed == 1 { "" } else { "s" },
            file.display()
        ));
    }
    for (what, d) in &left.dirs {
        if dry_run {
            ui.info(&format!("would remove the {what} {}", d.display()));
            continue;
        }
        match std::fs::remove_dir_all(d) {
            Ok(()) => ui.ok(&format!("removed the {what} {}", d.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                ui.fail(&format!("could not remove {}: {e}", d.display()));
                ok = false;
            }
        }
    }
    for d in &left.empty_dirs {
        if !is_empty_dir(d) {
            continue;
        }
        if dry_run {
            ui.info(&format!("would remove {} (empty)", d.display()));
        } else if std::fs::remove_dir(d).is_ok() {
            ui.ok(&format!(
                "removed {} (empty; setup created it)",
                d.display()
            ));
        }
    }
    ok
}
