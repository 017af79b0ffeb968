//! The pipes of a running child, turned into actor events.
//!
//! Three tasks per child: its stdout read line by line (capped) into [`ChildEvent::Line`], its
//! stderr drained into the daemon log (and a short tail kept for error messages), and a waiter
//! that reports [`ChildEvent::Exited`] only after every line the child wrote has been
//! delivered. Each event carries the child's generation, so nothing from a replaced child is
//! ever taken for the current one's. The child's stdin is written by the actor itself, without
//! a task hop.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::{ChildEvent, Event};
use crate::daemon::child::{self, Spawned};
use crate::daemon::outbox::Outbox;
use crate::os;
use crate::wire::{self, Line};

/// How many of the child's last stderr lines are kept for error messages.
const STDERR_TAIL: usize = 20;
/// The longest stderr line logged whole; the rest of a longer one is dropped.
const STDERR_LINE_MAX: usize = 4096;
/// How long stderr lines that may end in the start of a secret wait for the line that would
/// finish it (see `redact::LineRedactor`).
const STDERR_HOLD: Duration = Duration::from_millis(200);

/// The last lines a child wrote to stderr, shared with its stderr task.
#[derive(Clone, Default)]
pub(super) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut t) = self.0.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(line);
        }
    }

    /// "; its last stderr line: …", or nothing.
    pub fn hint(&self) -> String {
        match self.0.lock().ok().and_then(|t| t.back().cloned()) {
            Some(last) => format!("; its last stderr line: {last}"),
            None => String::new(),
        }
    }
}

/// A running child as the actor sees it.
pub(super) struct ChildHandle {
    pub pid: u32,
    pub started: Instant,
    /// When it started, by the clock (kept across an upgrade in place).
    pub started_at: SystemTime,
    pub writer: Outbox<tokio::net::unix::pipe::Sender>,
    /// Becomes true once the child has exited and its group was swept.
    pub exited: watch::Receiver<bool>,
    /// What taking its pipes back needs (an upgrade in place).
    tasks: PipeTasks,
}

/// The tasks that hold a child's pipes.
struct PipeTasks {
    /// Tells the readers and the waiter to let go (without a word to the actor).
    stop: watch::Sender<bool>,
    stdout: JoinHandle<ReaderEnd>,
    stderr: JoinHandle<ReaderEnd>,
    stdin: JoinHandle<()>,
    waiter: JoinHandle<()>,
}

/// A reader's pipe and what it had read but not yet handed on, when it was told to let go.
#[derive(Default)]
pub(super) struct ReaderEnd {
    fd: Option<OwnedFd>,
    pending: Vec<u8>,
}

/// A running child's pipes taken back from the daemon's tasks, whole: the next daemon (this
/// process after an upgrade in place) reads from where this one stopped.
pub(crate) struct DetachedPipes {
    pub pid: u32,
    pub started_at: SystemTime,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// Bytes read from stdout (stderr) and not yet handed on: the start of the next line.
    pub stdout_pending: Vec<u8>,
    pub stderr_pending: Vec<u8>,
}

impl ChildHandle {
    /// Take the child's pipes back without stopping it: the readers stop at once, keeping what
    /// they had read of an unfinished line, and what was queued for its stdin is written
    /// first. Nothing about the child reaches the actor afterwards.
    /// Tell the readers to let go (the stdout reader then says `ReaderStopped` to the actor);
    /// [`ChildHandle::detach`] takes the pipes after that.
    pub fn stop_reading(&self) {
        let _ = self.tasks.stop.send(true);
    }

    /// Whether the stdout reader still runs (it ends at EOF, and then says nothing more).
    pub fn reading(&self) -> bool {
        !self.tasks.stdout.is_finished()
    }

