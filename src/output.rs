//! The one place coogle prints for a person: CLI results on stdout, errors on stderr.
//!
//! The crate denies `print_stdout`/`print_stderr` everywhere else, so `coogle mcp` (whose
//! stdout is the MCP channel) cannot print by accident. A closed stdout (`coogle status | head`)
//! is a clean exit, not a panic.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{self, Write};

/// Exit codes, documented in the README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// It worked.
    Success = 0,
    /// The operation failed (for `coogle call`: the tool returned `isError`).
    Failure = 1,
    /// Usage or environment error: bad arguments, config, daemon unreachable.
    Usage = 2,
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(c: ExitCode) -> Self {
        std::process::ExitCode::from(c as u8)
    }
}

/// Write text to stdout; a broken pipe ends the process quietly.
pub fn out(text: &str) {
    let mut stdout = io::stdout().lock();
    let r = stdout
        .write_all(text.as_bytes())
        .and_then(|_| {
            if text.ends_with('\n') {
                Ok(())
            } else {
                stdout.write_all(b"\n")
            }
        })
        .and_then(|_| stdout.flush());
    if let Err(e) = r
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

/// Write bytes to stdout as they are (completions, a man page); a broken pipe ends quietly.
pub fn out_raw(bytes: &[u8]) {
    let mut stdout = io::stdout().lock();
    if let Err(e) = stdout.write_all(bytes).and_then(|_| stdout.flush())
        && e.kind() == io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

/// A warning on stderr: `warning: …`.
pub fn warn(message: &str) {
    eprintln!("warning: {message}");
}

pub fn json<T: serde::Serialize + ?Sized>(value: &T) {
    out(&serde_json::to_string_pretty(value).unwrap_or_default());
}

/// An error in uv's shape: `error: …`, `  Caused by: …` (each cause once), `hint: …`.
pub fn error(err: &(dyn std::error::Error + 'static), hint: Option<&str>) {
    let chain = crate::causes::chain(err);
    let mut text = format!("error: {}\n", chain[0]);
    for cause in &chain[1..] {
        text.push_str(&format!("  Caused by: {cause}\n"));
    }
    if let Some(h) = hint {
        text.push_str(&format!("hint: {h}\n"));
    }
    eprint!("{text}");
}

pub fn error_text(message: &str, hint: Option<&str>) {
    match hint {
        Some(h) => eprintln!("error: {message}\nhint: {h}"),
        None => eprintln!("error: {message}"),
    }
}

pub fn note(message: &str) {
    eprintln!("{message}");
}
