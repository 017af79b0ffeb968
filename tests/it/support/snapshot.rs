//! Snapshots of what a person sees: a screen (commands, their exit codes, stdout and stderr)
//! is compared with `tests/snapshots/<name>.txt`, after the test's temporary paths, the
//! binary's path, pids, ports and OS error numbers are replaced by placeholders. A mismatch
//! fails with a line diff; `COOGLE_UPDATE_SNAPSHOTS=1` writes the new screen instead, for a
//! reviewer to read in the diff.

use std::path::{Path, PathBuf};

use super::{COOGLE, Env, Output};

/// What a person saw, command by command.
#[derive(Default)]
pub struct Screen {
    text: String,
}

impl Screen {
    pub fn new() -> Screen {
        Screen::default()
    }

    /// A command as typed (`shown`) and what it printed.
    pub fn command(&mut self, shown: &str, out: &Output) -> &mut Screen {
        self.text
            .push_str(&format!("$ {shown}\nexit {:?}\n", out.status));
        for (name, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            if !text.is_empty() {
                self.text.push_str(&format!("--- {name}\n{}", text));
                if !text.ends_with('\n') {
                    self.text.push('\n');
                }
            }
        }
        self.text.push('\n');
        self
    }

    /// Anything else shown: an MCP client's view of an answer, say.
    pub fn section(&mut self, title: &str, body: &str) -> &mut Screen {
        self.text
            .push_str(&format!("--- {title}\n{}\n\n", body.trim_end()));
        self
    }

    /// Compare with `tests/snapshots/<name>.txt` (see the module doc).
    pub fn assert_matches(&self, name: &str, env: &Env) {
        let got = normalize(&self.text, env);
        let path = snapshot_path(name);
        if std::env::var_os("COOGLE_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
            return;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "no snapshot at {} ({e}); run with COOGLE_UPDATE_SNAPSHOTS=1 to write it. The screen:\n{got}",
                path.display()
            )
        });
        if want != got {
            panic!(
                "{} differs from the screen (- snapshot, + now); COOGLE_UPDATE_SNAPSHOTS=1 rewrites it:\n{}",
                path.display(),
                diff(&want, &got)
            );
        }
    }
}

fn snapshot_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"))
}

/// The screen without what differs from run to run and machine to machine.
fn normalize(text: &str, env: &Env) -> String {
    let mut t = text.to_owned();
    let fake = super::fake_mcp();
    for (from, to) in [
        (env.tmp.path().display().to_string(), "[TMP]"),
        (fake.display().to_string(), "[FAKE_MCP]"),
        (COOGLE.to_owned(), "[COOGLE]"),
        (
            format!("coogle {}", env!("CARGO_PKG_VERSION")),
            "coogle [VERSION]",
        ),
    ] {
        t = t.replace(&from, to);
    }
    t = replace_number_after(&t, "pid ", "[PID]");
    t = replace_number_after(&t, "(os error ", "[N]");
    t = replace_number_after(&t, "127.0.0.1:", "[PORT]");
    t
}

/// Every run of digits right after `prefix`, replaced by `with`.
fn replace_number_after(text: &str, prefix: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let (before, after) = rest.split_at(at + prefix.len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str(with);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// A line diff: the longest common subsequence, then `-`/`+`/` ` lines.
fn diff(want: &str, got: &str) -> String {
    let a: Vec<&str> = want.lines().collect();
    let b: Vec<&str> = got.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}
