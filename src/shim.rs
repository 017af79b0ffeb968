//! `coogle mcp`: the thin pump between an agent's stdio and the daemon's socket.
//!
//! It says hello, then copies lines both ways as they are, reading only each message's `id` and
//! `method` so that, when the daemon goes away, it can fail exactly the requests that were in
//! flight, reconnect (starting a daemon), replay the client's `initialize`, and tell the client
//! the tool list may have changed. The agent never has to be restarted.
//!
//! Two plain threads with blocking I/O: one copies stdin to the socket, the other the socket to
//! stdout. No async runtime and no hand-off between threads on the hot path: every extra wakeup
//! is latency the agent pays on each call. When the daemon has said nothing for a while, the
//! shim settles: it lets go of the pages only its busy moments need (see [`settle`]), since an
//! open session is idle most of the day. stdout is the MCP channel: nothing but MCP messages
//! is ever written there. All state worth keeping lives in the daemon.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};
use serde_json::value::RawValue;

use crate::client::{self, ClientError, REPLY_LINE_CAP, Starter};
use crate::wire::answer::{self, Daemon};
use crate::wire::{self, Head, Hello, Kind, Line, Message, id_key, id_key_of, raw, rpc_code};

/// How the daemon's last line to a session it disconnects starts (see
/// `wire::DISCONNECTED_NOTICE`): checked as a prefix, so other lines cost nothing.
const DISCONNECTED_PREFIX: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/coogle/disconnected\"";

/// The daemon's last line before an upgrade in place (see `wire::HANDOVER_NOTICE`).
const HANDOVER_PREFIX: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/coogle/handover\"";

/// The executable `coogle mcp` becomes when it is installed beside `coogle` (see
/// `cli::shim_exe`): it holds only this module and what it uses.
pub const SHIM_EXE: &str = "coogle-mcp";

/// Lines from the client buffered while the daemon is away; past this, requests are refused.
const MAX_BUFFERED: usize = 1000;

pub struct Options {
    pub socket: PathBuf,
    pub server: Option<String>,
    pub starter: Starter,
    pub max_line_bytes: usize,
}

struct InFlight {
    id: Box<RawValue>,
    is_call: bool,
    /// A first-page `tools/list`: its answer is what the client believes the tools are.
    is_tools_list: bool,
    /// Written to a daemon. A request still buffered for after the reconnect was not, and
    /// must not be failed when the daemon goes away: it is replayed to the next one.
    sent: bool,
    /// The line as it was written, and its place among the client's requests: after an
    /// upgrade in place, what the old daemon did not answer is sent again, in order.
    line: Vec<u8>,
    seq: u64,
}

/// What both threads share, under one lock so that a reconnect replays the handshake and the
/// buffered lines before any new line can slip in between.
struct State {
    /// The socket's write side; `None` while reconnecting.
    writer: Option<UnixStream>,
    /// The client's initialize request, replayed on reconnect.
    initialize: Option<Vec<u8>>,
    initialized: bool,
    /// Hashed with foldhash (seeded per process), not SipHash: two lookups per call.
    in_flight: HashMap<String, InFlight>,
    /// The id of a replayed initialize whose answer the client must not see.
    swallow: Option<String>,
    buffered: Vec<Vec<u8>>,
    reconnects: u64,
    /// Hash of the last tool list the client received.
    last_tools: Option<u64>,
    /// The id of the shim's own `tools/list` after a reconnect.
    probe: Option<String>,
    /// Why the daemon closed this connection, when it said (it disconnects a session that
    /// leaves too much unread); told to the agent instead of "the daemon went away".
    disconnect_reason: Option<String>,
    /// Why the daemon cannot be reached, while that is so for a reason retrying does not cure
    /// (see [`is_permanent`]): requests are answered with it at once instead of waiting.
    refusing: Option<String>,
    /// stdin closed: the client will send nothing more. The shim answers what it was asked
    /// (as a server run directly does) and exits once nothing is pending.
    closing: bool,
    /// The daemon said it hands over in place: what it did not answer, it did not start.
    handover: bool,
    next_seq: u64,
    /// A large request's copy was let go with its answer: the heap has pages to hand back.
    large_freed: bool,
}

