//! What a failing test shows of the daemons it ran: a process's captured stderr and a log
//! file's tail, each framed and bounded (the last [`TAIL_LINES`] lines, each line cut at
//! [`LINE_CHARS`]), printed by the fixtures' `Drop` while the test thread panics. Framed as
//! ripgrep's `tests/util.rs` frames a failed command, so the reader sees where the daemon's
//! words start and end. It never prints for a test that passes.
//!
//! Printed with `eprint!`, so libtest files it under the failing test's own output. A line shown
//! once is not shown again by a later fixture of the same test: `Daemon` (its `--log-stderr`
//! capture) and `Env` (the log file under its HOME, which holds the same lines and those of any
//! daemon a shim started) would otherwise print the same log twice.

use std::cell::RefCell;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How many lines of a log a failing test shows: enough for the story of a test, few enough
/// that the assertion above stays on the screen's scrollback.
pub const TAIL_LINES: usize = 200;

/// A longer line (a large message logged at debug) is cut here.
pub const LINE_CHARS: usize = 2000;

thread_local! {
    /// The lines this test thread has already shown. Each test runs on its own thread, so this
    /// never mixes two tests.
    static SHOWN: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// A child's output read as it comes (a pipe left unread fills, and the child then blocks in
/// its logging), kept whole so a test can assert on it and a failure can show its tail.
pub struct Capture {
    text: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Capture {
    pub fn spawn(pipe: impl Read + Send + 'static) -> Capture {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = text.clone();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(pipe);
            let mut line = Vec::new();
            // By line, so a character split across two reads is never garbled.
            while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                lock(&sink).push_str(&String::from_utf8_lossy(&line));
                line.clear();
            }
        });
        Capture {
            text,
            reader: Some(reader),
        }
    }

    /// Everything, once the writer closed the pipe (it exited). Blocks until then.
    pub fn finish(mut self) -> String {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        lock(&self.text).clone()
    }

    /// What came so far, after waiting up to `timeout` for the writer to close the pipe: a
    /// grandchild that inherited it must not hang a failing test's cleanup.
    pub fn settle(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        if let Some(r) = &self.reader {
            while !r.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        lock(&self.text).clone()
    }
}

fn lock(m: &Mutex<String>) -> std::sync::MutexGuard<'_, String> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Show the tail of `text` framed under `title`; says so when there is nothing to show.
pub fn show_tail(title: &str, text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        eprint!("\n===== {title}: nothing =====\n");
        return;
    }
    show_lines(title, &lines, "");
}

/// Show the tail of the log file at `path` under `title`, leaving out the lines an earlier
/// fixture of this test already showed. A missing file is said in one line.
pub fn show_log_file(title: &str, path: &Path) {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            eprint!(
                "\n===== {title}: no log file at {} ({e}) =====\n",
                path.display()
            );
            return;
        }
    };
    let all: Vec<&str> = text.lines().collect();
    let new: Vec<&str> = SHOWN.with(|s| {
        let shown = s.borrow();
        all.iter()
            .copied()
            .filter(|l| !shown.contains(*l))
            .collect()
    });
    if new.is_empty() {
        eprint!(
            "\n===== {title} ({}): its {} lines are all shown above =====\n",
            path.display(),
            all.len()
        );
        return;
    }
    let repeated = all.len() - new.len();
    let note = if repeated > 0 {
        format!(", leaving out {repeated} shown above")
    } else {
        String::new()
    };
    show_lines(&format!("{title} ({})", path.display()), &new, &note);
}

fn show_lines(title: &str, lines: &[&str], note: &str) {
    let from = lines.len().saturating_sub(TAIL_LINES);
    let tail = &lines[from..];
    let mut out = format!(
        "\n===== {title}: last {} of {} lines{note} =====\n",
        tail.len(),
        lines.len()
    );
    for line in tail {
        out.push_str(&cut(line));
        out.push('\n');
    }
    out.push_str(&format!("===== end of {title} =====\n"));
    eprint!("{out}");
    SHOWN.with(|s| s.borrow_mut().extend(tail.iter().map(|l| l.to_string())));
}

/// `text` cut at `LINE_CHARS` characters, saying how much was left out.
pub fn cut(text: &str) -> String {
    match text.char_indices().nth(LINE_CHARS) {
        None => text.to_string(),
        Some((at, _)) => format!("{} … [{} more bytes]", &text[..at], text.len() - at),
    }
}
