//! The pipes of a running child, turned into actor events.
//!
//! Three tasks per child: its stdout read line by line (capped) into [`ChildEvent::Line`], its
//! stderr drained into the daemon log (and a short tail kept for error messages), and a waiter
//! that reports [`ChildEvent::Exited`] only after every line the child wrote has been
//! delivered. Each event carries the child's generation, so nothing from a replaced child is
//! ever taken for the current one's. The child's stdin is written by the actor itself, without
//! a task hop.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::{ChildEvent, Event};
use crate::daemon::child::{self, Spawned};
use crate::daemon::outbox::Outbox;
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
    pub writer: Outbox<tokio::net::unix::pipe::Sender>,
    /// Becomes true once the child has exited and its group was swept.
    pub exited: watch::Receiver<bool>,
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
}

/// Wire a freshly spawned child to the actor. Errors only when its stdin cannot be made
/// non-blocking (the child is then killed).
pub(super) fn attach(spawned: Spawned, wiring: Wiring) -> Result<ChildHandle, String> {
    let Wiring {
        generation,
        tx,
        max_line,
        upstream,
        tail,
        reaper,
    } = wiring;
    let pid = spawned.pid;
    // The child's stdin as a non-blocking pipe, so the actor can write without a hop.
    let stdin = spawned
        .stdin
        .into_owned_fd()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    let writer = match stdin {
        Ok(pipe) => Outbox::new(pipe).0,
        Err(e) => {
            child::signal_group(pid, libc::SIGKILL);
            return Err(format!("could not set up the child's stdin: {e}"));
        }
    };
    let reader = tokio::spawn(read_stdout(
        spawned.stdout,
        generation,
        tx.clone(),
        max_line,
    ));
    let stderr = tokio::spawn(drain_stderr(spawned.stderr, upstream.clone(), tail));

    let (exited_tx, exited_rx) = watch::channel(false);
    let mut proc = spawned.child;
    let name = upstream;
    tokio::spawn(async move {
        let status = match proc.wait().await {
            Ok(s) => s.to_string(),
            Err(e) => format!("wait failed: {e}"),
        };
        // Sweep the group: a grandchild (python under uvx) must not outlive its parent; and
        // what left the group (setsid) goes too.
        child::signal_group(pid, libc::SIGKILL);
        let _ = tokio::task::spawn_blocking(move || reaper.child_exited(&name, pid)).await;
        let _ = exited_tx.send(true);
        // Deliver every line the child wrote before its exit is reported, and log its last
        // stderr lines (the error that reports the exit quotes the last one).
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            let _ = reader.await;
            let _ = stderr.await;
        })
        .await;
        let event = ChildEvent::Exited(status);
        let _ = tx.send(Event::Child { generation, event }).await;
    });

    Ok(ChildHandle {
        pid,
        started: Instant::now(),
        writer,
        exited: exited_rx,
    })
}

async fn read_stdout(
    stdout: tokio::process::ChildStdout,
    generation: u64,
    tx: mpsc::Sender<Event>,
    max_line: usize,
) {
    let mut r = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::new();
    loop {
        match wire::read_line_capped(&mut r, &mut buf, max_line).await {
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
}

/// The child's stderr into the daemon log, line by line, with credentials taken out (see
/// `redact`): a traceback or a debug line may hold the child's token or key.
///
/// A line is kept up to [`STDERR_LINE_MAX`] bytes; the rest of it, up to its newline, is read
/// and dropped, so a child that writes without newlines costs log text, never daemon memory.
async fn drain_stderr(stderr: tokio::process::ChildStderr, upstream: String, tail: StderrTail) {
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
        let read = if lines.holding() {
            // Held lines wait for their continuation only while the child keeps writing.
            match tokio::time::timeout(STDERR_HOLD, r.fill_buf()).await {
                Ok(read) => read,
                Err(_) => {
                    log(lines.flush(&crate::redact::known()));
                    continue;
                }
            }
        } else {
            r.fill_buf().await
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