fn hash_of(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
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

impl State {
    fn new(writer: Option<UnixStream>) -> State {
        State {
            writer,
            initialize: None,
            initialized: false,
            in_flight: HashMap::new(),
            swallow: None,
            buffered: Vec::new(),
            reconnects: 0,
            last_tools: None,
            probe: None,
            disconnect_reason: None,
            refusing: None,
            closing: false,
            handover: false,
            next_seq: 0,
            large_freed: false,
        }
    }

    fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
        // A panic in the other thread ends the process anyway; keep going with the data.
        state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note what a client line is before it goes to the daemon; returns the key of the request
    /// it starts, if any.
    fn observe_client(&mut self, line: &[u8]) -> Option<String> {
        // The routing fields borrowed from the line: this runs on every line, and copying the
        // whole message into a `Message` was most of the shim's work per call.
        let Ok(msg) = Head::parse(line) else {
            return None;
        };
        match msg.kind() {
            Kind::Request => {
                let method = msg.method().unwrap_or_default();
                if method == "initialize" {
                    self.initialize = Some(line.to_vec());
                }
                if let Some(id) = msg.id() {
                    let is_call = method == "tools/call";
                    let is_tools_list = method == "tools/list" && !has_cursor(msg.params());
                    self.next_seq += 1;
                    let entry = InFlight {
                        id: id.to_owned(),
                        is_call,
                        is_tools_list,
                        sent: false,
                        line: Vec::new(),
                        seq: self.next_seq,
                    };
                    let key = id_key(id);
                    self.in_flight.insert(key.clone(), entry);
                    return Some(key);
                }
            }
            Kind::Notification => match msg.method() {
                Some("notifications/initialized") => self.initialized = true,
                Some("notifications/cancelled") => {
                    if let Some(req) = Message::parse(line)
                        .ok()
                        .and_then(|m| m.params_field("requestId"))
                    {
                        self.in_flight.remove(&id_key(&req));
                    }
                }
                _ => {}
            },
            Kind::Response => {}
        }
        None
    }

    /// Note a daemon line; false when the client must not see it.
    fn observe_daemon(&mut self, line: &[u8]) -> bool {
        if line.starts_with(HANDOVER_PREFIX) {
            self.handover = true;
            return false;
        }
        if line.starts_with(DISCONNECTED_PREFIX) {
            self.disconnect_reason = Message::parse(line)
                .ok()
                .and_then(|m| m.params_field("reason"))
                .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
            return false;
        }
        if self.in_flight.is_empty() && self.swallow.is_none() && self.probe.is_none() {
            return true;
        }
        // The daemon's lines are JSON it wrote: which request one answers is found without a
        // parse (see `wire::answer`); what does not walk is parsed, as it always was.
        let key = match answer::from_daemon(line) {
            Some(Daemon::Answer { id }) => id_key_of(id),
            Some(Daemon::Other) => return true,
            None => match Head::parse(line) {
                Ok(msg) if msg.kind() == Kind::Response => match msg.id() {
                    Some(id) => id_key(id),
                    None => return true,
                },
                _ => return true,
            },
        };
        if self.swallow.as_deref() == Some(key.as_str()) {
            self.swallow = None;
            return false;
        }
        // Only a tool list's answer is read further (rarely): parsed then.
        let result_hash = || {
            Head::parse(line)
                .ok()
                .and_then(|msg| msg.result().map(|r| hash_of(r.get())))
        };
        if self.probe.as_deref() == Some(key.as_str()) {
            self.probe = None;
            let now = result_hash();
            if now.is_some() && now != self.last_tools {
                self.last_tools = now;
                write_client(&wire::notification_line(
                    "notifications/tools/list_changed",
                    None,
                ));
            }
            return false;
        }
        if let Some(entry) = self.in_flight.remove(&key) {
            self.large_freed |= entry.line.len() > KEEP_LINE_BUFFER;
            if entry.is_tools_list {
                self.last_tools = result_hash();
            }
        }
        true
    }

    /// Requests the client is still owed an answer for: sent to a daemon, or buffered for the
    /// next one.
    fn pending(&self) -> usize {
        self.in_flight.len()
    }

    /// After stdin closed, exit once every request is answered.
    fn exit_if_done(&self) {
        if self.done() {
            tracing::debug!("stdin closed and every request answered; exiting");
            // The daemon's reader writes an answer after letting go of the state, holding
            // stdout's lock from before it did (see `run`): waiting for that lock lets the
            // last answer out whole before the process ends.
            let _out = std::io::stdout().lock();
            std::process::exit(0);
        }
    }

    fn done(&self) -> bool {
        self.closing && self.pending() == 0
    }

    /// Answer the requests buffered for a daemon that cannot be reached, with why: a
    /// reconnect that fails for a reason retrying does not cure (a broken config.json, an
    /// upstream the daemon does not have) must not leave the agent waiting in silence.
    fn refuse_buffered(&mut self, text: &str) {
        for line in std::mem::take(&mut self.buffered) {
            let Ok(msg) = Message::parse(line.trim_ascii_end()) else {
                continue;
            };
            if let Some(id) = msg.id()
                && let Some(p) = self.in_flight.remove(&id_key(id))
            {
                write_client(&refusal(&p.id, p.is_call, text));
            }
        }
    }

    /// The connection ended: after a hand-over in place, what the old daemon did not answer is
    /// sent again to the new one (it started none of it); otherwise it is answered with an
    /// error.
    fn connection_lost(&mut self) {
        if std::mem::take(&mut self.handover) {
            self.resend_in_flight();
        } else {
            self.fail_in_flight();
        }
    }

    /// Put every request sent to the old daemon back in front of what is buffered, in the
    /// order the client sent them, for the new daemon.
    fn resend_in_flight(&mut self) {
        let mut sent: Vec<&mut InFlight> = self.in_flight.values_mut().filter(|p| p.sent).collect();
        sent.sort_by_key(|p| p.seq);
        let mut lines = Vec::with_capacity(sent.len());
        for p in sent {
            p.sent = false;
            lines.push(std::mem::take(&mut p.line));
        }
        if !lines.is_empty() {
            tracing::info!(
                requests = lines.len(),
                "the daemon handed over; sending what it did not answer to the new one"
            );
        }
        lines.append(&mut self.buffered);
        self.buffered = lines;
    }

    /// Answer every request the daemon took with it (not those still buffered: they go to the
    /// next daemon).
    fn fail_in_flight(&mut self) {
        let text = match self.disconnect_reason.take() {
            Some(reason) => format!("{reason}; the session reconnects, so retry"),
            None => {
                "coogle: the daemon went away during this request; it is being restarted, so retry"
                    .to_string()
            }
        };
        let gone: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, p)| p.sent)
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            let Some(p) = self.in_flight.remove(&key) else {
                continue;
            };
            write_client(&refusal(&p.id, p.is_call, &text));
        }
    }

    /// Send a client line now, or keep it (taking it from `line`) for after the reconnect. A
    /// line sent is left for the caller to clear, so its buffer serves the next line.
    fn forward(&mut self, line: &mut Vec<u8>) {
        let key = self.observe_client(line);
        line.push(b'\n');
        if let Some(p) = key.as_ref().and_then(|k| self.in_flight.get_mut(k)) {
            p.line = line.clone();
        }
        if let Some(w) = &mut self.writer {
            if w.write_all(line).is_ok() {
                if let Some(p) = key.and_then(|k| self.in_flight.get_mut(&k)) {
                    p.sent = true;
                }
                return;
            }
            // The reader thread notices the loss too and reconnects.
            self.writer = None;
        }
        if let Some(text) = &self.refusing {
            // Nothing to wait for: say why now (the reconnect keeps trying meanwhile).
            if let Some(p) = key.and_then(|k| self.in_flight.remove(&k)) {
                write_client(&refusal(&p.id, p.is_call, text));
            }
            return;
        }
        if self.buffered.len() < MAX_BUFFERED {
            self.buffered.push(std::mem::take(line));
        } else if let Ok(m) = Message::parse(line.trim_ascii_end())
            && let Some(id) = m.id()
        {
            self.in_flight.remove(&id_key(id));
            let text = "coogle: the daemon is restarting and too much is waiting; retry shortly";
            write_client(&wire::error_line(
                Some(id),
                rpc_code::UPSTREAM_UNAVAILABLE,
                text,
            ));
        }
    }
}

