//! Doctor's check of shared entries: every client entry that runs `coogle mcp --server NAME`
//! names an upstream config.json has (a missing one fails every session of that entry). Whether
//! each upstream's command resolves is the servers check's (`install.rs`).

use std::path::Path;

use serde_json::Value;

use super::super::client_config::{self, ClientKind, describe, shim_server};
use super::super::state::State;
use super::Doctor;
use crate::config::Config;

impl Doctor<'_> {
    pub(super) fn shared(&mut self, config: &Config, claude_json: &Path) {
        let recorded = State::load().map(|s| s.shared.len()).unwrap_or(0);
        if recorded > 0 {
            self.ok(&format!(
                "{recorded} client entr{} shared (`coogle unshare` gives them back)",
                if recorded == 1 { "y" } else { "ies" }
            ));
        }
        for kind in ClientKind::ALL {
            let path = if kind == ClientKind::ClaudeCode {
                claude_json.to_path_buf()
            } else {
                kind.default_path()
            };
            // A file that does not parse is the client check's ✗.
            let Some(doc) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            else {
                continue;
            };
            for (loc, entry) in client_config::entries(&doc, kind) {
                if !client_config::looks_like_coogle(entry) {
                    continue;
                }
                let server = shim_server(entry);
                // `coogle mcp` without `--server` takes the only upstream when there is one.
                let found = config.servers.contains_key(&server)
                    || (server == "google" && config.server(None).is_ok());
                if !found {
                    self.fail(
                        &format!(
                            "{}: {} runs upstream {server}, which config.json does not have",
                            kind.label(),
                            describe(&loc)
                        ),
                        &format!(
                            "`coogle unshare {server}` gives the original entry back, or add servers.{server} to config.json"
                        ),
                    );
                }
            }
        }
    }
}
