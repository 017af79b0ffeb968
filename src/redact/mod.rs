//! Secrets kept out of what the daemon writes and answers: its log, `status`, and the errors it
//! gives sessions and control clients.
//!
//! Two kinds of knowledge. The values the daemon was given (every configured `env` value of
//! every upstream, whatever its name, and the credentials it resolved) are known for sure and
//! are found in any common encoding (see `values`), also when a child splits one across
//! lines or around a `\r` (see `stream`). A child's stderr is further searched for tokens of
//! well-known shapes (Google OAuth access and refresh tokens, OAuth client secrets, API keys,
//! bearer tokens) and for the values of fields named like secrets. It errs on the side of
//! redacting: a log line with a hole in it costs little; a leaked token costs a lot.
//!
//! The values are held once for the whole process ([`add_known`]), since the log writer, the
//! status and every upstream's errors need the same set.

mod stream;
mod values;

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

pub(crate) use stream::LineRedactor;
use values::{Span, Values};

/// What a secret becomes in a log line.
const REDACTED: &str = "[redacted]";
/// Tokens and field values shorter than this are not taken for secrets (too many false hits,
/// too little to leak).
const MIN_SECRET: usize = 8;

/// Prefixes of well-known credential shapes: Google access tokens, refresh tokens, OAuth client
/// secrets, Google API keys, GitHub tokens, OpenAI/Anthropic style keys.
const TOKEN_PREFIXES: [&str; 8] = [
    "ya29.", "1//0", "GOCSPX-", "AIza", "ghp_", "gho_", "sk-", "xox",
];

/// Field names whose values are secrets (matched case-insensitively, anywhere in the name).
const SECRET_NAMES: [&str; 8] = [
    "secret",
    "token",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "api-key",
    "authorization",
];

/// Whether an environment variable's name says its value is a secret.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAMES.iter().any(|n| lower.contains(n))
        || lower.ends_with("_key")
        || lower.contains("credential")
}

/// `line` with what looks like a credential taken out, `known` values first (for text that
/// is not a child's stderr line: an API's error, say).
pub(crate) fn redact(line: &str, known: &[String]) -> String {
    Redactor::new(known.iter().cloned()).child_line(line)
}

/// The known values, ready to search for.
#[derive(Default)]
pub(crate) struct Redactor {
    values: Values,
}

impl Redactor {
    pub fn new<I: IntoIterator<Item = String>>(values: I) -> Redactor {
        Redactor {
            values: Values::new(values),
        }
    }

    /// `text` without the known values (the daemon's own text: a log line, an error, a status
    /// field).
    pub fn values_in<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let spans = self.values.spans(text);
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(cut(text, spans))
    }

    /// A line a child wrote: the known values, then well-known token shapes and secret-named
    /// fields.
    pub fn child_line(&self, line: &str) -> String {
        let out = self.values_in(line);
        redact_named_fields(&redact_shapes(&out))
    }
}

/// `text` with every span replaced by [`REDACTED`] (overlapping spans merged).
fn cut(text: &str, mut spans: Vec<Span>) -> String {
    spans.sort();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        if end <= at {
            continue;
        }
        if start >= at {
            out.push_str(&text[at..start]);
            out.push_str(REDACTED);
        }
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

static KNOWN: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// More values this process must never write out (added to those known before: what a
/// running child was given stays secret after a reload).
pub(crate) fn add_known<I: IntoIterator<Item = String>>(values: I) {
    let mut known = KNOWN.write().unwrap_or_else(|p| p.into_inner());
    let before = known.as_ref().map(|r| r.values.plain().to_vec());
    let all = before.into_iter().flatten().chain(values);
    *known = Some(Arc::new(Redactor::new(all)));
}

/// The process's known values (none before [`add_known`]).
pub(crate) fn known() -> Arc<Redactor> {
    KNOWN
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .unwrap_or_default()
}

/// `text` without the process's known values.
pub(crate) fn scrub(text: &str) -> String {
    known().values_in(text).into_owned()
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '+' | '=' | '~')
}

