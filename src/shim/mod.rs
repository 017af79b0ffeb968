//! `coogle mcp`: the thin pump between an agent's stdio and the daemon's socket.
//!
//! It says hello, then copies lines both ways as they are, reading only each message's `id` and
//! `method` so that, when the daemon goes away, it can fail exactly the requests that were in
//! flight, reconnect (starting a daemon), replay the client's `initialize`, and tell the client
//! the tool list may have changed. The agent never has to be restarted.
//!
//! One plain thread (see [`Pump`]): `poll` on stdin and the socket, then what arrived is copied
//! on. No async runtime and no second thread: every extra wake-up, and every wake-up on another
//! CPU, is latency the agent pays on each call. When both sides have said nothing for a while,
//! the shim settles: it lets go of the pages only its busy moments need (see
//! [`Pump::settle`]), since an open session is idle most of the day. stdout is the MCP channel:
//! nothing but MCP messages is ever written there. All state worth keeping lives in the daemon.
//!
//! One file per job:
//! - [`state`]: what the shim knows of the session: the requests in flight, the handshake to
//!   replay, what waits for the next daemon, and what is owed to the client when a connection
//!   ends;
//! - [`pump`]: the one thread: `poll` on both sides, lines copied on, settling when quiet;
//! - [`connect`]: reaching the daemon: connecting (starting one when none answers), the hello
//!   within its deadline, and reconnecting with backoff while the client is served.
//!
//! This file holds the entry point and how the shim answers when it cannot serve.

mod connect;
mod pump;
mod state;

use std::io::{BufReader, Write};
use std::path::PathBuf;

use serde_json::value::RawValue;

use crate::client::{ClientError, Starter};
use crate::wire::{self, Kind, Line, Message, raw, rpc_code};

use connect::open;
use pump::{Pump, READ_BUFFER, skip_line};

/// The executable `coogle mcp` becomes when it is installed beside `coogle` (see
/// `cli::shim_exe`): it holds only this module and what it uses.
pub const SHIM_EXE: &str = "coogle-mcp";

#[derive(Clone)]
pub struct Options {
    pub socket: PathBuf,
    pub server: Option<String>,
    pub starter: Starter,
    pub max_line_bytes: usize,
}

/// Write one line to the client; a closed stdout means the client is gone.
fn write_client(line: &[u8]) {
    write_client_locked(&mut std::io::stdout().lock(), line);
}

/// [`write_client`] under a stdout lock the caller already holds.
fn write_client_locked(out: &mut std::io::StdoutLock<'_>, line: &[u8]) {
    let ok = out.write_all(line).is_ok()
        && (line.last() == Some(&b'\n') || out.write_all(b"\n").is_ok())
        && out.flush().is_ok();
    if !ok {
        tracing::debug!("stdout closed; exiting");
        std::process::exit(0);
    }
}

/// A line buffer grown past this by a large line (or a request's copy this large, answered) is
/// let go, and the allocator asked to return the free pages at the end of the burst.
const KEEP_LINE_BUFFER: usize = 16 * 1024;

/// After a line: keep its buffer for the next one, unless a large line grew it; then let it go
/// and say so (the heap has pages to hand back).
fn reuse(buf: &mut Vec<u8>) -> bool {
    buf.clear();
    if buf.capacity() <= KEEP_LINE_BUFFER {
        return false;
    }
    *buf = Vec::new();
    true
}

/// The answer to a request coogle cannot serve: a tool call gets a tool result with
/// `isError` (the agent reads it), anything else a JSON-RPC error (the client shows it).
fn refusal(id: &RawValue, is_call: bool, text: &str) -> Vec<u8> {
    if is_call {
        wire::response_line(id, &raw(&wire::tool_error_result(text)))
    } else {
        wire::error_line(Some(id), rpc_code::UPSTREAM_UNAVAILABLE, text)
    }
}

