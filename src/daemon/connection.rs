//! One connection to the daemon's socket: the peer check, the first line that decides what it
//! is, and an mcp-mode session's pump between the socket and its upstream's actor.
//!
//! A connection from another uid is closed before a byte is read. An mcp session's lines go to
//! the actor as they are; the actor writes the session's answers itself (see `outbox`), so this
//! task only reads.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::control::{control_connection, server_name};
use super::registry::Asker;
use super::upstream::{Event, UpstreamHandle};
use super::{FIRST_LINE_TIMEOUT, SessionId, Shared, outbox, session_socket};

use crate::wire::{
    self, ControlResponse, ErrorCode, FirstLine, Hello, HelloReply, Line, WireError,
};

/// Counts an open connection for as long as it lives.
struct Counted(Arc<Shared>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A new connection: served, or, past the connection limit, told so and closed at once (so a
/// flood of idle connections cannot take the daemon's file descriptors from everyone).
pub(super) async fn accepted(shared: Arc<Shared>, mut stream: UnixStream) {
    let open = shared.connections.fetch_add(1, Ordering::AcqRel) + 1;
    let guard = Counted(shared.clone());
    if open > shared.max_connections {
        tracing::warn!(
            open,
            limit = shared.max_connections,
            "refused a connection: too many open"
        );
        let e = WireError::new(
            ErrorCode::InvalidRequest,
            format!(
                "too many connections to the coogle daemon ({}); try again shortly",
                shared.max_connections
            ),
        );
        let _ = stream
            .write_all(&wire::to_line(&ControlResponse::err(Value::Null, e)))
            .await;
        return;
    }
    handle_connection(shared, stream).await;
    drop(guard);
}

async fn handle_connection(shared: Arc<Shared>, stream: UnixStream) {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == crate::os::uid() => {}
        Ok(cred) => {
            tracing::warn!(
                peer_uid = cred.uid(),
                "refused a connection from another user"
            );
            return;
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer could not be identified: {e}");
            return;
        }
    }
    // The first line is a hello, which carries the client's whole environment (for
    // `passEnv`), or a control request: neither is an MCP message, so `maxLineBytes` (a cap on
    // those) must not refuse a client whose environment is larger than it.
    let cap = shared.config.max_line_bytes.max(FIRST_LINE_MIN_CAP);
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    let first = tokio::time::timeout(
        FIRST_LINE_TIMEOUT,
        wire::read_line_capped(&mut r, &mut buf, cap),
    )
    .await;
    match first {
        Ok(Ok(Line::Complete)) => {}
        Ok(Ok(Line::Eof)) if !wire::is_blank(&buf) => {}
        Ok(Ok(Line::TooLong)) => {
            let e = too_long(cap);
            let _ = w
                .write_all(&wire::to_line(&ControlResponse::err(Value::Null, e)))
                .await;
            return;
        }
        _ => return,
    }
    match wire::parse_first_line(&buf) {
        Ok(FirstLine::Hello(hello)) => mcp_session(shared, hello, r, w).await,
        Ok(FirstLine::Control(req)) => control_connection(shared, Ok(req), r, w).await,
        Err(e) => control_connection(shared, Err(e), r, w).await,
    }
}

/// Linux caps one environment string at 128 KiB and all of them with the arguments at a
/// quarter of the stack limit (2 MiB by default): 4 MiB holds any environment a client has.
const FIRST_LINE_MIN_CAP: usize = 4 * 1024 * 1024;

pub(super) fn too_long(cap: usize) -> WireError {
    WireError::new(
        ErrorCode::InvalidRequest,
        format!("line exceeds the {cap}-byte limit; closing the connection"),
    )
}

async fn mcp_session(
    shared: Arc<Shared>,
    mut hello: Hello,
    r: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut w: tokio::net::unix::OwnedWriteHalf,
) {
    let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
    let asker = Asker {
        project: hello.project_dir.as_deref(),
        env: hello.env.as_ref(),
        token: hello.session_token.as_ref(),
    };
    let handle = match server_name(&shared, hello.server.as_deref())
        .and_then(|name| shared.upstreams.for_session(&name, asker, id))
    {
        Ok(h) => h,
        Err(e) => {
            let _ = w.write_all(&wire::to_line(&HelloReply::err(e))).await;
            return;
        }
    };
    // The client's environment has given what the server's `passEnv` names; nothing else of it
    // is kept.
    hello.env = None;
    let writer = run_session(&shared, id, hello, &handle, r, w).await;
    // However the session ended (even one that hung up before its hello was answered), a
    // per-session server's instance goes with it, and its child too.
    let grace = Duration::from_millis(shared.config.shutdown_grace_ms);
    for own in shared.upstreams.session_ended(id) {
        own.shutdown(grace).await;
    }
    if let Some(mut writer) = writer {
        // A peer that hung up its sending side but never reads what is queued would otherwise
        // keep the writer, and the socket, forever.
        if tokio::time::timeout(Duration::from_secs(5), &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
    }
}

/// Answer the hello and carry the session's lines until either side ends it; returns the
/// writer when it is still flushing what was queued for the session.
async fn run_session(
    shared: &Shared,
    id: SessionId,
    hello: Hello,
    handle: &UpstreamHandle,
    r: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut w: tokio::net::unix::OwnedWriteHalf,
) -> Option<tokio::task::JoinHandle<()>> {
    if hello.version != wire::VERSION {
        tracing::info!(client_version = %hello.version, "a client of another version connected");
        shared.handover.claim(&hello.version);
    }
    if w.write_all(&wire::to_line(&HelloReply::ok(&handle.name)))
        .await
        .is_err()
    {
        return None;
    }
    // From here the socket wakes the daemon only when there is something to read (see
    // `session_socket`).
    let (mut r, w) = match session_socket::split(r, w) {
        Ok(split) => split,
        Err(e) => {
            tracing::warn!(
                session = id,
                "could not take over the session's socket: {e}"
            );
            return None;
        }
    };
    // The writer task ends when the actor drops the session (and its queue is written) or the
    // peer goes away; dropping the writer then shuts the socket's write side, so the client
    // sees EOF.
    let (out, mut writer, mut closed) = outbox::Outbox::with_close_signal(w);
    if !handle
        .send(Event::SessionOpen {
            id,
            hello: Box::new(hello),
            out,
        })
        .await
    {
        return None;
    }
    let cap = shared.config.max_line_bytes;
    let reader = read_session_lines(&mut r, handle, id, cap);
    // A finished JoinHandle must not be polled again (tokio panics): wait for the writer
    // afterwards only when it has not finished yet.
    let writer_done = tokio::select! {
        _ = reader => false,
        _ = &mut writer => true,
        // The daemon dropped the session (it would not read, or the upstream stopped): what is
        // queued is the last it gets, and a peer that never reads it does not hold the
        // connection (and that memory) for long.
        _ = &mut closed => {
            if tokio::time::timeout(DRAIN_AFTER_CLOSE, &mut writer).await.is_err() {
                writer.abort();
            }
            true
        }
    };
    handle.send(Event::SessionClosed { id }).await;
    (!writer_done).then_some(writer)
}

/// Hand a session's lines to its upstream until EOF, an error or an oversized line (which is
/// answered, and ends the session).
async fn read_session_lines(
    r: &mut session_socket::SessionLines,
    handle: &UpstreamHandle,
    id: SessionId,
    cap: usize,
) {
    let mut buf = Vec::new();
    loop {
        match wire::read_line_capped(r, &mut buf, cap).await {
            Ok(Line::Complete) => {
                if wire::is_blank(&buf) {
                    buf.clear();
                    continue;
                }
                let line = std::mem::take(&mut buf);
                if !handle.send(Event::SessionLine { id, line }).await {
                    return;
                }
            }
            Ok(Line::TooLong) => {
                tracing::warn!(
                    session = id,
                    "a session sent a line over {cap} bytes; closing it"
                );
                let line = wire::error_line(
                    None,
                    wire::rpc_code::INVALID_REQUEST,
                    &format!("line exceeds the {cap}-byte limit; closing the connection"),
                );
                let _ = handle.send(Event::SessionReply { id, line }).await;
                return;
            }
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

/// How long a session the daemon closed has to read what was queued for it.
const DRAIN_AFTER_CLOSE: Duration = Duration::from_secs(30);
