//! The one thread (see [`Pump`]): `poll` on stdin and the daemon's socket, each side read once
//! per wake-up, the lines that arrived copied on, and settling when both sides are quiet.

use std::io::{BufRead, Read};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::client::REPLY_LINE_CAP;
use crate::os::Want;
use crate::wire::{self, Line, rpc_code};

use super::connect::Conn;
use super::state::State;
use super::{reuse, write_client};

/// Each reader's buffer. A line longer than this is read in several calls (into the line's
/// own buffer): a shim lives a whole session, mostly idle, and a buffer keeps every page a
/// large answer (a tool list of tens of KiB) once touched.
pub(super) const READ_BUFFER: usize = 8 * 1024;

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

/// How long a shim whose stdin has ended keeps failing to reach a daemon before it answers
/// what it owes with why: a daemon start (20 s) and then some, counted from the first failed
/// attempt after stdin ended.
const GIVE_UP: Duration = Duration::from_secs(30);

/// How long both sides of a session stay silent before the shim settles into waiting (see
/// [`Pump::settle`]). A session's next call after that pays for a few page faults.
const QUIET: Duration = Duration::from_secs(2);

/// One side's descriptor and its read buffer. The descriptor is read only once `poll` said it
/// has something (or has ended): one read per wake-up, so the one thread never blocks on one
/// side while the other has a line for it, and never reads a side that has nothing. Without
/// the go-ahead, an empty buffer is `WouldBlock`, which leaves a half-read line where it is
/// (see `wire::read_line_capped_blocking`). The buffer is allocated on the first read and can
/// be let go while it is empty (see [`Pump::settle`]).
pub(super) struct Polled<R> {
    pub(super) inner: R,
    pub(super) ready: bool,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R: Read> Polled<R> {
    pub(super) fn new(inner: R) -> Polled<R> {
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
pub(super) type FromDaemon = Polled<UnixStream>;

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
pub(super) struct Pump {
    pub(super) state: State,
    pub(super) daemon: FromDaemon,
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
    pub(super) daemons: Vec<std::process::Child>,
    /// When [`Pump::reap`] last looked.
    reaped: std::time::Instant,
    /// Since when reconnecting has failed with stdin ended, if it has (see
    /// [`Pump::give_up_if_client_gone`]); cleared by a connection.
    pub(super) failing_since: Option<std::time::Instant>,
}

/// How the daemon's side stands after its lines were read.
enum Side {
    /// Everything it sent so far is passed on; wait for more.
    Waiting,
    /// The connection ended (or sent what no daemon sends).
    Lost,
}

impl Pump {
    pub(super) fn new(
        (writer, daemon): Conn,
        started: Option<std::process::Child>,
        cap: usize,
    ) -> std::io::Result<Pump> {
        let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
        Ok(Pump {
            daemons: started.into_iter().collect(),
            reaped: std::time::Instant::now(),
            failing_since: None,
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
    pub(super) fn serve(&mut self) {
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

    /// A reconnect failed. Once the client's stdout is gone, nobody can read an answer: exit
    /// (whether or not stdin has ended; another process may hold it open). Once stdin has
    /// ended, the client will send nothing more and retrying is only for answering what it is
    /// owed: after [`GIVE_UP`] of failed attempts, answer that with why and exit. Either way
    /// the shim does not retry (starting a daemon each time) for ever as an orphan of a client
    /// long gone.
    pub(super) fn give_up_if_client_gone(&mut self, text: &str) {
        let stdout_gone = crate::os::wait_for(
            [(
                Some(std::io::stdout().as_fd()),
                Want {
                    read: false,
                    write: false,
                },
            )],
            Some(Duration::ZERO),
        )
        .is_ok_and(|hung_up| hung_up.is_some());
        if stdout_gone {
            tracing::warn!(
                "the client has gone and the daemon cannot be reached ({text}); exiting"
            );
            std::process::exit(0);
        }
        if !self.state.closing {
            return;
        }
        let since = *self
            .failing_since
            .get_or_insert_with(std::time::Instant::now);
        if since.elapsed() < GIVE_UP {
            return;
        }
        tracing::warn!(
            "stdin has ended and the daemon could not be reached for {} s ({text}); exiting",
            GIVE_UP.as_secs()
        );
        self.state.refuse_everything_owed(&format!(
            "{text}; the client closed its input, so coogle stopped retrying"
        ));
        std::process::exit(0);
    }

    /// Serve the client alone, while there is no daemon to send to (its requests are buffered
    /// for the next one, or refused with why), until `time` has passed or `done` (the connect
    /// thread's end, see [`Pump::open_serving_client`]) is readable; one of them is given.
    pub(super) fn serve_client(&mut self, time: Option<Duration>, done: Option<&UnixStream>) {
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
    pub(super) fn serve_client_for(&mut self, time: Duration) {
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
    pub(super) fn reap(&mut self) {
        self.daemons
            .retain_mut(|d| matches!(d.try_wait(), Ok(None)));
        self.reaped = std::time::Instant::now();
    }
}

/// Discard the rest of an oversized line: true at its end, false at EOF. A reader with nothing
/// for now says `WouldBlock`, and the skipping goes on at its next go-ahead.
pub(super) fn skip_line<R: BufRead>(r: &mut R) -> std::io::Result<bool> {
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
