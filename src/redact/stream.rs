//! A child's stderr, line by line, with known values taken out also when they are split: across
//! lines (a value wrapped, or printed in pieces), or around a carriage return (a progress line
//! redrawn over itself).
//!
//! Lines are searched as one text, joined without their breaks and `\r`s. A line whose end could
//! be the start of a value is held back until the next line shows whether it is; the caller
//! flushes what is held when the child goes quiet, so a held line is late by that long at most,
//! never lost. Anything held is bounded.

use super::{REDACTED, Redactor};

/// Lines held back at the most, waiting for the rest of a value.
const MAX_HELD: usize = 16;

/// The shortest unfinished start of a value that is redacted when nothing finishes it: a
/// line that merely ends in a letter a value begins with is left alone.
const UNFINISHED_MIN: usize = 4;

#[derive(Default)]
pub(crate) struct LineRedactor {
    held: Vec<String>,
}

impl LineRedactor {
    /// Lines are held, waiting for their continuation: flush them if none comes soon.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// A line arrives (without its newline); `cut` when its end was dropped (too long), so
    /// nothing continues it. Returns the lines now safe to write, redacted.
    pub fn push(&mut self, line: String, cut: bool, r: &Redactor) -> Vec<String> {
        self.held.push(line);
        let joined = Joined::of(&self.held);
        if !cut && self.held.len() < MAX_HELD && r.values.partial_start(&joined.flat).is_some() {
            return Vec::new();
        }
        self.release(joined, cut, r)
    }

    /// Nothing more is coming for now (the child went quiet, or closed stderr): everything
    /// held, with a value's unfinished start redacted too.
    pub fn flush(&mut self, r: &Redactor) -> Vec<String> {
        if self.held.is_empty() {
            return Vec::new();
        }
        let joined = Joined::of(&self.held);
        self.release(joined, true, r)
    }

    fn release(&mut self, joined: Joined, unfinished_too: bool, r: &Redactor) -> Vec<String> {
        let mut spans = r.values.spans(&joined.flat);
        if unfinished_too
            && let Some(start) = r.values.partial_start(&joined.flat)
            && joined.flat.len() - start >= UNFINISHED_MIN
        {
            spans.push((start, joined.flat.len()));
        }
        let lines = std::mem::take(&mut self.held);
        let mut marks: Vec<Vec<bool>> = lines.iter().map(|l| vec![false; l.len()]).collect();
        for (start, end) in spans {
            for &(line, at) in &joined.origin[start..end] {
                marks[line][at] = true;
            }
        }
        lines
            .iter()
            .zip(marks)
            .map(|(line, marks)| r.child_line(&replace_marked(line, &marks)))
            .collect()
    }
}

/// Held lines as one text without breaks or `\r`, and where each of its bytes came from.
struct Joined {
    flat: String,
    /// (line, byte in line) of each byte of `flat`.
    origin: Vec<(usize, usize)>,
}

impl Joined {
    fn of(lines: &[String]) -> Joined {
        let mut flat = String::new();
        let mut origin = Vec::new();
        for (n, line) in lines.iter().enumerate() {
            for (at, b) in line.bytes().enumerate() {
                if b != b'\r' {
                    origin.push((n, at));
                }
            }
            flat.push_str(&line.replace('\r', ""));
        }
        Joined { flat, origin }
    }
}

/// `line` with each run of marked bytes replaced by [`REDACTED`] (a run never crosses a `\r`,
/// which stays where it was).
fn replace_marked(line: &str, marks: &[bool]) -> String {
    if !marks.iter().any(|m| *m) {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    let mut in_run = false;
    for (at, ch) in line.char_indices() {
        if marks[at] && ch != '\r' {
            if !in_run {
                out.push_str(REDACTED);
                in_run = true;
            }
        } else {
            in_run = false;
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(r: &Redactor, lines: &[&str]) -> Vec<String> {
        let mut s = LineRedactor::default();
        let mut out = Vec::new();
        for l in lines {
            out.extend(s.push(l.to_string(), false, r));
        }
        out.extend(s.flush(r));
        out
    }

    #[test]
    fn a_value_split_across_lines_or_around_cr_is_taken_out_of_every_piece() {
        let r = Redactor::new(["hunter2-db-pass".to_string()]);
        assert_eq!(
            run(&r, &["pass is hunter2-d", "b-pass, go"]),
            ["pass is [redacted]", "[redacted], go"]
        );
        assert_eq!(
            run(&r, &["hunt", "er2-db", "-pass"]),
            ["[redacted]", "[redacted]", "[redacted]"]
        );
        assert_eq!(
            run(&r, &["progress hunter2-\rdb-pass ok"]),
            ["progress [redacted]\r[redacted] ok"]
        );
        // URL-encoded and split.
        assert_eq!(
            run(&r, &["u=hunter2%2", "Ddb-pass&x=1"]),
            ["u=[redacted]", "[redacted]&x=1"]
        );
    }

    #[test]
    fn an_unfinished_value_is_redacted_when_nothing_follows() {
        let r = Redactor::new(["hunter2-db-pass".to_string()]);
        let mut s = LineRedactor::default();
        assert!(s.push("the start: hunter2-d".into(), false, &r).is_empty());
        assert!(s.holding());
        assert_eq!(s.flush(&r), ["the start: [redacted]"]);
        // A cut line is not held: its continuation was dropped.
        assert_eq!(
            s.push("cut at hunter2".into(), true, &r),
            ["cut at [redacted]"]
        );
        // Ordinary lines pass at once.
        assert_eq!(s.push("plain.".into(), false, &r), ["plain."]);
    }

    #[test]
    fn holding_is_bounded() {
        let r = Redactor::new(["abcdefghijklmnop".to_string()]);
        let mut s = LineRedactor::default();
        let mut out = Vec::new();
        for _ in 0..MAX_HELD {
            out.extend(s.push("a".into(), false, &r));
        }
        assert_eq!(out.len(), MAX_HELD, "released after {MAX_HELD} lines");
    }
}
