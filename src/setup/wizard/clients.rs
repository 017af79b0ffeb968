//! Step 6: point the chosen MCP clients at coogle. Each client config is patched (through
//! Claude Code's own `claude` CLI where it can be, else directly with backup and atomic
//! write), and every change is recorded in the state file before the file changes and settled
//! right after (`journal`), so `uninstall` can undo even a run that died halfway; when the
//! record cannot be written, the file is not changed. A file that does not parse is refused
//! and left untouched.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::args::ClientChoice;
use super::super::claude_cli::{self, ClaudeCli};
use super::super::client_config::{self, ClientKind, Intent, Patched, Shim, Upstream};
use super::super::journal;
use super::super::launch::shim_for;
use super::super::state::State;
use super::Wizard;
use crate::fsutil::{FsError, Written};

impl Wizard<'_> {
    /// Patch every chosen client; returns the Google entry to verify (Claude Code's when it
    /// was patched, else the first).
    pub(super) fn point_clients(&mut self, state: &mut State, with_search: bool) -> Option<Value> {
        if self.args.no_client {
            self.ui.warn("skipped (--no-client)");
            return None;
        }
        let mut shims = vec![shim_for(self.paths, Upstream::Google)];
        if with_search {
            shims.push(shim_for(self.paths, Upstream::Search));
        }
        let mut verify_entry = None;
        self.clients = self.chosen_clients();
        for (kind, path) in self.clients.clone() {
            if kind != ClientKind::ClaudeCode
                && !path.exists()
                && !path.parent().is_some_and(Path::is_dir)
            {
                self.ui.warn(&format!(
                    "{}: {} does not exist (not installed?); skipped",
                    kind.label(),
                    path.display()
                ));
                continue;
            }
            self.patch_client(state, kind, &path, &shims, &mut verify_entry);
        }
        verify_entry
    }

    /// Patch one client file with each shim; the first failure ends this file.
    fn patch_client(
        &mut self,
        state: &mut State,
        kind: ClientKind,
        path: &Path,
        shims: &[Shim],
        verify_entry: &mut Option<Value>,
    ) {
        let cli = (kind == ClientKind::ClaudeCode
            && !self.args.no_claude_cli
            && self.args.files.claude_json.is_none())
        .then(ClaudeCli::find)
        .flatten();
        for shim in shims {
            let mut unrecorded = false;
            let patched = {
                let mut journal = |intent: Intent<'_>| {
                    let pending = journal::pending(
                        kind,
                        path,
                        intent.changes,
                        &|_| None,
                        intent.backup,
                        intent.via_cli,
                    );
                    journal::begin(state, pending).inspect_err(|_| unrecorded = true)
                };
                match &cli {
                    Some(cli) => claude_cli::patch(path, shim, cli, &mut journal),
                    None => client_config::patch_file_journaled(path, kind, shim, &mut journal),
                }
            };
            let p = match patched {
                Ok(p) => p,
                Err(e) => {
                    if unrecorded {
                        self.ui.fail(&format!(
                            "{}: could not record the change ({e}); {} was left unchanged",
                            kind.label(),
                            path.display()
                        ));
                    } else {
                        self.ui.fail(&format!("{}: {e}", kind.label()));
                    }
                    if matches!(e, FsError::Parse { .. } | FsError::NotAnObject { .. }) {
                        self.ui.info("hint: fix the file (or restore a backup), then run `coogle setup` again");
                    }
                    self.failed = true;
                    self.failed_files.push(path.to_path_buf());
                    journal::finish(&self.ui, state, path);
                    return;
                }
            };
            self.report_patch(kind, &p);
            if !journal::finish(&self.ui, state, path) {
                self.failed = true;
            }
            if shim.upstream == Upstream::Google
                && (kind == ClientKind::ClaudeCode || verify_entry.is_none())
            {
                *verify_entry = Some(shim.entry(kind));
            }
        }
    }

    fn report_patch(&mut self, kind: ClientKind, p: &Patched) {
        let (ui, label) = (self.ui, kind.label());
        if p.via_claude_cli {
            ui.ok(&format!(
                "{label}: registered through `claude mcp add-json --scope user`"
            ));
        }
        if let Some(e) = &p.cli_error {
            ui.warn(&format!(
                "{label}: the claude CLI did not do it ({e}); patched the file directly"
            ));
        }
        if p.written == Written::Unchanged {
            ui.ok(&format!(
                "{label}: {} already points at coogle",
                p.path.display()
            ));
            return;
        }
        for c in &p.changes {
            let what = client_config::describe(&c.location);
            if c.original.is_some() {
                ui.ok(&format!("{label}: replaced {what} with coogle"));
            } else {
                ui.ok(&format!("{label}: added {what}"));
            }
        }
        let change = match &p.written {
            Written::Replaced { backup } => {
                ui.info(&format!("backup: {}", backup.display()));
                format!("{label} {} (backup {})", p.path.display(), backup.display())
            }
            _ => format!("{label} {} (new file)", p.path.display()),
        };
        self.summary.push(change);
    }

    /// The clients to patch and their files: `--client` (default Claude Code), or a choice
    /// when asking.
    fn chosen_clients(&self) -> Vec<(ClientKind, PathBuf)> {
        let args = self.args;
        let path_for = |kind: ClientKind| {
            match kind {
                ClientKind::ClaudeCode => Some(self.claude_json.clone()),
                ClientKind::ClaudeDesktop => args.files.desktop_config.clone(),
                ClientKind::Cursor => args.files.cursor_config.clone(),
            }
            .unwrap_or_else(|| kind.default_path())
        };
        let kinds: Vec<ClientKind> = if args.client.contains(&ClientChoice::All) {
            ClientKind::ALL.to_vec()
        } else if !args.client.is_empty() {
            ClientKind::ALL
                .into_iter()
                .filter(|k| args.client.contains(&ClientChoice::from(*k)))
                .collect()
        } else if self.ui.interactive {
            let items: Vec<String> = ClientKind::ALL
                .iter()
                .map(|k| format!("{} ({})", k.label(), path_for(*k).display()))
                .collect();
            let defaults: Vec<bool> = ClientKind::ALL
                .iter()
                .map(|k| *k == ClientKind::ClaudeCode || path_for(*k).exists())
                .collect();
            self.ui
                .multi_select("Point these clients at coogle", &items, &defaults)
                .into_iter()
                .map(|i| ClientKind::ALL[i])
                .collect()
        } else {
            vec![ClientKind::ClaudeCode]
        };
        kinds.into_iter().map(|k| (k, path_for(k))).collect()
    }
}