/// Whether a request's params name a `cursor` (a later page of a list).
fn has_cursor(params: Option<&RawValue>) -> bool {
    params
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
        .is_some_and(|p| p.get("cursor").is_some())
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

/// Each reader's buffer. A line longer than this is read in several calls (into the line's
/// own buffer): a shim lives a whole session, mostly idle, and a buffer keeps every page a
/// large answer (a tool list of tens of KiB) once touched.
const READ_BUFFER: usize = 8 * 1024;

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

/// Hand the heap's free pages back, if a large line left some, once the reader has nothing
/// more buffered: at the end of a burst, so a stream of large lines costs one `malloc_trim`
/// (which holds the allocator's lock while it walks the heap), not one per line.
fn trim_when_drained(pending: &mut bool, drained: bool) {
    if *pending && drained {
        *pending = false;
        crate::os::release_free_memory();
    }
}

/// How long the daemon's side of a session stays silent before the shim settles into waiting
/// (see [`settle`]). A session's next call after that pays for a few page faults.
const QUIET: Duration = Duration::from_secs(2);

/// The daemon's side of the connection. A read waits in `poll` first: a read blocked on the
/// socket itself would also be woken, for nothing, each time the daemon drains what the stdin
/// thread wrote (see `os::wait_readable`), a context switch more on every call. With `quiet`
/// set, a wait that long ends with `WouldBlock` (time to settle), and the next one waits for as
/// long as it takes, until a read re-arms it. After a read that filled the buffer (a large
/// line), more is almost surely there: the next read goes straight to the socket (should that
/// line have ended exactly there, the shim waits for the next one without settling).
struct FromDaemon {
    stream: UnixStream,
    quiet: Option<Duration>,
    filled: bool,
}

impl std::io::Read for FromDaemon {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.filled && !crate::os::wait_readable(&self.stream, self.quiet)? {
            self.quiet = None;
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let n = self.stream.read(buf)?;
        self.filled = n == buf.len() && n > 0;
        self.quiet = Some(QUIET);
        Ok(n)
    }
}

/// The daemon has said nothing for [`QUIET`]: the session is idle, as most are most of the
/// day. Let go of what only busy moments need: the reader's buffers (pages a large answer
/// touched; nothing is half-read unless `buf` holds part of a line, which is kept), and what
/// the OS lets a waiting process give back.
fn settle(reader: BufReader<FromDaemon>, buf: &mut Vec<u8>) -> BufReader<FromDaemon> {
    if !buf.is_empty() || !reader.buffer().is_empty() {
        crate::os::release_idle_memory();
        return reader;
    }
    *buf = Vec::new();
    // The buffer is freed before the heap's free pages are handed back, and its successor
    // touches none of them until a line arrives.
    let stream = reader.into_inner();
    crate::os::release_idle_memory();
    BufReader::with_capacity(READ_BUFFER, stream)
}

/// Connect, starting a daemon when none answers, then say hello.
fn open(opts: &Options) -> Result<(UnixStream, BufReader<FromDaemon>), ClientError> {
    // A daemon started here runs on by itself; dropping the handle only reaps it later.
    let (stream, _started) = client::connect_or_start_blocking(&opts.socket, &opts.starter)?;
    let mut writer = stream.try_clone()?;
    writer.write_all(&wire::to_line(&Hello::mcp(opts.server.clone())))?;
    let mut reader = BufReader::with_capacity(
        READ_BUFFER,
        FromDaemon {
            stream,
            quiet: None,
            filled: false,
        },
    );
    let mut buf = Vec::new();
    match wire::read_line_capped_blocking(&mut reader, &mut buf, 64 * 1024)? {
        Line::Complete => {}
        _ => return Err(ClientError::Closed),
    }
    client::check_hello_reply(&buf)?;
    // From here on, a quiet daemon lets the shim settle (the hello itself is waited for).
    reader.get_mut().quiet = Some(QUIET);
    Ok((writer, reader))
}

/// Copy stdin to the daemon until stdin closes; then the process exits once every request
/// has its answer (see [`State::exit_if_done`]).
fn stdin_loop(state: Arc<Mutex<State>>, cap: usize) {
    let mut r = BufReader::with_capacity(READ_BUFFER, std::io::stdin().lock());
    let mut buf = Vec::new();
    let mut trim = false;
    loop {
        match wire::read_line_capped_blocking(&mut r, &mut buf, cap) {
            Ok(Line::Complete) => {
                if !wire::is_blank(&buf) {
                    State::lock(&state).forward(&mut buf);
                }
                trim |= reuse(&mut buf);
                trim_when_drained(&mut trim, r.buffer().is_empty());
            }
            Ok(Line::TooLong) => {
                trim |= reuse(&mut buf);
                let text = format!("line exceeds the {cap}-byte limit; it was dropped");
                write_client(&wire::error_line(None, rpc_code::INVALID_REQUEST, &text));
                if skip_line(&mut r) {
                    break;
                }
                trim_when_drained(&mut trim, r.buffer().is_empty());
            }
            Ok(Line::Eof) => {
                if !wire::is_blank(&buf) {
                    State::lock(&state).forward(&mut buf);
                }
                break;
            }
            Err(_) => break,
        }
    }
    // stdin closed: the agent sends nothing more, but what it asked is still answered.
    let mut st = State::lock(&state);
    st.closing = true;
    st.exit_if_done();
}

/// Discard the rest of an oversized line; true at EOF.
fn skip_line<R: BufRead>(r: &mut R) -> bool {
    loop {
        let Ok(buf) = r.fill_buf() else {
            return true;
        };
        if buf.is_empty() {
            return true;
        }
        match buf.iter().position(|b| *b == b'\n') {
            Some(p) => {
                r.consume(p + 1);
                return false;
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
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
    let (writer, mut reader) = match open(&opts) {
        Ok(opened) => opened,
        Err(e) => {
            let text = refusal_text(&e, opts.server.as_deref());
            // stderr, for a person looking; the agent's client gets it as its answers.
            tracing::error!("{text}");
            refuse_all(&text, opts.max_line_bytes);
            return Err(e);
        }
    };
    let state = Arc::new(Mutex::new(State::new(Some(writer))));
    // Before the stdin thread exists: its allocations share the main thread's arena instead
    // of touching one of their own (a shim lives for a whole session, mostly waiting).
    crate::os::one_malloc_arena();
    let cap = opts.max_line_bytes;
    let s = state.clone();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || stdin_loop(s, cap))
        .map_err(ClientError::Io)?;

    let mut buf = Vec::new();
    let mut trim = false;
    loop {
        match wire::read_line_capped_blocking(&mut reader, &mut buf, REPLY_LINE_CAP) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                reader = settle(reader, &mut buf);
                continue;
            }
            Ok(Line::Complete) => {
                let mut st = State::lock(&state);
                let pass = st.observe_daemon(&buf);
                let done = st.done();
                trim |= std::mem::take(&mut st.large_freed);
                // Write to the client after letting go of the state, so the stdin thread,
                // woken by the client's next request the moment this answer lands, finds the
                // state free instead of sleeping on the lock (a futex wait and wake on every
                // call). stdout's lock, taken first, keeps the order the state decided.
                let mut out = std::io::stdout().lock();
                drop(st);
                if pass {
                    buf.push(b'\n');
                    write_client_locked(&mut out, &buf);
                }
                if done {
                    tracing::debug!("stdin closed and every request answered; exiting");
                    std::process::exit(0);
                }
                drop(out);
                trim |= reuse(&mut buf);
                trim_when_drained(&mut trim, reader.buffer().is_empty());
                continue;
            }
            Ok(Line::TooLong) => {
                tracing::error!("the daemon sent a line over {REPLY_LINE_CAP} bytes")
            }
            Ok(Line::Eof) | Err(_) => {}
        }
        trim |= reuse(&mut buf);
        {
            let mut st = State::lock(&state);
            if !st.handover {
                tracing::warn!("lost the coogle daemon; reconnecting");
            }
            st.writer = None;
            st.connection_lost();
            // Nothing more will come from the client: nothing to reconnect for.
            st.exit_if_done();
        }
        reader = reconnect(&opts, &state);
    }
}

/// Reconnect with backoff (stdin keeps being read and buffered meanwhile), replay the client's
/// handshake, check whether the tools changed, and deliver what was buffered.
fn reconnect(opts: &Options, state: &Mutex<State>) -> BufReader<FromDaemon> {
    let mut delay = Duration::from_millis(50);
    loop {
        match open(opts) {
            Ok((mut writer, reader)) => {
                let mut st = State::lock(state);
                st.reconnects += 1;
                let mut replay = Vec::new();
                if let Some(init) = &st.initialize
                    && let Ok(mut msg) = Message::parse(init)
                {
                    let id = format!("coogle-reinit-{}", st.reconnects);
                    st.swallow = Some(id_key(&raw(&id)));
                    msg.set_id(raw(&id));
                    replay.extend_from_slice(&msg.to_line());
                    if st.initialized {
                        replay.extend_from_slice(&wire::notification_line(
                            "notifications/initialized",
                            None,
                        ));
                    }
                }
                // Ask for the tools the client was shown; `list_changed` only if they differ.
                if st.initialized && st.last_tools.is_some() {
                    let id = format!("coogle-tools-{}", st.reconnects);
                    st.probe = Some(id_key(&raw(&id)));
                    replay.extend_from_slice(&wire::request_line(
                        &raw(&id),
                        "tools/list",
                        &serde_json::json!({}),
                    ));
                }
                for line in std::mem::take(&mut st.buffered) {
                    replay.extend_from_slice(&line);
                }
                if writer.write_all(&replay).is_err() {
                    drop(st);
                    std::thread::sleep(delay);
                    continue;
                }
                st.writer = Some(writer);
                st.refusing = None;
                // Everything buffered went out with the replay.
                for p in st.in_flight.values_mut() {
                    p.sent = true;
                }
                tracing::info!("reconnected to the coogle daemon");
                return reader;
            }
            Err(e) => {
                let text = refusal_text(&e, opts.server.as_deref());
                tracing::warn!("reconnecting to the daemon failed: {text}; retrying in {delay:?}");
                let cap = if is_permanent(&e) {
                    let mut st = State::lock(state);
                    st.refuse_buffered(&text);
                    st.refusing = Some(text);
                    st.exit_if_done();
                    // Each try starts a daemon that fails the same way: try less often.
                    Duration::from_secs(30)
                } else {
                    Duration::from_secs(5)
                };
                std::thread::sleep(delay);
                delay = (delay * 2).min(cap);
            }
        }
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
                if skip_line(&mut r) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        let mut st = State::new(None);
        st.initialized = true;
        st
    }

    fn sent_request(id: &str) -> InFlight {
        InFlight {
            id: raw(id),
            is_call: false,
            is_tools_list: false,
            sent: true,
            line: Vec::new(),
            seq: 0,
        }
    }

    /// An upgrade in place: the daemon said it hands over, then closed. What it did not
    /// answer it did not start, so it is sent again to the new daemon, in the client's order,
    /// and nothing is failed; an answered request is not sent again.
    #[test]
    fn after_a_hand_over_unanswered_requests_go_to_the_new_daemon_in_order() {
        let (ours, mut daemon) = UnixStream::pair().unwrap();
        let mut st = State::new(Some(ours));
        st.initialized = true;
        for i in 0..3 {
            st.forward(
                &mut format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{}}}}"#)
                    .into_bytes(),
            );
        }
        assert!(st.observe_daemon(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        let notice = wire::notification_line(wire::HANDOVER_NOTICE, None);
        assert!(
            !st.observe_daemon(notice.trim_ascii_end()),
            "not for the client"
        );
        st.writer = None;
        st.forward(&mut br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#.to_vec());
        st.connection_lost();
        let ids: Vec<String> = st
            .buffered
            .iter()
            .map(|l| {
                Message::parse(l.trim_ascii_end())
                    .unwrap()
                    .id()
                    .unwrap()
                    .get()
                    .to_string()
            })
            .collect();
        assert_eq!(ids, ["0", "2", "3"]);
        assert_eq!(st.pending(), 3, "nothing was failed");
        // The old daemon did get the first three.
        drop(st);
        let mut got = String::new();
        std::io::Read::read_to_string(&mut daemon, &mut got).unwrap();
        assert_eq!(got.lines().count(), 3);
        // Without the notice, what was sent is failed as before.
        let mut st = state();
        st.in_flight.insert(r#""x""#.into(), sent_request("x"));
        st.connection_lost();
        assert_eq!(st.pending(), 0);
    }

    /// Regression (a flaky `reconnect` test under load): a request buffered while the daemon
    /// was gone was answered with "the daemon went away" when the reader noticed the loss a
    /// moment later, and then answered again after the replay.
    /// The daemon's last line to a session it disconnects is not passed on, and its reason is
    /// what the agent reads instead of "the daemon went away".
    #[test]
    fn a_disconnect_says_why() {
        let mut st = state();
        let notice = wire::notification_line(
            wire::DISCONNECTED_NOTICE,
            Some(&serde_json::json!({"reason": "coogle disconnected this session: x"})),
        );
        assert!(notice.starts_with(DISCONNECTED_PREFIX));
        assert!(!st.observe_daemon(notice.trim_ascii_end()));
        assert!(
            st.disconnect_reason
                .as_deref()
                .unwrap()
                .contains("disconnected this session")
        );
        st.in_flight.insert(r#""q""#.into(), sent_request("q"));
        st.fail_in_flight();
        assert!(st.disconnect_reason.is_none(), "told once");
    }

    #[test]
    fn a_buffered_request_is_not_failed_when_the_daemon_goes_away() {
        let mut st = state();
        st.forward(
            &mut br#"{"jsonrpc":"2.0","id":"q0","method":"tools/call","params":{}}"#.to_vec(),
        );
        assert_eq!(st.buffered.len(), 1);
        assert!(!st.in_flight[r#""q0""#].sent);
        st.fail_in_flight();
        assert!(
            st.in_flight.contains_key(r#""q0""#),
            "the buffered request was failed"
        );

        // One that had been written is failed (and removed).
        st.in_flight.insert(r#""q1""#.into(), sent_request("q1"));
        st.fail_in_flight();
        assert!(!st.in_flight.contains_key(r#""q1""#));
        assert!(st.in_flight.contains_key(r#""q0""#));
    }
}