/// Tokens of a well-known shape, whole (prefix and all).
fn redact_shapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while !rest.is_empty() {
        let next = TOKEN_PREFIXES
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, *p)))
            .filter(|(i, _)| {
                // A prefix inside a longer word (`task-…` holds `sk-`) is not a token's start.
                let before = rest[..*i].chars().next_back().unwrap_or(' ');
                !(before.is_ascii_alphanumeric() || matches!(before, '_' | '-' | '.' | '/'))
            })
            .min_by_key(|(i, _)| *i);
        let Some((at, prefix)) = next else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..at]);
        let token_len = rest[at..]
            .char_indices()
            .find(|(_, c)| !is_token_char(*c))
            .map_or(rest.len() - at, |(i, _)| i);
        if token_len >= prefix.len() + MIN_SECRET {
            out.push_str(REDACTED);
        } else {
            out.push_str(&rest[at..at + token_len]);
        }
        rest = &rest[at + token_len..];
    }
    out
}

/// `name: value`, `name=value`, `"name": "value"` and `Bearer value` where the name says secret.
fn redact_named_fields(line: &str) -> String {
    let lower = line.to_ascii_lowercase();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut names: Vec<&str> = SECRET_NAMES.to_vec();
    names.push("bearer");
    for name in names {
        let mut from = 0;
        while let Some(i) = lower[from..].find(name) {
            let mut j = from + i + name.len();
            // The rest of the name (`client_secret`, `access_token"`), then `:`/`=`/space.
            while j < line.len()
                && (lower.as_bytes()[j].is_ascii_alphanumeric() || lower.as_bytes()[j] == b'_')
            {
                j += 1;
            }
            let mut k = j;
            while k < line.len() && matches!(line.as_bytes()[k], b'"' | b'\'' | b' ' | b':' | b'=')
            {
                k += 1;
            }
            let separated = k > j && line[j..k].bytes().any(|b| matches!(b, b':' | b'=' | b' '));
            let end = line[k..]
                .char_indices()
                .find(|(_, c)| !is_token_char(*c))
                .map_or(line.len(), |(n, _)| k + n);
            if separated && end - k >= MIN_SECRET {
                cuts.push((k, end));
            }
            from = (from + i + name.len()).max(end.min(line.len()));
        }
    }
    if cuts.is_empty() {
        return line.to_string();
    }
    cuts.sort();
    let mut out = String::with_capacity(line.len());
    let mut at = 0;
    for (start, end) in cuts {
        if start < at {
            continue;
        }
        out.push_str(&line[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(&line[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_taken_out_and_the_rest_kept() {
        let known = Redactor::new(["sk-live-abcdef123456".to_string(), "short".to_string()]);
        let cases = [
            (
                "using key sk-live-abcdef123456 now",
                "using key [redacted] now",
            ),
            (
                "Authorization: Bearer ya29.a0AfB_byC-1234567890abc",
                "Authorization: Bearer [redacted]",
            ),
            (
                r#"{"access_token": "ya29.a0ARrdaM-xyz0123456789", "expires_in": 3599}"#,
                r#"{"access_token": "[redacted]", "expires_in": 3599}"#,
            ),
            ("refresh=1//0gLongRefreshToken-abc123", "refresh=[redacted]"),
            (
                "client_secret=GOCSPX-AbCdEfGhIjKlMnOp",
                "client_secret=[redacted]",
            ),
            ("key AIzaSyA1234567890abcdefghij", "key [redacted]"),
            ("password=hunter2hunter2", "password=[redacted]"),
            ("token count 42", "token count 42"),
            ("a short value", "a short value"),
            (
                "no secrets here: 2026-11-22 INFO listening",
                "no secrets here: 2026-11-22 INFO listening",
            ),
            ("task-1234567890 done", "task-1234567890 done"),
        ];
        for (line, want) in cases {
            assert_eq!(known.child_line(line), want, "{line}");
        }
        assert!(is_secret_name("GOOGLE_OAUTH_CLIENT_SECRET"));
        assert!(is_secret_name("OPENAI_API_KEY"));
        assert!(is_secret_name("GITHUB_TOKEN"));
        assert!(!is_secret_name("USER_GOOGLE_EMAIL"));
    }

    #[test]
    fn known_values_go_whatever_their_name_and_the_spans_merge() {
        let r = Redactor::new([
            "postgres://app:hunter2-db-pass@db/app".to_string(),
            "hunter2-db-pass".to_string(),
        ]);
        assert_eq!(
            r.values_in("url=postgres://app:hunter2-db-pass@db/app pass=hunter2-db-pass."),
            "url=[redacted] pass=[redacted]."
        );
        assert!(matches!(r.values_in("nothing here"), Cow::Borrowed(_)));
    }
}