    pub async fn detach(self) -> std::io::Result<DetachedPipes> {
        let ChildHandle {
            pid,
            started_at,
            writer,
            tasks,
            ..
        } = self;
        let _ = tasks.stop.send(true);
        let out = tasks.stdout.await.unwrap_or_default();
        let err = tasks.stderr.await.unwrap_or_default();
        tasks.waiter.abort();
        let stdin = writer
            .into_writer(tasks.stdin)
            .await
            .ok_or_else(|| std::io::Error::other("the child's stdin could not be taken back"))?;
        let missing = || std::io::Error::other("a reader of the child's pipes ended early");
        Ok(DetachedPipes {
            pid,
            started_at,
            stdin: stdin.into_nonblocking_fd()?,
            stdout: out.fd.ok_or_else(missing)?,
            stderr: err.fd.ok_or_else(missing)?,
            stdout_pending: out.pending,
            stderr_pending: err.pending,
        })
    }
}

#[cfg(test)]
impl ChildHandle {
    /// A handle for the actor's unit tests: a child that is only a pipe to its stdin.
    pub(super) fn for_test(
        writer: Outbox<tokio::net::unix::pipe::Sender>,
        exited: watch::Receiver<bool>,
    ) -> ChildHandle {
        ChildHandle {
            pid: 0,
            started: Instant::now(),
            started_at: SystemTime::now(),
            writer,
            exited,
            tasks: PipeTasks {
                stop: watch::channel(false).0,
                stdout: tokio::spawn(async { ReaderEnd::default() }),
                stderr: tokio::spawn(async { ReaderEnd::default() }),
                stdin: tokio::spawn(async {}),
                waiter: tokio::spawn(async {}),
            },
        }
    }
}

/// What a child's pipes are wired to.
pub(super) struct Wiring {
    pub generation: u64,
    pub tx: mpsc::Sender<Event>,
    /// The longest line accepted from the child.
    pub max_line: usize,
    pub upstream: String,
    pub tail: StderrTail,
    pub reaper: std::sync::Arc<crate::daemon::reaper::Reaper>,
    /// Read nothing from the child's stdout until this says so (an adopted child: see
    /// `handing_over::Upstream::open_read_gate`); `None`, read at once.
    pub read_gate: Option<watch::Receiver<bool>>,
}

/// How the child's exit is learnt.
enum Waiter {
    /// Spawned by this process's runtime.
    Spawned(tokio::process::Child),
    /// Inherited across an upgrade in place: this process's child still, not the runtime's.
    Adopted(u32),
}

/// Wire a freshly spawned child to the actor. Errors only when its pipes cannot be made
/// non-blocking (the child is then killed).
pub(super) fn attach(spawned: Spawned, wiring: Wiring) -> Result<ChildHandle, String> {
    let pid = spawned.pid;
    let pipes = (|| -> std::io::Result<_> {
        Ok(DetachedPipes {
            pid,
            started_at: SystemTime::now(),
            stdin: spawned.stdin.into_owned_fd()?,
            stdout: spawned.stdout.into_owned_fd()?,
            stderr: spawned.stderr.into_owned_fd()?,
            stdout_pending: Vec::new(),
            stderr_pending: Vec::new(),
        })
    })();
    match pipes {
        Ok(pipes) => wire_up(
            pipes,
            Waiter::Spawned(spawned.child),
            wiring,
            Instant::now(),
        ),
        Err(e) => {
            abandon(pid, Waiter::Spawned(spawned.child), wiring);
            Err(format!("could not set up the child's pipes: {e}"))
        }
    }
}

/// A child that could not be wired up: killed, and its end dealt with as any child's (see
/// [`ended`]), so the reaper does not keep it for ever as a live child, scanning for it, nor
/// leave what it started.
fn abandon(pid: u32, waiter: Waiter, wiring: Wiring) {
    child::signal_group(pid, libc::SIGKILL);
    tokio::spawn(async move {
        let upstream = wiring.upstream.clone();
        let status = ended(pid, waiter, wiring.upstream, wiring.reaper).await;
        tracing::info!(%upstream, pid, "the child that could not be wired up ended ({status})");
    });
}

/// Wait for the child's exit, then sweep its group (a grandchild, python under uvx, must not
/// outlive its parent) and have the reaper stop what left the group (setsid). Its status, for
/// the log.
async fn ended(
    pid: u32,
    waiter: Waiter,
    upstream: String,
    reaper: std::sync::Arc<crate::daemon::reaper::Reaper>,
) -> String {
    let status = match waiter {
        Waiter::Spawned(mut proc) => match proc.wait().await {
            Ok(s) => s.to_string(),
            Err(e) => format!("wait failed: {e}"),
        },
        Waiter::Adopted(pid) => adopted_exit(pid).await,
    };
    child::signal_group(pid, libc::SIGKILL);
    let _ = tokio::task::spawn_blocking(move || reaper.child_exited(&upstream, pid)).await;
    status
}

