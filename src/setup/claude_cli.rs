//! Registering coogle's entry in Claude Code through Claude Code's own CLI (`claude mcp remove`
//! and `claude mcp add-json`, user scope), the ecosystem's way, which does not race Claude
//! Code's own rewrites of `~/.claude.json`.
//!
//! Only user-scope (top-level `mcpServers`) entries go through the CLI; per-project entries have
//! no CLI form and are patched directly, as is everything when the CLI is missing or fails. A
//! backup of the exact bytes is taken before the first CLI call, and what the CLI stored is
//! read back and recorded, so `uninstall` can undo it like a direct patch. Nothing from an
//! entry's `env` is ever passed on the command line: such entries are patched directly.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::client_config::{self, Change, ClientKind, Intent, Journal, Patched, Plan, Shim};
use crate::crash_point;
use crate::fsutil::{self, FsError, Mode, Written};
use crate::process::{RunError, run_bounded};

/// How long one `claude mcp …` may take (it is a Node program; a cold start takes seconds).
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the `claude` CLI did not do (all of) it; setup then patches the file directly.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// The arguments are left out on purpose: `add-json`'s hold the whole entry.
    #[error("`{} mcp …` failed: {error}", program.display())]
    Failed { program: PathBuf, error: RunError },
    #[error(
        "after `claude mcp add-json`, {} does not run coogle",
        client_config::describe(location)
    )]
    NotStored { location: Vec<String> },
}

/// Claude Code's command line program.
#[derive(Debug, Clone)]
pub struct ClaudeCli {
    pub program: PathBuf,
}

impl ClaudeCli {
    /// `COOGLE_CLAUDE_CLI` when set (an unusual install, or a test's stand-in; `none` turns
    /// the CLI off), else `claude` on PATH.
    pub fn find() -> Option<ClaudeCli> {
        if let Some(p) = std::env::var_os("COOGLE_CLAUDE_CLI").filter(|p| !p.is_empty()) {
            if p == "none" {
                return None;
            }
            return Some(ClaudeCli {
                program: PathBuf::from(p),
            });
        }
        which::which("claude")
            .ok()
            .map(|program| ClaudeCli { program })
    }

    fn run(&self, args: &[&str]) -> Result<(), CliError> {
        run_bounded(&self.program, args, CLI_TIMEOUT)
            .map(|_| ())
            .map_err(|error| CliError::Failed {
                program: self.program.clone(),
                error,
            })
    }

    fn remove(&self, name: &str) -> Result<(), CliError> {
        self.run(&["mcp", "remove", "--scope", "user", name])
    }

    fn add_json(&self, name: &str, entry: &Value) -> Result<(), CliError> {
        self.run(&[
            "mcp",
            "add-json",
            "--scope",
            "user",
            name,
            &entry.to_string(),
        ])
    }
}

/// Point Claude Code at coogle: user-scope changes through `cli`, the rest (per-project
/// entries) directly. Falls back to [`client_config::patch_file`] for everything when the CLI
/// fails before it changed anything; when it fails halfway, the removed entry is put back
/// first. An unparsable file is refused untouched, as by the direct patch. `journal` is told
/// what each write is about to change before it happens.
pub fn patch(
    path: &Path,
    shim: &Shim,
    cli: &ClaudeCli,
    journal: &mut Journal<'_>,
) -> Result<Patched, FsError> {
    let kind = ClientKind::ClaudeCode;
    apply(
        path,
        &|doc| client_config::patch(doc, kind, shim),
        &|stored| shim.is_exact(stored),
        cli,
        journal,
    )
}

