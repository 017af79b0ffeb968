//! What an upgrade in place carries across the exec: each running child (its pid, the
//! descriptors of its pipes, what was read from them and not yet handed on), what the daemon
//! learnt of it (its era, discovery, tool lists), and what each session had set up on it (its
//! log level, subscriptions and tasks, by the shim's secret token, since the sessions reconnect
//! to the new daemon). Written by the old daemon to a private file that only the exec'd process
//! inherits, read back and closed by the new one.
//!
//! Both ends are coogle, of two versions: fields are only ever added, with defaults, and the
//! hand-over names the format it speaks (`TAKEOVER`), so a version that cannot read it is
//! never handed anything.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The largest carried state read back: far more than any daemon holds.
const MAX_CARRIED: u64 = 256 << 20;

/// Which instance of a server (see `registry`): a session's by its shim's token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) enum CarriedScope {
    Unbound,
    Project(PathBuf),
    Session(String),
}

/// One running child, as the old daemon let go of it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CarriedChild {
    pub pid: u32,
    pub started_at_ms: u64,
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    #[serde(default)]
    pub stdout_pending: Vec<u8>,
    #[serde(default)]
    pub stderr_pending: Vec<u8>,
    pub generation: u64,
}

/// What one session had set up, to be its own again when it reconnects with its token.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CarriedSession {
    pub token: String,
    #[serde(default)]
    pub log_level: Option<u8>,
    #[serde(default)]
    pub subscriptions: Vec<String>,
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Its client had finished the handshake: notifications reach it as soon as it is back
    /// (its shim replays the handshake, but the client is the same, initialized one).
    #[serde(default)]
    pub initialized: bool,
    /// Its requests the old daemon gave up on (see [`CarriedInstance::abandoned`]): once it
    /// is back, what the child asks for one of them is put to it, as the old daemon would have.
    #[serde(default)]
    pub abandoned: Vec<u64>,
}

/// One upstream instance with a running child.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CarriedInstance {
    pub server: String,
    pub scope: CarriedScope,
    #[serde(default)]
    pub passed_env: BTreeMap<String, String>,
    /// The server's definition the child was started with (`ServerConfig::launch_key`): one
    /// that changed since is not adopted. Empty: unknown, treated as changed.
    #[serde(default)]
    pub launch_key: String,
    pub child: CarriedChild,
    /// The cache's snapshot (see `upstream::cache`).
    pub cache: Box<RawValue>,
    #[serde(default)]
    pub restarts: u64,
    #[serde(default)]
    pub child_log_level: Option<u8>,
    #[serde(default)]
    pub sessions: Vec<CarriedSession>,
    /// The id the replaced daemon would have given its next request to this child. The new
    /// daemon numbers its own from there: an answer to a request of the old one (its own
    /// `tools/list`, say, which a hand-over does not wait for) is then never taken for the
    /// answer to a new request, a session's call among them. 0 (an older daemon): from 1.
    #[serde(default)]
    pub next_uid: u64,
    /// Requests of the old daemon nobody waits for any more that the child may still be
    /// working on (a call that timed out, say). Each is nobody's until its session is back (see
    /// [`CarriedSession::abandoned`]): what the child asks or logs for it meanwhile is never put
    /// to a session of the new daemon that happens to be the only one busy.
    #[serde(default)]
    pub abandoned: CarriedAbandoned,
    /// The number the replaced daemon would have shown its next request to a session under
    /// (`coogle-s<n>`, see `upstream::server_requests`); the new daemon numbers from there. 0 (an
    /// older daemon): from 1.
    #[serde(default)]
    pub next_server_request: u64,
}

/// The old daemon's abandoned requests (see [`CarriedInstance::abandoned`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CarriedAbandoned {
    /// Each one: how long ago it was given up, and the log level it asked for.
    #[serde(default)]
    pub requests: Vec<CarriedAbandonedRequest>,
    /// More were given up than the old daemon remembered.
    #[serde(default)]
    pub overflow: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CarriedAbandonedRequest {
    pub uid: u64,
    pub age_ms: u64,
    #[serde(default)]
    pub log_level: Option<u8>,
}

impl std::fmt::Debug for CarriedInstance {
    /// `passed_env` values may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarriedInstance")
            .field("server", &self.server)
            .field("scope", &self.scope)
            .field("pid", &self.child.pid)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize)]
struct CarriedFile {
    version: String,
    instances: Vec<CarriedInstance>,
}

/// The carried state in a private file that has no name: only a process that holds its
/// descriptor (the exec'd daemon) can read it.
pub(crate) fn write(dir: &Path, instances: Vec<CarriedInstance>) -> std::io::Result<File> {
    let path = dir.join(format!(".carried-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    let file = CarriedFile {
        version: crate::wire::VERSION.to_string(),
        instances,
    };
    f.write_all(&serde_json::to_vec(&file).map_err(std::io::Error::other)?)?;
    f.rewind()?;
    Ok(f)
}

/// The carried state, from the file the replaced daemon wrote (closed once read).
pub(crate) fn read(f: File) -> std::io::Result<Vec<CarriedInstance>> {
    let mut bytes = Vec::new();
    f.take(MAX_CARRIED).read_to_end(&mut bytes)?;
    let file: CarriedFile = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
    Ok(file.instances)
}

/// The descriptors a carried child names, owned from now on: taken from `owned` (what this
/// process still holds, after its own exec failed) or else adopted as inherited across the
/// exec. `None` when one is not there (the child is then not adopted).
pub(crate) fn take_fds(child: &CarriedChild, owned: &mut Vec<OwnedFd>) -> Option<[OwnedFd; 3]> {
    let mut out = Vec::new();
    for fd in [child.stdin, child.stdout, child.stderr] {
        let fd = match owned.iter().position(|o| o.as_raw_fd() == fd) {
            Some(i) => owned.swap_remove(i),
            None => crate::os::adopt_inherited_fd(fd).ok()?,
        };
        out.push(fd);
    }
    out.try_into().ok()
}

/// The raw number of an owned descriptor, for the carried state.
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

use std::os::unix::fs::OpenOptionsExt;