/// What the agent's client shows when the shim cannot serve: the whole chain on one line and
/// the fix, so "Failed to connect" says why (a broken config.json, an unknown upstream).
fn refusal_text(e: &ClientError, server: Option<&str>) -> String {
    let hint = match (e, server) {
        (ClientError::Remote(w), Some(name)) if w.code == wire::ErrorCode::NotFound => {
            Some(format!(
                "add servers.{name} to config.json and run `coogle reload`, or `coogle unshare {name}` gives the client its original entry back"
            ))
        }
        _ => e.hint(),
    };
    let said = crate::causes::one_line(e);
    // Whose words these are, unless they say it already.
    let who = if said.contains("coogle") {
        ""
    } else {
        "coogle: "
    };
    match hint {
        Some(h) => format!("{who}{said}; {h}"),
        None => format!("{who}{said}"),
    }
}

/// Retrying cannot cure it: the same config, socket or name fails the same way.
fn is_permanent(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::DaemonExited { .. }
            | ClientError::SocketPath(_)
            | ClientError::Untrusted { .. }
            | ClientError::Remote(_)
    )
}

/// `coogle mcp` typed at a terminal: one line on stderr saying what this is, since nothing
/// else would be said while it waits for JSON-RPC on stdin. stdout stays the MCP channel.
pub fn hint_on_terminal() {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        let _ = std::io::stderr().write_all(
            b"coogle mcp is the MCP server an agent starts (JSON-RPC on stdin and stdout); to set coogle up, run `coogle setup` (Ctrl-D ends this)\n",
        );
    }
}

/// Run the pump. Returns only when the first connection fails, after answering every request
/// the client sent until stdin closed with why; afterwards the process exits when stdin
/// closes and every request is answered.
pub fn run(opts: Options) -> Result<(), ClientError> {
    // Before any other thread exists (the one a reconnect uses): it allocates from the main
    // thread's arena instead of making one that stays for the process's life.
    crate::os::one_malloc_arena();
    let (opened, started) = open(&opts);
    let conn = match opened {
        Ok(conn) => conn,
        Err(e) => {
            if let Some(mut daemon) = started {
                // Reaped whenever it exits, while the client is told why, until stdin closes.
                std::thread::spawn(move || daemon.wait());
            }
            let text = refusal_text(&e, opts.server.as_deref());
            // stderr, for a person looking; the agent's client gets it as its answers.
            tracing::error!("{text}");
            refuse_all(&text, opts.max_line_bytes);
            return Err(e);
        }
    };
    let mut pump = Pump::new(conn, started, opts.max_line_bytes)?;
    loop {
        pump.serve();
        let st = &mut pump.state;
        if !st.handover {
            tracing::warn!("lost the coogle daemon; reconnecting");
        }
        st.lose_writer();
        st.connection_lost();
        // Nothing more will come from the client: nothing to reconnect for.
        st.exit_if_done();
        pump.reap();
        pump.reconnect(&opts);
    }
}

/// The daemon cannot be reached: answer each request the client sends with `text` until
/// stdin closes, so its client shows why instead of "connection closed".
fn refuse_all(text: &str, cap: usize) {
    let mut r = BufReader::with_capacity(READ_BUFFER, std::io::stdin().lock());
    let mut buf = Vec::new();
    loop {
        let eof = match wire::read_line_capped_blocking(&mut r, &mut buf, cap) {
            Ok(Line::Complete) => false,
            Ok(Line::Eof) => true,
            Ok(Line::TooLong) => {
                if reuse(&mut buf) {
                    crate::os::release_free_memory();
                }
                if !skip_line(&mut r).unwrap_or(false) {
                    return;
                }
                continue;
            }
            Err(_) => return,
        };
        if let Ok(msg) = Message::parse(&buf)
            && msg.kind() == Kind::Request
            && let Some(id) = msg.id()
        {
            let is_call = msg.method().as_deref() == Some("tools/call");
            write_client(&refusal(id, is_call, text));
        }
        buf.clear();
        if eof {
            return;
        }
    }
}
