//! Doctor's check of each MCP client's config: its coogle entry runs this binary, no entry
//! starts Google Workspace MCP beside coogle, and (when set up) the search server has its
//! entry. A file that does not parse is a ✗; a client that is not installed is skipped.
//!
//! An entry's `command` is resolved as its client would resolve it: `"command": "coogle"` (as
//! README shows) is this binary when `coogle` on the client's PATH is. Claude Desktop on macOS
//! is a GUI app and starts servers with a GUI app's PATH, where Homebrew's `coogle` is not.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::super::client_config::{self, ClientKind, Shim, Upstream, describe};
use super::super::launch::shim_for;
use super::{Doctor, same_file};
use crate::exec_path;
use crate::paths::{Os, Platform};

/// The PATH `kind` starts its MCP servers with: a GUI app's for Claude Desktop on macOS;
/// otherwise the user's shell's (Claude Code and Cursor run from it or inherit it), taken to be
/// the one doctor runs with.
fn client_path(kind: ClientKind, os: Os, here: &OsStr) -> OsString {
    match (kind, os) {
        (ClientKind::ClaudeDesktop, Os::MacOs) => OsString::from(exec_path::GUI_PATH),
        _ => here.to_owned(),
    }
}

/// How `coogle setup` names a client.
fn client_flag(kind: ClientKind) -> &'static str {
    match kind {
        ClientKind::ClaudeCode => "claude-code",
        ClientKind::ClaudeDesktop => "claude-desktop",
        ClientKind::Cursor => "cursor",
    }
}

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
        let entries = client_config::entries(&doc, kind);
        let client_path = client_path(
            kind,
            Platform::current().os,
            &std::env::var_os("PATH").unwrap_or_default(),
        );
        let google = client_config::google_entries(&doc, kind);
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
        let stale = self.stale_entries(kind, &entries, &client_path);
        if search_wanted {
            self.search_entry(kind, &entries, &client_path);
        }
        let ours: Vec<String> = entries
            .iter()
            .filter(|(_, e)| self.runs_shim(&self.shim, e, &client_path))
            .map(|(l, _)| describe(l))
            .collect();
        if !ours.is_empty() {
            self.ok(&format!(
                "{}: {} points at this binary",
                kind.label(),
                ours.join(", ")
            ));
        } else if google.is_empty() && stale == 0 && kind == ClientKind::ClaudeCode {
            let text = format!(
                "{}: no entry in {} runs coogle",
                kind.label(),
                path.display()
            );
            if self.set_up {
                self.fail(&text, "`coogle setup --yes` adds one");
            } else {
                self.warn(&format!("{text} yet"), "`coogle setup` adds one");
            }
        }
    }

    /// The program an entry's `command` starts under `client_path`, when it can be found.
    fn resolve(&self, entry: &Value, client_path: &OsStr) -> Option<PathBuf> {
        let command = entry.get("command").and_then(Value::as_str)?;
        exec_path::resolve(command, client_path, None)
    }

    /// True when `entry` runs `shim` on this binary: written exactly as setup writes it, or
    /// with a command that the client resolves to this binary and the same arguments.
    fn runs_shim(&self, shim: &Shim, entry: &Value, client_path: &OsStr) -> bool {
        if shim.is_exact(entry) {
            return true;
        }
        if !self
            .resolve(entry, client_path)
            .is_some_and(|p| same_file(&p, &self.exe))
        {
            return false;
        }
        let mut as_written = entry.clone();
        as_written["command"] = Value::String(shim.command.to_string_lossy().into_owned());
        shim.is_exact(&as_written)
    }

    /// coogle entries that run another binary (an old path, another install), or a command
    /// the client cannot find: each a ✗. Returns how many.
    fn stale_entries(
        &mut self,
        kind: ClientKind,
        entries: &[(Vec<String>, &Value)],
        client_path: &OsStr,
    ) -> usize {
        let stale: Vec<_> = entries
            .iter()
            .filter(|(_, e)| {
                client_config::looks_like_coogle(e)
                    && !self.runs_shim(&self.shim, e, client_path)
                    && !self
                        .resolve(e, client_path)
                        .is_some_and(|p| same_file(&p, &self.exe))
            })
            .collect();
        for (loc, e) in &stale {
            let command = e.get("command").and_then(Value::as_str).unwrap_or("?");
            let fix = format!("`coogle setup --yes --client {}`", client_flag(kind));
            if self.resolve(e, client_path).is_none() && !command.contains('/') {
                self.fail(
                    &format!(
                        "{}: {} runs `{command}`, which {} cannot find on the PATH it starts servers with ({})",
                        kind.label(),
                        describe(loc),
                        kind.label(),
                        client_path.to_string_lossy()
                    ),
                    &format!("{fix} writes this binary's absolute path"),
                );
            } else {
                self.fail(
                    &format!(
                        "{}: {} runs {command}, not this binary",
                        kind.label(),
                        describe(loc)
                    ),
                    &fix,
                );
            }
        }
        stale.len()
    }

    fn search_entry(
        &mut self,
        kind: ClientKind,
        entries: &[(Vec<String>, &Value)],
        client_path: &OsStr,
    ) {
        let search_shim = shim_for(self.paths, Upstream::Search);
        match entries
            .iter()
            .find(|(_, e)| self.runs_shim(&search_shim, e, client_path))
        {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_desktop_on_macos_has_a_gui_apps_path() {
        let here = OsStr::new("/opt/homebrew/bin:/usr/bin:/bin");
        assert_eq!(
            client_path(ClientKind::ClaudeDesktop, Os::MacOs, here),
            exec_path::GUI_PATH
        );
        for kind in [ClientKind::ClaudeCode, ClientKind::Cursor] {
            assert_eq!(client_path(kind, Os::MacOs, here), here);
        }
        assert_eq!(
            client_path(ClientKind::ClaudeDesktop, Os::Linux, here),
            here
        );
        // Homebrew's `coogle` is not on that PATH, so doctor says so for Claude Desktop.
        assert_eq!(
            exec_path::resolve(
                "coogle",
                &client_path(ClientKind::ClaudeDesktop, Os::MacOs, here),
                None
            ),
            None
        );
    }
}
