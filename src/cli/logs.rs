//! `coogle logs [-f]`: the daemon's log, its last lines and then (with `-f`) what it appends,
//! across rotation. It only reads the log; it never talks to the daemon.

use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use crate::output::{self, ExitCode};

/// Print the last `n` lines of the log; with `follow`, keep printing as it grows (and across
/// rotation).
pub(super) async fn logs(path: &Path, n: usize, follow: bool) -> ExitCode {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            output::error_text(
                &format!("could not open the log {}: {e}", path.display()),
                Some("the daemon writes it once it has run (`coogle serve`)"),
            );
            return ExitCode::Usage;
        }
    };
    let mut reader = std::io::BufReader::new(file);
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        if tail.len() == n {
            tail.pop_front();
        }
        tail.push_back(std::mem::take(&mut line));
    }
    let text: String = tail.into_iter().collect();
    if !text.is_empty() {
        output::out(text.trim_end_matches('\n'));
    }
    if !follow {
        return ExitCode::Success;
    }
    use std::os::unix::fs::MetadataExt;
    let inode = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    let mut current = inode(path);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = inode(path);
        if now.is_some() && now != current {
            // Rotated: read what is left of the old file, then start on the new one.
            let mut rest = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                rest.push_str(&line);
                line.clear();
            }
            if !rest.is_empty() {
                output::out(rest.trim_end_matches('\n'));
            }
            match std::fs::File::open(path) {
                Ok(f) => {
                    reader = std::io::BufReader::new(f);
                    current = now;
                }
                Err(_) => continue,
            }
        }
        let mut chunk = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            chunk.push_str(&line);
            line.clear();
        }
        if !chunk.is_empty() {
            output::out(chunk.trim_end_matches('\n'));
        }
    }
}