/// [`patch`] for any [`Plan`]: the plan's user-scope changes through `cli`, the rest directly.
/// `stored_ok` says whether what the CLI stored is the entry the plan meant (the CLI may
/// normalize it).
pub fn apply(
    path: &Path,
    plan: &Plan<'_>,
    stored_ok: &dyn Fn(&Value) -> bool,
    cli: &ClaudeCli,
    journal: &mut Journal<'_>,
) -> Result<Patched, FsError> {
    let target = fsutil::resolve(path);
    let Some(bytes) = fsutil::read_optional(&target)? else {
        return client_config::apply_file(path, plan, journal);
    };
    let doc = fsutil::parse_json(&bytes, &target)?;
    let (_, planned) = plan(&doc);
    let user_scope: Vec<Change> = planned
        .into_iter()
        .filter(|c| c.location.len() == 2 && c.location[0] == "mcpServers")
        .collect();
    // An entry that keeps env of the one it replaces would put those values on the CLI's
    // argv, where any user's `ps` sees them: such entries are patched directly.
    let has_env = |c: &Change| {
        c.written
            .get("env")
            .and_then(Value::as_object)
            .is_some_and(|e| !e.is_empty())
    };
    if user_scope.is_empty() || user_scope.iter().any(has_env) {
        return client_config::apply_file(path, plan, journal);
    }
    // A lock a killed coogle left would make the CLI wait out Claude Code's stale time.
    fsutil::sweep(&target);
    let mode = std::fs::metadata(&target)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .unwrap_or(0o600);
    let backup = fsutil::backup(&target, &bytes, mode)?;
    if let Err(e) = journal(Intent {
        changes: &user_scope,
        backup: Some(&backup),
        via_cli: true,
    }) {
        let _ = std::fs::remove_file(&backup);
        return Err(e);
    }
    let (mut done, mut failure) = run_changes(path, &user_scope, cli)?;
    // Record what the CLI actually stored (it may normalize the entry), so a revert matches.
    let now = fsutil::parse_json(&std::fs::read(&target).unwrap_or_default(), &target)?;
    for change in &mut done {
        match client_config::get_path(&now, &change.location) {
            Some(stored) if stored_ok(stored) => change.written = stored.clone(),
            _ => {
                failure.get_or_insert_with(|| CliError::NotStored {
                    location: change.location.clone(),
                });
            }
        }
    }
    // Per-project entries (and whatever the CLI did not do) are patched directly.
    let rest = client_config::apply_file(path, plan, journal)?;
    let mut changes = done;
    changes.extend(rest.changes);
    Ok(Patched {
        path: target,
        written: Written::Replaced { backup },
        changes,
        via_claude_cli: failure.is_none(),
        cli_error: failure.map(|e| e.to_string()),
    })
}

/// `claude mcp remove` and `add-json` for each change, until one fails; returns the changes
/// done and the failure.
fn run_changes(
    path: &Path,
    user_scope: &[Change],
    cli: &ClaudeCli,
) -> Result<(Vec<Change>, Option<CliError>), FsError> {
    let mut done: Vec<Change> = Vec::new();
    for change in user_scope {
        let name = &change.location[1];
        if change.original.is_some() {
            if let Err(e) = cli.remove(name) {
                return Ok((done, Some(e)));
            }
            crash_point::reached("cli-removed");
        }
        if let Err(e) = cli.add_json(name, &change.written) {
            if let Some(original) = &change.original {
                put_back(path, &change.location, original)?;
            }
            return Ok((done, Some(e)));
        }
        crash_point::reached("cli-added");
        done.push(change.clone());
    }
    Ok((done, None))
}

/// Put an entry the CLI removed back where it was, directly (the CLI could not add ours).
pub(super) fn put_back(path: &Path, location: &[String], original: &Value) -> Result<(), FsError> {
    fsutil::update_json(
        path,
        Mode::KeepOr(0o600),
        client_config::CLIENT_LOCK,
        |doc| {
            let mut new = doc.cloned().unwrap_or_else(|| serde_json::json!({}));
            let (parent, key) = location.split_at(location.len() - 1);
            match client_config::get_path_mut(&mut new, parent).and_then(Value::as_object_mut) {
                Some(servers) if !servers.contains_key(&key[0]) => {
                    servers.insert(key[0].clone(), original.clone());
                    Ok(Some(new))
                }
                _ => Ok(None),
            }
        },
    )
    .map(|_| ())
}
