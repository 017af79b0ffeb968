//! Lines written by children (their stderr) go into the daemon's log, and a server may print a
//! token or a key in a traceback or a debug line. This module takes out what looks like a
//! credential before such a line is logged: the values of the child's own secret environment
//! variables, tokens of well-known shapes (Google OAuth access and refresh tokens, OAuth client
//! secrets, API keys, bearer tokens), and the values of fields named like secrets. It errs on the
//! side of redacting: a log line with a hole in it costs little; a leaked token costs a lot.

/// What a secret becomes in a log line.
const REDACTED: &str = "[redacted]";
/// Values shorter than this are not taken for secrets (too many false hits, too little to leak).
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

/// `line` with what looks like a credential taken out; `known` are values that are secrets
/// for sure (the child's own secret environment).
pub(crate) fn redact(line: &str, known: &[String]) -> String {
    let mut out = line.to_string();
    for secret in known.iter().filter(|s| s.len() >= MIN_SECRET) {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    out = redact_shapes(&out);
    redact_named_fields(&out)
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
        let known = vec!["sk-live-abcdef123456".to_string(), "short".to_string()];
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
            assert_eq!(redact(line, &known), want, "{line}");
        }
        assert!(is_secret_name("GOOGLE_OAUTH_CLIENT_SECRET"));
        assert!(is_secret_name("OPENAI_API_KEY"));
        assert!(is_secret_name("GITHUB_TOKEN"));
        assert!(!is_secret_name("USER_GOOGLE_EMAIL"));
    }
}
