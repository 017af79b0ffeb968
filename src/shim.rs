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

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};
use serde_json::value::RawValue;

use crate::client::{self, ClientError, REPLY_LINE_CAP, Starter};
use crate::os::Want;
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

#[derive(Clone)]
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

/// What the shim knows of the session: what is in flight, the handshake to replay, and what
/// waits for the next daemon.
struct State {
    /// The socket's write side (non-blocking); `None` while reconnecting.
    writer: Option<UnixStream>,
    /// Bytes for the daemon its socket has not taken yet. While there are any, stdin is left
    /// unread: the client waits, and the daemon's answers keep flowing.
    out: Vec<u8>,
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
            out: Vec::new(),
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
            std::process::exit(0);
        }
    }

    /// stdin closed, every request answered, and every line the client wrote taken by the
    /// daemon (a last notification too).
    fn done(&self) -> bool {
        self.closing && self.pending() == 0 && self.out.is_empty()
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
            // A copy: a second hand-over before the answer sends it again.
            lines.push(p.line.clone());
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
        if self.send(line) {
            if let Some(p) = key.and_then(|k| self.in_flight.get_mut(&k)) {
                p.sent = true;
            }
            return;
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

    /// Write `bytes` to the daemon, or as much as its socket takes now, keeping the rest for
    /// [`State::flush_out`]; false when there is no daemon to write to.
    fn send(&mut self, bytes: &[u8]) -> bool {
        let Some(w) = &mut self.writer else {
            return false;
        };
        let mut rest = bytes;
        if self.out.is_empty() {
            match write_some(w, rest) {
                Ok(n) => rest = &rest[n..],
                Err(_) => {
                    self.lose_writer();
                    return false;
                }
            }
        }
        self.out.extend_from_slice(rest);
        true
    }

    /// The daemon's socket can take more: write what waits.
    fn flush_out(&mut self) {
        let Some(w) = &mut self.writer else {
            return;
        };
        match write_some(w, &self.out) {
            Ok(n) => {
                self.out.drain(..n);
                if self.out.is_empty() {
                    reuse(&mut self.out);
                }
            }
            Err(_) => self.lose_writer(),
        }
    }

    /// The connection to the daemon is gone (or going): what it did not take is dropped with
    /// it, and the requests in it are answered as the connection's are (see
    /// [`State::connection_lost`]). Reading the socket notices the end too and reconnects.
    fn lose_writer(&mut self) {
        self.writer = None;
        self.out = Vec::new();
    }
}

/// Write as much of `bytes` as a non-blocking socket takes now.
fn write_some(w: &mut UnixStream, bytes: &[u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < bytes.len() {
        match w.write(&bytes[done..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
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

/// How often a busy shim looks for an ended daemon it started (see [`Pump::reap`]).
const REAP_EVERY: Duration = Duration::from_secs(1);

/// How long both sides of a session stay silent before the shim settles into waiting (see
/// [`Pump::settle`]). A session's next call after that pays for a few page faults.
const QUIET: Duration = Duration::from_secs(2);

/// One side's descriptor and its read buffer. The descriptor is read only once `poll` said it
/// has something (or has ended): one read per wake-up, so the one thread never blocks on one
/// side while the other has a line for it, and never reads a side that has nothing. Without
/// the go-ahead, an empty buffer is `WouldBlock`, which leaves a half-read line where it is
/// (see `wire::read_line_capped_blocking`). The buffer is allocated on the first read and can
/// be let go while it is empty (see [`Pump::settle`]).
struct Polled<R> {
    inner: R,
    ready: bool,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R: Read> Polled<R> {
    fn new(inner: R) -> Polled<R> {
        Polled {
            inner,
            ready: false,
            buf: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// What was read and not yet consumed.
    fn buffer(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Free the buffer if it holds nothing; the next read allocates it again.
    fn let_go(&mut self) {
        if self.start == self.end {
            self.buf = Vec::new();
            (self.start, self.end) = (0, 0);
        }
    }
}

impl<R: Read> Read for Polled<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Polled<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.start == self.end {
            if !std::mem::take(&mut self.ready) {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            if self.buf.is_empty() {
                self.buf = vec![0; READ_BUFFER];
            }
            let n = loop {
                match self.inner.read(&mut self.buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    done => break done?,
                }
            };
            (self.start, self.end) = (0, n);
        }
        Ok(self.buffer())
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }
}

/// The daemon's side of the session. Its socket is non-blocking once the handshake is done,
/// so a daemon slow to take the client's lines never holds up its answers.
type FromDaemon = Polled<UnixStream>;

/// The client's side: stdin, on a descriptor of its own (a copy of 0, so no buffer of std's
/// sits in front of it). It stays blocking, as the client may share it; it is only read after
/// `poll` said it has something.
type FromClient = Polled<std::fs::File>;

/// Both directions on one thread: `poll` on the daemon's socket and stdin, then the lines that
/// arrived are copied on. One thread where there were two (one per direction): an answer
/// wakes the thread that sent the request, which the scheduler keeps where it ran, where a
/// second thread was woken on another CPU on every call (3,000 CPU migrations in 3,000 calls
/// against socat's 850; 24 µs of the 150 µs a call took, unpinned). It is also a stack less per
/// shim. stdout is written blocking (it may be shared, so it is never made non-blocking): a
/// client that stops reading its answers stops the shim reading its requests too, as a server
/// on one thread run directly would. Claude Code reads as it writes. The only other thread is
/// the short-lived one a reconnect connects on (see [`Pump::open_serving_client`]).
struct Pump {
    state: State,
    daemon: FromDaemon,
    daemon_line: Vec<u8>,
    /// `None` once stdin has ended.
    client: Option<FromClient>,
    client_line: Vec<u8>,
    /// The rest of a client line over the cap is being dropped.
    skipping: bool,
    cap: usize,
    /// A large line was let go: the heap has pages to hand back at the end of the burst.
    trim: bool,
    /// Daemons this shim started, until they exit: reaped here (see [`Pump::reap`]), not by a
    /// thread of their own.
    daemons: Vec<std::process::Child>,
    /// When [`Pump::reap`] last looked.
    reaped: std::time::Instant,
}

/// How the daemon's side stands after its lines were read.
enum Side {
    /// Everything it sent so far is passed on; wait for more.
    Waiting,
    /// The connection ended (or sent what no daemon sends).
    Lost,
}

impl Pump {
    fn new(
        (writer, daemon): Conn,
        started: Option<std::process::Child>,
        cap: usize,
    ) -> std::io::Result<Pump> {
        let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
        Ok(Pump {
            daemons: started.into_iter().collect(),
            reaped: std::time::Instant::now(),
            state: State::new(Some(writer)),
            daemon,
            daemon_line: Vec::new(),
            client: Some(Polled::new(std::fs::File::from(stdin))),
            client_line: Vec::new(),
            skipping: false,
            cap,
            trim: false,
        })
    }

    /// Copy lines both ways until the daemon's side ends.
    fn serve(&mut self) {
        let mut quiet = true;
        loop {
            if let Side::Lost = self.pass_daemon_lines() {
                return;
            }
            self.send_client_lines();
            // stdin is left unread while the daemon has yet to take what was sent before: the
            // client waits, never the answers.
            let sending = !self.state.out.is_empty();
            let stdin = self
                .client
                .as_ref()
                .filter(|_| !sending)
                .map(|c| c.inner.as_fd());
            let socket = Want {
                read: true,
                write: sending,
            };
            let timeout = quiet.then_some(QUIET);
            let waited = crate::os::wait_for(
                [
                    (Some(self.daemon.inner.as_fd()), socket),
                    (stdin, Want::READ),
                ],
                timeout,
            );
            match waited {
                Ok(Some([daemon, client])) => {
                    quiet = true;
                    // A busy session may never settle: a daemon it started that has ended
                    // is collected here too, within a second.
                    if !self.daemons.is_empty() && self.reaped.elapsed() >= REAP_EVERY {
                        self.reap();
                    }
                    self.daemon.ready = daemon.read;
                    if let Some(c) = &mut self.client {
                        c.ready = client.read;
                    }
                    if daemon.write {
                        self.state.flush_out();
                        self.state.exit_if_done();
                    }
                }
                // Silence on both sides for QUIET: settle, then wait as long as it takes.
                Ok(None) => {
                    quiet = false;
                    self.settle();
                }
                Err(e) => {
                    tracing::error!("waiting for the client or the daemon failed: {e}");
                    std::process::exit(1);
                }
            }
        }
    }

    /// Pass on every line the daemon has sent.
    fn pass_daemon_lines(&mut self) -> Side {
        loop {
            match wire::read_line_capped_blocking(
                &mut self.daemon,
                &mut self.daemon_line,
                REPLY_LINE_CAP,
            ) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Side::Waiting,
                Ok(Line::Complete) => {
                    let line = &mut self.daemon_line;
                    if self.state.observe_daemon(line) {
                        line.push(b'\n');
                        write_client(line);
                    }
                    self.trim |= std::mem::take(&mut self.state.large_freed);
                    if self.state.done() {
                        tracing::debug!("stdin closed and every request answered; exiting");
                        std::process::exit(0);
                    }
                    self.trim |= reuse(line);
                    trim_when_drained(&mut self.trim, self.daemon.buffer().is_empty());
                }
                Ok(Line::TooLong) => {
                    tracing::error!("the daemon sent a line over {REPLY_LINE_CAP} bytes");
                    reuse(&mut self.daemon_line);
                    return Side::Lost;
                }
                Ok(Line::Eof) | Err(_) => {
                    reuse(&mut self.daemon_line);
                    return Side::Lost;
                }
            }
        }
    }

    /// Send on every line the client has written, until stdin has no more for now or the
    /// daemon has yet to take what was sent; buffered for the next daemon while there is none.
    fn send_client_lines(&mut self) {
        while let Some(r) = &mut self.client {
            if !self.state.out.is_empty() {
                return;
            }
            if self.skipping {
                match skip_line(r) {
                    Ok(true) => self.skipping = false,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                    Ok(false) | Err(_) => return self.client_ended(),
                }
            }
            match wire::read_line_capped_blocking(r, &mut self.client_line, self.cap) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Ok(Line::Complete) => {
                    if !wire::is_blank(&self.client_line) {
                        self.state.forward(&mut self.client_line);
                    }
                    self.trim |= reuse(&mut self.client_line);
                    let drained = r.buffer().is_empty();
                    trim_when_drained(&mut self.trim, drained);
                }
                Ok(Line::TooLong) => {
                    self.trim |= reuse(&mut self.client_line);
                    let text = format!("line exceeds the {}-byte limit; it was dropped", self.cap);
                    write_client(&wire::error_line(None, rpc_code::INVALID_REQUEST, &text));
                    self.skipping = true;
                }
                Ok(Line::Eof) | Err(_) => return self.client_ended(),
            }
        }
    }

    /// stdin closed: the agent sends nothing more, but what it asked is still answered (a
    /// last line without its newline goes too).
    fn client_ended(&mut self) {
        self.client = None;
        if !self.skipping && !wire::is_blank(&self.client_line) {
            self.state.forward(&mut self.client_line);
        }
        self.client_line = Vec::new();
        self.state.closing = true;
        self.state.exit_if_done();
    }

    /// Serve the client alone, while there is no daemon to send to (its requests are buffered
    /// for the next one, or refused with why), until `time` has passed or `done` (the connect
    /// thread's end, see [`Pump::open_serving_client`]) is readable; one of them is given.
    fn serve_client(&mut self, time: Option<Duration>, done: Option<&UnixStream>) {
        let deadline = time.map(|t| std::time::Instant::now() + t);
        loop {
            self.send_client_lines();
            // A backoff lasts up to 30 s, and a daemon started by an attempt (one that refused
            // this session, say) may end meanwhile: while there is one, look once a second.
            let reaping = !self.daemons.is_empty();
            if reaping && self.reaped.elapsed() >= REAP_EVERY {
                self.reap();
            }
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return;
            }
            let wait = match (left, reaping.then_some(REAP_EVERY)) {
                (Some(left), Some(tick)) => Some(left.min(tick)),
                (left, tick) => left.or(tick),
            };
            let stdin = self.client.as_ref().map(|c| c.inner.as_fd());
            let finished = done.map(|d| d.as_fd());
            match crate::os::wait_for([(stdin, Want::READ), (finished, Want::READ)], wait) {
                Ok(Some([client, finished])) => {
                    if let Some(c) = &mut self.client {
                        c.ready = client.read;
                    }
                    if finished.read {
                        return;
                    }
                }
                // The deadline (checked above) or the next look for an ended daemon.
                Ok(None) => {}
                Err(e) => {
                    tracing::error!("waiting for the client failed: {e}");
                    std::process::exit(1);
                }
            }
        }
    }

    /// [`Pump::serve_client`] for `time`.
    fn serve_client_for(&mut self, time: Duration) {
        self.serve_client(Some(time), None);
    }

    /// Both sides have been silent for [`QUIET`]: the session is idle, as most are most of the
    /// day. Let go of what only busy moments need: each reader's buffers (pages a large line
    /// touched; a half-read line is kept), and what the OS lets a waiting process give back.
    fn settle(&mut self) {
        if self.daemon_line.is_empty() {
            self.daemon_line = Vec::new();
        }
        self.daemon.let_go();
        if self.client_line.is_empty() {
            self.client_line = Vec::new();
        }
        if let Some(c) = &mut self.client {
            c.let_go();
        }
        self.reap();
        crate::os::release_idle_memory();
    }

    /// Collect the exit of any daemon this shim started that has ended (a second one exits at
    /// once with "already running"; the one that serves, when it is stopped or upgraded), so
    /// none stays a zombie. Done when the shim settles, when it reconnects, and at most once a
    /// second ([`REAP_EVERY`]) while it is busy.
    fn reap(&mut self) {
        self.daemons
            .retain_mut(|d| matches!(d.try_wait(), Ok(None)));
        self.reaped = std::time::Instant::now();
    }

    /// [`open`] on a short-lived thread, while this one serves the client: starting a daemon
    /// takes up to its start timeout, and meanwhile the client's requests are buffered (or
    /// refused with why) and the end of its stdin is noticed. The thread's end (its side of a
    /// socket pair closing) wakes this one's `poll`, so nothing is polled on a timer meanwhile.
    fn open_serving_client(&mut self, opts: &Options) -> Opened {
        let Ok((done_tx, done_rx)) = UnixStream::pair() else {
            return open(opts);
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let o = opts.clone();
        let spawned = std::thread::Builder::new()
            .name("connect".into())
            .spawn(move || {
                let _ = tx.send(open(&o));
                drop(done_tx);
            });
        if spawned.is_err() {
            return open(opts);
        }
        loop {
            match rx.try_recv() {
                Ok(opened) => return opened,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    self.serve_client(None, Some(&done_rx))
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    return (Err(ClientError::Closed), None);
                }
            }
        }
    }
}

impl Pump {
    /// Reconnect with backoff, serving the client meanwhile (its requests are buffered for the
    /// next daemon, or refused with why); replay the client's handshake, check whether the
    /// tools changed, and deliver what was buffered.
    fn reconnect(&mut self, opts: &Options) {
        let mut delay = Duration::from_millis(50);
        loop {
            self.reap();
            let (opened, started) = self.open_serving_client(opts);
            self.daemons.extend(started);
            match opened {
                Ok((writer, reader)) => {
                    let st = &mut self.state;
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
                    st.writer = Some(writer);
                    st.refusing = None;
                    // Everything buffered goes out with the replay, written as any line is:
                    // what the socket does not take now waits in `out` while answers flow.
                    // Should this connection fail too, its requests are answered (or sent
                    // again after a hand-over) as any connection's are, never replayed in a
                    // loop.
                    for p in st.in_flight.values_mut() {
                        p.sent = true;
                    }
                    st.send(&replay);
                    tracing::info!("reconnected to the coogle daemon");
                    self.daemon = reader;
                    return;
                }
                Err(e) => {
                    let text = refusal_text(&e, opts.server.as_deref());
                    tracing::warn!(
                        "reconnecting to the daemon failed: {text}; retrying in {delay:?}"
                    );
                    let cap = if is_permanent(&e) {
                        let st = &mut self.state;
                        st.refuse_buffered(&text);
                        st.refusing = Some(text);
                        st.exit_if_done();
                        // Each try starts a daemon that fails the same way: try less often.
                        Duration::from_secs(30)
                    } else {
                        Duration::from_secs(5)
                    };
                    self.serve_client_for(delay);
                    delay = (delay * 2).min(cap);
                }
            }
        }
    }
}

/// Discard the rest of an oversized line: true at its end, false at EOF. A reader with nothing
/// for now says `WouldBlock`, and the skipping goes on at its next go-ahead.
fn skip_line<R: BufRead>(r: &mut R) -> std::io::Result<bool> {
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        match memchr::memchr(b'\n', buf) {
            Some(p) => {
                r.consume(p + 1);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// A connection to the daemon after its hello: the write side and the read side.
type Conn = (UnixStream, FromDaemon);

/// What [`open`] gives back: the connection, or why there is none; and the daemon process if
/// it had to start one, whether or not its hello then went well: this shim reaps it.
type Opened = (Result<Conn, ClientError>, Option<std::process::Child>);

/// How long a daemon that accepted the connection has to take the hello and answer it: one
/// that is stopped or wedged is tried again, with the backoff, rather than waited on for ever.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

/// Connect, starting a daemon when none answers, then say hello. The socket is non-blocking
/// when it is returned.
fn open(opts: &Options) -> Opened {
    match client::connect_or_start_blocking(&opts.socket, &opts.starter) {
        Ok((stream, started)) => (
            say_hello(stream, opts),
            started.and_then(client::Started::into_child),
        ),
        Err(e) => (Err(e), None),
    }
}

/// The hello and its reply, within [`HELLO_TIMEOUT`]. The socket is non-blocking from here
/// on, and each wait is a `poll` with what is left of the time: a hello carries the session's
/// environment, which may be more than the socket holds at once, and a time limit on each
/// system call would let a daemon that takes a little at a time keep the shim for ever.
fn say_hello(stream: UnixStream, opts: &Options) -> Result<Conn, ClientError> {
    let deadline = std::time::Instant::now() + HELLO_TIMEOUT;
    stream.set_nonblocking(true)?;
    let mut writer = stream.try_clone()?;
    let hello = wire::to_line(&Hello::mcp(opts.server.clone()));
    let mut rest = &hello[..];
    loop {
        rest = &rest[write_some(&mut writer, rest)?..];
        if rest.is_empty() {
            break;
        }
        wait_within(
            &writer,
            Want {
                read: false,
                write: true,
            },
            deadline,
        )?;
    }
    let mut reader = Polled::new(stream);
    let mut buf = Vec::new();
    loop {
        match wire::read_line_capped_blocking(&mut reader, &mut buf, 64 * 1024) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_within(&reader.inner, Want::READ, deadline)?;
                reader.ready = true;
            }
            Ok(Line::Complete) => break,
            Ok(_) => return Err(ClientError::Closed),
            Err(e) => return Err(e.into()),
        }
    }
    client::check_hello_reply(&buf)?;
    Ok((writer, reader))
}

/// Wait until `socket` is ready for `want`, or say the daemon did not answer in time.
fn wait_within(
    socket: &UnixStream,
    want: Want,
    deadline: std::time::Instant,
) -> Result<(), ClientError> {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    match crate::os::wait_for([(Some(socket.as_fd()), want)], Some(left))? {
        Some(_) => Ok(()),
        None => Err(ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the coogle daemon did not answer within {} s",
                HELLO_TIMEOUT.as_secs()
            ),
        ))),
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