/// Wire a child this process already had (an upgrade in place) to the actor, reading on from
/// where the previous daemon stopped.
pub(super) fn adopt(pipes: DetachedPipes, wiring: Wiring) -> Result<ChildHandle, String> {
    let pid = pipes.pid;
    let started = Instant::now()
        .checked_sub(pipes.started_at.elapsed().unwrap_or_default())
        .unwrap_or_else(Instant::now);
    wire_up(pipes, Waiter::Adopted(pid), wiring, started)
}

fn wire_up(
    pipes: DetachedPipes,
    waiter: Waiter,
    wiring: Wiring,
    started: Instant,
) -> Result<ChildHandle, String> {
    use tokio::net::unix::pipe;
    let DetachedPipes {
        pid,
        started_at,
        stdin,
        stdout,
        stderr,
        stdout_pending,
        stderr_pending,
    } = pipes;
    let opened = (|| -> std::io::Result<_> {
        Ok((
            pipe::Sender::from_owned_fd(stdin)?,
            pipe::Receiver::from_owned_fd(stdout)?,
            pipe::Receiver::from_owned_fd(stderr)?,
        ))
    })();
    let (stdin, stdout, stderr) = match opened {
        Ok(p) => p,
        Err(e) => {
            abandon(pid, waiter, wiring);
            return Err(format!("could not set up the child's pipes: {e}"));
        }
    };
    let Wiring {
        generation,
        tx,
        max_line,
        upstream,
        tail,
        reaper,
        read_gate,
    } = wiring;
    // The child's stdin is written by the actor itself, without a hop (see `Outbox`).
    let (writer, stdin_task) = Outbox::new(stdin);
    let (stop, stopped) = watch::channel(false);
    let (out_done_tx, out_done) = watch::channel(false);
    let (err_done_tx, err_done) = watch::channel(false);
    let reader = tokio::spawn(read_stdout(
        Pending::new(stdout_pending, stdout),
        generation,
        tx.clone(),
        max_line,
        stopped.clone(),
        out_done_tx,
        read_gate,
    ));
    let stderr_task = tokio::spawn(drain_stderr(
        Pending::new(stderr_pending, stderr),
        upstream.clone(),
        tail,
        stopped,
        err_done_tx,
    ));

    let (exited_tx, exited_rx) = watch::channel(false);
    let name = upstream;
    let waiter = tokio::spawn(async move {
        let status = ended(pid, waiter, name, reaper).await;
        let _ = exited_tx.send(true);
        // Deliver every line the child wrote before its exit is reported, and log its last
        // stderr lines (the error that reports the exit quotes the last one).
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            let mut out_done = out_done;
            let mut err_done = err_done;
            let _ = out_done.wait_for(|d| *d).await;
            let _ = err_done.wait_for(|d| *d).await;
        })
        .await;
        let event = ChildEvent::Exited(status);
        let _ = tx.send(Event::Child { generation, event }).await;
    });

    Ok(ChildHandle {
        pid,
        started,
        started_at,
        writer,
        exited: exited_rx,
        tasks: PipeTasks {
            stop,
            stdout: reader,
            stderr: stderr_task,
            stdin: stdin_task,
            waiter,
        },
    })
}

/// An adopted child's exit: it is this process's child (spawned before the exec), but not the
/// runtime's, so the OS layer watches it (a pidfd, a kqueue) and collects its status: it leaves
/// no zombie. Said as the standard library says a spawned child's.
async fn adopted_exit(pid: u32) -> String {
    let info = match os::ProcessWatch::new(pid) {
        Ok(mut watch) => watch.exited().await.ok(),
        // Gone already, and collected by someone else.
        Err(_) => None,
    };
    match info {
        Some(os::ExitInfo::Code(code)) => format!("exit status: {code}"),
        Some(os::ExitInfo::Signal(sig)) => format!("signal: {sig}"),
        Some(os::ExitInfo::NotOurChild) | None => "exited (status unknown)".to_string(),
    }
}

