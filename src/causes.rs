//! An error and its chain of causes as text, each said once: what every place that shows an
//! error uses, whether it prints uv's `error:` / `Caused by:` lines ([`crate::output::error`]),
//! one line in a ✓/✗ list or a log, or an MCP error an agent reads.
//!
//! coogle's own errors state their own fact and leave the cause to the chain (STYLE.md 5), but
//! third-party errors do not all keep that rule (self_update's `TransportError: …` repeats the
//! reqwest error it wraps): a cause whose text the line above already holds is left out, so
//! nothing reaches a person twice whoever wrote the error. This module never prints.

use std::error::Error;

/// The error's message, then each cause's, none repeated: a cause the line before already
/// says is dropped; a cause line that only wraps the next one (`X: <next>`) gives way to it.
pub fn chain(err: &(dyn Error + 'static)) -> Vec<String> {
    let mut lines = vec![err.to_string()];
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        source = s.source();
        let last = lines.len() - 1;
        if text.trim().is_empty() || lines[last].contains(&text) {
            // Said already: by the message itself, or a cause that quoted it whole.
            if last > 0 && lines[last] != text {
                // A cause that wraps this one adds only a prefix: keep the plainer words.
                lines[last] = text;
            }
            continue;
        }
        lines.push(text);
    }
    lines
}

/// The whole chain on one line, `message: cause: cause`, for places that show a single line
/// (doctor's ✗ lines, a log line, an MCP error message).
pub fn one_line(err: &(dyn Error + 'static)) -> String {
    chain(err).join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule, kept by every error type in the crate: a `#[error]` message never shows the
    /// error that is also its source (a field named `source`, or a `#[from]`/`#[source]` field
    /// shown as `{0}`), or the renderer says the cause twice. Read from the source files, so a
    /// new variant is checked without anyone remembering to.
    #[test]
    fn no_error_shows_its_own_source() {
        fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, files);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        let mut files = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut offenders = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(attr) = line.trim_start().strip_prefix("#[error(") else {
                    continue;
                };
                // The attribute may span lines; the variant follows it.
                let end = (i + 1..lines.len())
                    .find(|&j| {
                        lines[j].trim_start().starts_with("#[error") || lines[j].trim() == "}"
                    })
                    .unwrap_or(lines.len());
                let whole = lines[i..end].join("\n");
                let message = whole.split(")]").next().unwrap_or(attr);
                let variant = &whole[message.len()..];
                let from_field = variant.contains("(#[from]") || variant.contains("(#[source]");
                if message.contains("{source}") || (from_field && message.contains("{0}")) {
                    offenders.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "errors that show their source in the message:\n{}",
            offenders.join("\n")
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct E {
        text: &'static str,
        #[source]
        source: Option<Box<E>>,
    }

    fn e(text: &'static str, source: Option<E>) -> E {
        E {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        // A plain chain is kept whole.
        let err = e(
            "could not list releases",
            Some(e("connection refused", None)),
        );
        assert_eq!(
            chain(&err),
            ["could not list releases", "connection refused"]
        );
        assert_eq!(
            one_line(&err),
            "could not list releases: connection refused"
        );

        // A message that already holds its cause: the cause is not said again.
        let err = e(
            "could not read x: permission denied",
            Some(e("permission denied", None)),
        );
        assert_eq!(chain(&err), ["could not read x: permission denied"]);

        // A cause that only wraps the next (self_update's `TransportError: <reqwest error>`)
        // gives way to it; an identical cause is dropped.
        let err = e(
            "could not list releases",
            Some(e(
                "TransportError: error sending request",
                Some(e(
                    "error sending request",
                    Some(e("tcp connect error", Some(e("tcp connect error", None)))),
                )),
            )),
        );
        assert_eq!(
            chain(&err),
            [
                "could not list releases",
                "error sending request",
                "tcp connect error"
            ]
        );
    }
}
