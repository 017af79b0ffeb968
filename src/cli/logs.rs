//! `coogle logs [-f]`: the daemon's log, its last lines and then (with `-f`) what it appends,
//! across rotation. It only reads the log; it never talks to the daemon.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::output::{self, ExitCode};

/// Print the last `n` lines of the log; with `follow`, keep printing as it grows (and across
/// rotation).
pub(super) async fn logs(path: &Path, n: usize, follow: bool) -> ExitCode {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            output::error_text(
                &format!("could not open the log {}: {e}", path.display()),
                Some("the daemon writes it once it has run (`coogle serve`)"),
            );
            return ExitCode::Usage;
        }
    };
    let mut reader = BufReader::new(file);
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        if tail.len() == n {
            tail.pop_front();
        }
        tail.push_back(std::mem::take(&mut line));
    }
    print_lines(&tail.into_iter().collect::<String>());
    if !follow {
        return ExitCode::Success;
    }
    let inode = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    let mut current = inode(path);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = inode(path);
        if now.is_some() && now != current {
            // Rotated: print what is left of the old file, then start on the new one.
            print_lines(&read_rest(&mut reader));
            match File::open(path) {
                Ok(f) => {
                    reader = BufReader::new(f);
                    current = now;
                }
                Err(_) => continue,
            }
        }
        print_lines(&read_rest(&mut reader));
    }
}

/// Whatever whole or partial lines the file holds past where `reader` is.
fn read_rest(reader: &mut BufReader<File>) -> String {
    let mut rest = String::new();
    while reader.read_line(&mut rest).unwrap_or(0) > 0 {}
    rest
}

fn print_lines(text: &str) {
    if !text.is_empty() {
        output::out(text.trim_end_matches('\n'));
    }
}