/// A pipe, with what an earlier reader had read from it first.
type Pending = tokio::io::Chain<std::io::Cursor<Vec<u8>>, tokio::net::unix::pipe::Receiver>;

trait PendingNew {
    fn new(first: Vec<u8>, pipe: tokio::net::unix::pipe::Receiver) -> Self;
}

impl PendingNew for Pending {
    fn new(first: Vec<u8>, pipe: tokio::net::unix::pipe::Receiver) -> Self {
        use tokio::io::AsyncReadExt;
        std::io::Cursor::new(first).chain(pipe)
    }
}

/// What a reader over [`Pending`] gives back when told to let go: the pipe, and every byte
/// read from it and not handed on (what `partial` holds, then the reader's buffer, then what
/// was left of the earlier pending bytes).
fn let_go(partial: Vec<u8>, r: BufReader<Pending>) -> ReaderEnd {
    let mut pending = partial;
    pending.extend_from_slice(r.buffer());
    let (cursor, pipe) = r.into_inner().into_inner();
    let at = cursor.position() as usize;
    pending.extend_from_slice(&cursor.get_ref()[at.min(cursor.get_ref().len())..]);
    ReaderEnd {
        fd: pipe.into_nonblocking_fd().ok(),
        pending,
    }
}

async fn read_stdout(
    stdout: Pending,
    generation: u64,
    tx: mpsc::Sender<Event>,
    max_line: usize,
    mut stop: watch::Receiver<bool>,
    done: watch::Sender<bool>,
    gate: Option<watch::Receiver<bool>>,
) -> ReaderEnd {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::new();
    if let Some(mut gate) = gate {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return let_go(buf, r),
            // A dropped gate opens it.
            _ = gate.wait_for(|g| *g) => {}
        }
    }
    // Made once, not per line: a fresh wait registers with the watch and leaves it again on
    // every line (two locks of its waiter list), which the child's every answer paid.
    let stopped = stop.wait_for(|s| *s);
    tokio::pin!(stopped);
    loop {
        // Reading a line is cancel-safe: what was read stays in `buf` or in the buffer.
        let read = tokio::select! {
            biased;
            _ = &mut stopped => None,
            read = wire::read_line_capped(&mut r, &mut buf, max_line) => Some(read),
        };
        let Some(read) = read else {
            // Every line sent before this is in the actor's queue ahead of it.
            let event = ChildEvent::ReaderStopped;
            let _ = tx.send(Event::Child { generation, event }).await;
            return let_go(buf, r);
        };
        match read {
            Ok(Line::Complete) => {
                if wire::is_blank(&buf) {
                    buf.clear();
                    continue;
                }
                let event = ChildEvent::Line(std::mem::take(&mut buf));
                if tx.send(Event::Child { generation, event }).await.is_err() {
                    break;
                }
            }
            Ok(Line::TooLong) => {
                let event = ChildEvent::LineTooLong;
                let _ = tx.send(Event::Child { generation, event }).await;
                break;
            }
            Ok(Line::Eof) | Err(_) => {
                let event = ChildEvent::StdoutClosed;
                let _ = tx.send(Event::Child { generation, event }).await;
                break;
            }
        }
    }
    let _ = done.send(true);
    ReaderEnd::default()
}

