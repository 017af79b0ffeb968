//! Who a client talks to. Every connection is checked before a byte is sent (DESIGN.md, "both
//! ends check"): the socket path must fit a Unix socket address, its directory must be this
//! user's and private, and the process listening must run as this user. Whoever created a
//! shared-/tmp path first could otherwise listen there and read the hello, the initialize and
//! every tool call's arguments. A refusal says who owns what, and the ways out.

use std::io;
use std::path::Path;

use tokio::net::UnixStream;

use super::{ClientError, is_absent, not_running};
use crate::os;
use crate::paths::{self, PathError};

/// Why a client refused a socket before sending it anything.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error("{0}")]
    Dir(PathError),
    #[error(
        "the process listening on it runs as {}, not as you ({})",
        os::describe_uid(*peer),
        os::describe_uid(*me)
    )]
    Peer { peer: u32, me: u32 },
    #[error("could not ask the kernel who listens on it: {0}")]
    PeerUnknown(io::Error),
}

/// What is wrong with a refused socket, who owns what, and the ways out.
pub(super) fn untrusted_hint(socket: &Path, problem: &Untrusted) -> String {
    let elsewhere = "or use another socket: set XDG_RUNTIME_DIR to a private directory, or \
                     `socketPath` in config.json (or --socket / COOGLE_SOCKET)";
    let dir = socket_dir(socket);
    let dir_owner = || {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(dir)
            .map(|m| os::describe_uid(m.uid()))
            .unwrap_or_else(|_| "an unknown user".into())
    };
    match problem {
        Untrusted::Dir(PathError::WrongOwner { path, owner, .. }) => format!(
            "{} belongs to {}, not to you: another user may have created it to read coogle's traffic. \
             Remove it (`sudo rm -rf {}`), {elsewhere}",
            path.display(),
            os::describe_uid(*owner),
            path.display()
        ),
        Untrusted::Dir(PathError::Symlink { path } | PathError::NotADirectory { path }) => {
            format!(
                "remove {} (`rm {}`), {elsewhere}",
                path.display(),
                path.display()
            )
        }
        Untrusted::Dir(PathError::NotPrivate { path, .. }) => format!(
            "`chmod 700 {}` (it is yours, owned by {}), {elsewhere}",
            path.display(),
            dir_owner()
        ),
        Untrusted::Dir(PathError::OthersCanWrite { path, .. }) => format!(
            "`chmod go-w {}` if it is yours to change, {elsewhere}",
            path.display()
        ),
        Untrusted::Dir(_) | Untrusted::PeerUnknown(_) => {
            format!(
                "check {} (owned by {}), {elsewhere}",
                dir.display(),
                dir_owner()
            )
        }
        Untrusted::Peer { peer: who, .. } => format!(
            "{} is served by {} and its directory {} is owned by {}; that is not your coogle \
             daemon. Stop that process and remove the socket (`sudo rm {}`), {elsewhere}",
            socket.display(),
            os::describe_uid(*who),
            dir.display(),
            dir_owner(),
            socket.display()
        ),
    }
}

/// The directory a socket lives in (`.` for a bare file name).
fn socket_dir(socket: &Path) -> &Path {
    match socket.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Before connecting: the socket's directory is ours and private, checked without changing
/// anything. One that does not exist yet is fine: there is nothing to connect to, and the
/// daemon creates it (and refuses it if someone else wins that race).
fn check_dir(socket: &Path) -> Result<(), ClientError> {
    match paths::verify_private_dir(socket_dir(socket)) {
        Ok(()) => Ok(()),
        Err(PathError::Inspect { error, .. }) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(untrusted(socket, Untrusted::Dir(e))),
    }
}

/// After connecting, before the first byte: the listening process runs as this user.
fn check_peer(socket: &Path, stream: &impl std::os::fd::AsFd) -> Result<(), ClientError> {
    let me = os::uid();
    match os::peer_uid(stream) {
        Ok(uid) if uid == me => Ok(()),
        Ok(uid) => Err(untrusted(socket, Untrusted::Peer { peer: uid, me })),
        Err(e) => Err(untrusted(socket, Untrusted::PeerUnknown(e))),
    }
}

fn untrusted(socket: &Path, problem: Untrusted) -> ClientError {
    ClientError::Untrusted {
        socket: socket.to_path_buf(),
        problem,
    }
}

/// Connect to a running daemon, checking the socket path, the directory and the peer first.
pub async fn connect(socket: &Path) -> Result<UnixStream, ClientError> {
    check_path(socket)?;
    check_dir(socket)?;
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| not_running(socket, source))?;
    check_peer(socket, &stream)?;
    Ok(stream)
}

/// A socket path longer than a Unix socket address holds can never be connected to: said
/// as such, not as "no daemon is answering" (nor after waiting for one to start).
fn check_path(socket: &Path) -> Result<(), ClientError> {
    paths::RuntimePaths::for_socket(socket)
        .check_length()
        .map_err(ClientError::SocketPath)
}

/// One checked attempt: `None` when nothing listens (yet).
pub(super) fn try_connect_blocking(
    socket: &Path,
) -> Result<Option<std::os::unix::net::UnixStream>, ClientError> {
    check_path(socket)?;
    check_dir(socket)?;
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => {
            check_peer(socket, &s)?;
            Ok(Some(s))
        }
        Err(e) if is_absent(&e) => Ok(None),
        Err(source) => Err(not_running(socket, source)),
    }
}
