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
