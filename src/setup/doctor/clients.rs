//! Doctor's check of each MCP client's config: its coogle entry runs this binary, no entry
//! starts Google Workspace MCP beside coogle, and (when set up) the search server has its
//! entry. A file that does not parse is a ✗; a client that is not installed is skipped.

use std::path::Path;

use serde_json::Value;

use super::super::claude_config::{self, ClientKind, Upstream, describe};
use super::super::launch::shim_for;
use super::{Doctor, same_file};

impl Doctor<'_> {
    pub(super) fn client(&mut self, kind: ClientKind, claude_json: &Path, search_wanted: bool) {
        let path = if kind == ClientKind::ClaudeCode {
            claude_json.to_path_buf()
        } else {
            kind.default_path()
        };
        let Ok(bytes) = std::fs::read(&path) else {
            if kind == ClientKind::ClaudeCode {
                self.warn(&format!("{} not found", path.display()), "`coogle setup`");
            }
            return;
        };
        let doc: Value = match serde_json::from_slice(&bytes) {
            Ok(d) => d,
            Err(e) => {
                self.fail(
                    &format!("{}: {} does not parse: {e}", kind.label(), path.display()),
                    "fix the file or restore a backup",
                );
                return;
            }
        };
        let entries = claude_config::entries(&doc, kind);
        let google = claude_config::google_entries(&doc, kind);
        for (loc, _) in &google {
            self.fail(
                &format!(
                    "{}: {} starts Google Workspace MCP directly, beside coogle",
                    kind.label(),
                    describe(loc)
                ),
                "`coogle setup --yes` points it at coogle",
            );
        }
        let stale = self.stale_entries(kind, &entries);
        if search_wanted {
            self.search_entry(kind, &entries);
        }
        let ours: Vec<String> = entries
            .iter()
            .filter(|(_, e)| self.shim.is_exact(e))
            .map(|(l, _)| describe(l))
            .collect();
        if !ours.is_empty() {
            self.ok(&format!(
                "{}: {} points at this binary",
                kind.label(),
                ours.join(", ")
            ));
        } else if google.is_empty() && stale == 0 && kind == ClientKind::ClaudeCode {
            self.fail(
                &format!("{}: no coogle entry in {}", kind.label(), path.display()),
                "`coogle setup --yes`",
            );
        }
    }

    /// coogle entries that run another binary (an old path, another install): each a ✗.
    /// Returns how many.
    fn stale_entries(&mut self, kind: ClientKind, entries: &[(Vec<String>, &Value)]) -> usize {
        let stale: Vec<_> = entries
            .iter()
            .filter(|(_, e)| {
                claude_config::looks_like_coogle(e)
                    && !self.shim.is_exact(e)
                    && !e
                        .get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| same_file(Path::new(c), &self.exe))
            })
            .collect();
        for (loc, e) in &stale {
            self.fail(
                &format!(
                    "{}: {} runs {}, not this binary",
                    kind.label(),
                    describe(loc),
                    e.get("command").and_then(Value::as_str).unwrap_or("?")
                ),
                "`coogle setup --yes`",
            );
        }
        stale.len()
    }

    fn search_entry(&mut self, kind: ClientKind, entries: &[(Vec<String>, &Value)]) {
        let search_shim = shim_for(self.paths, Upstream::Search);
        match entries.iter().find(|(_, e)| search_shim.is_exact(e)) {
            Some((loc, _)) => self.ok(&format!(
                "{}: {} serves the search server",
                kind.label(),
                describe(loc)
            )),
            None if kind == ClientKind::ClaudeCode => self.warn(
                &format!("{}: no entry for the search server", kind.label()),
                "`coogle setup --yes --search`",
            ),
            None => {}
        }
    }
}
