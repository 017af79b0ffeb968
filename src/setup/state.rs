//! The state file: what setup changed in client configs and which service file it installed,
//! so `uninstall` can undo exactly that and nothing else. It holds original entries, which may
//! hold secrets, so it is written 0600 and never printed.
//!
//! A client-file change is recorded twice: as [`Pending`] before the file changes, and as done
//! once it has (see `journal`), so a run that dies in between leaves a record the next run
//! finishes from what the file holds.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client_config::{Change, ClientKind};
use crate::config;
use crate::fsutil::{self, FsError};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    #[serde(default)]
    pub clients: Vec<ClientState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<PathBuf>,
    /// Directories setup created for the service file (outermost first): `uninstall --purge`
    /// removes each that is empty again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<PathBuf>,
    /// Entries `coogle share` moved behind the daemon, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<SharedEntry>,
    /// Upstreams `coogle share` added to config.json, as it wrote them; `unshare` removes one
    /// when no shared entry uses it any more and it is still as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_upstreams: Vec<AddedUpstream>,
    /// Client-file changes under way: recorded before the write, settled after it (or by the
    /// next run, when this one died in between).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
}

/// A write of one client file about to be made.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub kind: ClientKind,
    pub path: PathBuf,
    pub changes: Vec<PendingChange>,
    /// The backup taken before the write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
    /// Made with `claude mcp remove` and `add-json`: an entry that is gone afterwards was
    /// removed by a run that died before it could add coogle's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub via_cli: bool,
}

/// One change of a [`Pending`] write, and whose it is once done.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingChange {
    pub change: Change,
    /// The upstream it runs behind, for `coogle share`; none for setup's own entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
}

/// One client entry `coogle share` rewrote: where, the original and what was written
/// (`change`), the upstream it now runs, and the backup taken before the write.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SharedEntry {
    pub kind: ClientKind,
    pub path: PathBuf,
    pub change: Change,
    pub upstream: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddedUpstream {
    pub name: String,
    /// The `servers.<name>` block as written.
    pub block: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientState {
    pub kind: ClientKind,
    pub path: PathBuf,
    /// Backups taken before each change, oldest first.
    #[serde(default)]
    pub backups: Vec<PathBuf>,
    pub changes: Vec<Change>,
}

/// `setup-state.json` beside the default config.json.
pub fn state_path() -> PathBuf {
    config::default_path().with_file_name("setup-state.json")
}

impl State {
    /// The recorded state; none recorded is an empty one.
    pub fn load() -> Result<State, FsError> {
        let path = state_path();
        match fsutil::read_optional(&path)? {
            None => Ok(State::default()),
            Some(bytes) => {
                let v = fsutil::parse_json(&bytes, &path)?;
                serde_json::from_value(v).map_err(|e| FsError::Refused {
                    path,
                    detail: format!("not a coogle setup state: {e}"),
                })
            }
        }
    }

    /// Write it (0600), or remove the file when nothing is left to undo.
    pub fn save(&self) -> Result<(), FsError> {
        let path = state_path();
        if self.is_empty() {
            fsutil::remove_optional(&path)?;
            return Ok(());
        }
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        fsutil::write_own(&path, &fsutil::to_json_bytes(&value), 0o600)
    }

    /// Nothing recorded: no file is kept.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
            && self.service.is_none()
            && self.created_dirs.is_empty()
            && self.shared.is_empty()
            && self.shared_upstreams.is_empty()
            && self.pending.is_empty()
    }
}
