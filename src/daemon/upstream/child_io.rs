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
/// The longest stderr line logged whole.
const STDERR_LINE_MAX: usize = 4096;

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
    /// Values to take out of the child's stderr before it is logged.
    pub secrets: Vec<String>,
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
        secrets,
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
    tokio::spawn(drain_stderr(
        spawned.stderr,
        upstream.clone(),
        tail,
        secrets,
    ));

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
        // Deliver every line the child wrote before its exit is reported.
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
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
async fn drain_stderr(
    stderr: tokio::process::ChildStderr,
    upstream: String,
    tail: StderrTail,
    secrets: Vec<String>,
) {
    let mut r = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let mut text =
                    crate::redact::redact(String::from_utf8_lossy(&buf).trim_end(), &secrets);
                if text.len() > STDERR_LINE_MAX {
                    let mut cut = STDERR_LINE_MAX;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                    text.push('…');
                }
                tracing::info!(target: "coogle::child", upstream = %upstream, "{text}");
                tail.push(text);
            }
        }
    }
}