/// The child's stderr into the daemon log, line by line, with credentials taken out (see
/// `redact`): a traceback or a debug line may hold the child's token or key.
///
/// A line is kept up to [`STDERR_LINE_MAX`] bytes; the rest of it, up to its newline, is read
/// and dropped, so a child that writes without newlines costs log text, never daemon memory.
async fn drain_stderr(
    stderr: Pending,
    upstream: String,
    tail: StderrTail,
    mut stop: watch::Receiver<bool>,
    done: watch::Sender<bool>,
) -> ReaderEnd {
    let mut r = BufReader::with_capacity(8 * 1024, stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut dropped: u64 = 0;
    let mut lines = crate::redact::LineRedactor::default();
    let log = |texts: Vec<String>| {
        for text in texts {
            tracing::info!(target: "coogle::child", upstream = %upstream, "{text}");
            tail.push(text);
        }
    };
    loop {
        let hold = if lines.holding() {
            // Held lines wait for their continuation only while the child keeps writing.
            STDERR_HOLD
        } else {
            Duration::MAX
        };
        let read = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => {
                // Letting go: what was logged is logged; an unfinished line is the next
                // reader's to finish.
                log(lines.flush(&crate::redact::known()));
                return let_go(std::mem::take(&mut line), r);
            }
            read = tokio::time::timeout(hold, r.fill_buf()) => match read {
                Ok(read) => read,
                Err(_) => {
                    log(lines.flush(&crate::redact::known()));
                    continue;
                }
            },
        };
        let chunk = match read {
            Ok(chunk) if !chunk.is_empty() => chunk,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(upstream = %upstream, "reading the child's stderr failed: {e}");
                break;
            }
        };
        let newline = chunk.iter().position(|&b| b == b'\n');
        let used = newline.map_or(chunk.len(), |i| i + 1);
        let piece = &chunk[..newline.unwrap_or(chunk.len())];
        let room = STDERR_LINE_MAX.saturating_sub(line.len());
        line.extend_from_slice(&piece[..piece.len().min(room)]);
        dropped += piece.len().saturating_sub(room) as u64;
        r.consume(used);
        if newline.is_some() {
            let texts = finish_line(&mut line, &mut dropped, &mut lines);
            log(texts);
        }
    }
    if !line.is_empty() || dropped > 0 {
        let texts = finish_line(&mut line, &mut dropped, &mut lines);
        log(texts);
    }
    log(lines.flush(&crate::redact::known()));
    let _ = done.send(true);
    ReaderEnd::default()
}

/// One stderr line read whole (or its kept start): the lines now ready to log.
fn finish_line(
    line: &mut Vec<u8>,
    dropped: &mut u64,
    lines: &mut crate::redact::LineRedactor,
) -> Vec<String> {
    let text = String::from_utf8_lossy(line).trim_end().to_string();
    let cut = *dropped > 0;
    let mut out = lines.push(text, cut, &crate::redact::known());
    if cut && let Some(last) = out.last_mut() {
        last.push_str(&format!("… ({dropped} more bytes of this line dropped)"));
    }
    line.clear();
    *dropped = 0;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::reaper::Reaper;

    /// A carried child whose pipes cannot be taken over (here: not pipes at all) is killed,
    /// collected, and no longer counted as a live child: the reaper would otherwise scan the
    /// process table for it for ever, and keep it a zombie.
    #[tokio::test]
    async fn a_child_that_cannot_be_wired_up_is_stopped_collected_and_let_go() {
        use std::os::unix::process::CommandExt;
        // Collected by the code under test (as a carried child is), not by `wait`.
        #[allow(clippy::zombie_processes)]
        let pid = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
            .id();
        // The reaper sees this child alone: what other tests of this process started is none
        // of its business (its exit stops every child of the process it cannot account for).
        let reaper = Arc::new(Reaper::seeing(move || {
            os::processes()
                .into_iter()
                .filter(|p| p.pid == pid)
                .collect()
        }));
        reaper.spawning().started("up", pid);
        let null = || OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let pipes = DetachedPipes {
            pid,
            started_at: SystemTime::now(),
            stdin: null(),
            stdout: null(),
            stderr: null(),
            stdout_pending: Vec::new(),
            stderr_pending: Vec::new(),
        };
        let wiring = Wiring {
            generation: 1,
            tx: mpsc::channel(1).0,
            max_line: 1024,
            upstream: "up".to_string(),
            tail: StderrTail::default(),
            reaper: reaper.clone(),
            read_gate: None,
        };
        let err = adopt(pipes, wiring).err().expect("/dev/null is no pipe");
        assert!(err.contains("could not set up the child's pipes"), "{err}");
        let deadline = Instant::now() + Duration::from_secs(10);
        // Gone, zombie included (signal 0 finds a zombie), and no longer one of the reaper's.
        while reaper.is_leader(pid) || os::signal(pid, 0).is_ok() {
            assert!(
                Instant::now() < deadline,
                "pid {pid} still held or not collected"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
