//! Known secret values found in text whatever form they were written in: as they are, and as
//! programs commonly re-encode them on the way to a log line (URL-encoded, JSON-escaped, hex,
//! base64, or any mix of the first two within one value).
//!
//! A value is a needle. Its plain, URL and JSON forms are matched by one walk that accepts, for
//! each character of the value, the character itself or any of its escapes; hex and base64 are
//! whole-value transforms, kept as literal needles (base64 at each of the three alignments a
//! value can have inside a longer encoded string). Matching never allocates per position and
//! stops at the first form that fits.

/// Values shorter than this (in bytes) are not redacted: "1", "true" or "prod" would take
/// every line apart, and leak next to nothing.
pub(crate) const MIN_VALUE: usize = 8;

/// The known values, each with its derived literal forms.
#[derive(Clone)]
pub(crate) struct Values {
    /// Matched flexibly (plain, URL-encoded, JSON-escaped).
    plain: Vec<String>,
    /// The bytes a plain value's written form can start with: other positions are skipped.
    starts: [bool; 256],
    /// Matched as they are (base64 forms), or ASCII case-insensitively (hex forms, stored
    /// lowercase).
    literal: Vec<String>,
    hex: Vec<String>,
}

/// A range of bytes of the searched text that holds a secret.
pub(crate) type Span = (usize, usize);

/// How far a flexible match got.
enum Walk {
    /// The whole value, ending at this byte.
    Full(usize),
    /// The text ended in the middle of the value: what is there could be its start.
    Partial,
    No,
}

impl Default for Values {
    fn default() -> Values {
        Values::new(std::iter::empty())
    }
}

impl Values {
    /// The values worth redacting (long enough, each once), longest first so that a value
    /// holding another is taken whole.
    pub fn new<I: IntoIterator<Item = String>>(values: I) -> Values {
        let mut plain: Vec<String> = values
            .into_iter()
            .filter(|v| v.len() >= MIN_VALUE)
            .collect();
        plain.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        plain.dedup();
        let mut literal = Vec::new();
        let mut hex = Vec::new();
        for v in &plain {
            hex.push(to_hex(v.as_bytes()));
            for alphabet in [STANDARD, URL_SAFE] {
                for align in 0..3 {
                    let core = base64_core(v.as_bytes(), align, alphabet);
                    if core.len() >= MIN_VALUE {
                        literal.push(core);
                    }
                }
            }
        }
        literal.sort();
        literal.dedup();
        let mut starts = [false; 256];
        for v in &plain {
            starts[usize::from(v.as_bytes()[0])] = true;
            for b in [b'%', b'\\', b'+'] {
                starts[usize::from(b)] = true;
            }
        }
        Values {
            plain,
            starts,
            literal,
            hex,
        }
    }

    /// The values themselves.
    pub fn plain(&self) -> &[String] {
        &self.plain
    }

    pub fn is_empty(&self) -> bool {
        self.plain.is_empty()
    }

    /// Every span of `text` that holds a known value in any of its forms (may overlap).
    pub fn spans(&self, text: &str) -> Vec<Span> {
        let mut out = Vec::new();
        if self.is_empty() {
            return out;
        }
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            if !self.starts[usize::from(bytes[i])] {
                continue;
            }
            for v in &self.plain {
                if let Walk::Full(end) = walk(bytes, i, v) {
                    out.push((i, end));
                    break;
                }
            }
        }
        for needle in &self.literal {
            out.extend(
                text.match_indices(needle.as_str())
                    .map(|(i, m)| (i, i + m.len())),
            );
        }
        let lower = text.to_ascii_lowercase();
        for needle in &self.hex {
            out.extend(
                lower
                    .match_indices(needle.as_str())
                    .map(|(i, m)| (i, i + m.len())),
            );
        }
        out
    }

    /// Where the end of `text` could begin a known value whose rest is not written yet: the
    /// earliest such byte, if any (plain, URL or JSON forms, or a literal form).
    pub fn partial_start(&self, text: &str) -> Option<usize> {
        let bytes = text.as_bytes();
        // A value's written form is at most 12 bytes per byte of it (`\uXXXX\uXXXX` for four).
        let longest = self.plain.first().map_or(0, |v| v.len() * 12);
        let lower = text.to_ascii_lowercase();
        for i in bytes.len().saturating_sub(longest)..bytes.len() {
            if self
                .plain
                .iter()
                .any(|v| matches!(walk(bytes, i, v), Walk::Partial))
            {
                return Some(i);
            }
            if let (Some(tail), Some(lower_tail)) = (text.get(i..), lower.get(i..))
                && (self.literal.iter().any(|n| n.starts_with(tail))
                    || self.hex.iter().any(|n| n.starts_with(lower_tail)))
            {
                return Some(i);
            }
        }
        None
    }
}

/// Match `value` against `text` from byte `at`, each of its characters written plainly,
/// URL-encoded (`%XX`, either case; `+` for a space) or JSON-escaped (`\"`, `\/`, `\n`,
/// `\u00e9`…).
fn walk(text: &[u8], at: usize, value: &str) -> Walk {
    let mut j = at;
    for ch in value.chars() {
        if j >= text.len() {
            return Walk::Partial;
        }
        match one_char(text, j, ch) {
            Step::To(next) => j = next,
            Step::Partial => return Walk::Partial,
            Step::No => return Walk::No,
        }
    }
    Walk::Full(j)
}

enum Step {
    To(usize),
    Partial,
    No,
}

fn one_char(text: &[u8], j: usize, ch: char) -> Step {
    let mut buf = [0u8; 4];
    let utf8 = ch.encode_utf8(&mut buf).as_bytes();
    let rest = &text[j..];
    // Plain, or each byte as itself or `%XX`.
    let mut k = 0;
    let mut ok = true;
    for &b in utf8 {
        if k >= rest.len() {
            return Step::Partial;
        }
        if rest[k] == b {
            k += 1;
        } else if rest[k] == b'%' {
            match hex_byte(&rest[k + 1..]) {
                Some(v) if v == b => k += 3,
                Some(_) => {
                    ok = false;
                    break;
                }
                None if rest.len() < k + 3 && is_hex_prefix(&rest[k + 1..]) => {
                    return Step::Partial;
                }
                None => {
                    ok = false;
                    break;
                }
            }
        } else {
            ok = false;
            break;
        }
    }
    if ok {
        return Step::To(j + k);
    }
    if ch == ' ' && rest[0] == b'+' {
        return Step::To(j + 1);
    }
    if rest[0] == b'\\' {
        return json_escape(rest, ch).map_or(Step::No, |s| match s {
            Some(n) => Step::To(j + n),
            None => Step::Partial,
        });
    }
    Step::No
}

/// `rest` starts with a backslash: how many bytes its JSON escape of `ch` takes (`Some(None)`:
/// it could, but the text ends first).
fn json_escape(rest: &[u8], ch: char) -> Option<Option<usize>> {
    let short = match ch {
        '"' => Some(b'"'),
        '\\' => Some(b'\\'),
        '/' => Some(b'/'),
        '\n' => Some(b'n'),
        '\r' => Some(b'r'),
        '\t' => Some(b't'),
        '\u{8}' => Some(b'b'),
        '\u{c}' => Some(b'f'),
        _ => None,
    };
    if rest.len() < 2 {
        return Some(None);
    }
    if short.is_some_and(|s| rest[1] == s) {
        return Some(Some(2));
    }
    if rest[1] != b'u' {
        return None;
    }
    let mut units = [0u16; 2];
    let units = ch.encode_utf16(&mut units);
    let mut k = 0;
    for &u in units.iter() {
        if rest.len() < k + 6 {
            let have = &rest[k..];
            let fits = have.first().is_none_or(|&b| b == b'\\')
                && have.get(1).is_none_or(|&b| b == b'u')
                && have.len() <= 6
                && is_hex_prefix(have.get(2..).unwrap_or(&[]));
            return fits.then_some(None);
        }
        if rest[k] != b'\\' || rest[k + 1] != b'u' {
            return None;
        }
        let hi = hex_byte(&rest[k + 2..])?;
        let lo = hex_byte(&rest[k + 4..])?;
        if (u16::from(hi) << 8 | u16::from(lo)) != u {
            return None;
        }
        k += 6;
    }
    Some(Some(k))
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_byte(s: &[u8]) -> Option<u8> {
    Some(hex_digit(*s.first()?)? << 4 | hex_digit(*s.get(1)?)?)
}

fn is_hex_prefix(s: &[u8]) -> bool {
    s.iter().all(|&b| hex_digit(b).is_some())
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The base64 characters that depend on `value` alone when it sits `align` bytes (mod 3)
/// into a longer encoded string: what is the same wherever the value is embedded.
fn base64_core(value: &[u8], align: usize, alphabet: &[u8; 64]) -> String {
    let mut bytes = vec![0u8; align];
    bytes.extend_from_slice(value);
    let mut chars = Vec::with_capacity(bytes.len() * 4 / 3 + 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for k in 0..4 {
            chars.push(alphabet[(n >> (18 - 6 * k)) as usize & 63]);
        }
    }
    // Character k covers bits [6k, 6k+6); the value holds bits [8·align, 8·(align+len)).
    let first = (8 * align).div_ceil(6);
    let end = (8 * (align + value.len())) / 6;
    String::from_utf8_lossy(chars.get(first..end).unwrap_or(&[])).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(value: &[u8], alphabet: &[u8; 64]) -> String {
        let mut out = String::new();
        for chunk in value.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
            for k in 0..=chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * k)) as usize & 63] as char);
            }
        }
        out
    }

    fn redacted(values: &Values, text: &str) -> bool {
        !values.spans(text).is_empty()
    }

    #[test]
    fn every_common_form_of_a_value_is_found() {
        let secret = "postgres://app:hunter2-db-pass@db.internal/app";
        let v = Values::new([secret.to_string()]);
        let url = "postgres%3A%2F%2Fapp%3Ahunter2-db-pass%40db.internal%2Fapp";
        let json = r#"postgres:\/\/app:hunter2-db-pass@db.internal\/app"#;
        let unicode = r#"postgres\u003a//app\u003Ahunter2-db-pass\u0040db.internal/app"#;
        let hex = to_hex(secret.as_bytes()).to_uppercase();
        for text in [secret, url, &url.to_lowercase(), json, unicode, &hex] {
            assert!(redacted(&v, &format!("x {text} y")), "{text}");
        }
        // Embedded at every offset in a longer base64 string, in both alphabets.
        for prefix in ["", "u:", "us:", "use:"] {
            for alphabet in [STANDARD, URL_SAFE] {
                let enc = encode(format!("{prefix}{secret}!").as_bytes(), alphabet);
                assert!(redacted(&v, &format!("Basic {enc}")), "{prefix} {enc}");
            }
        }
        assert!(!redacted(&v, "postgres://app:other@db.internal/app"));
    }

    #[test]
    fn short_values_are_not_taken_for_secrets() {
        let v = Values::new(["1".into(), "true".into(), "prod".into()]);
        assert!(v.is_empty());
        assert!(v.spans("true 1 prod").is_empty());
    }

    #[test]
    fn a_value_cut_short_by_the_end_of_the_text_is_noticed() {
        let v = Values::new(["hunter2-db-pass".to_string()]);
        assert_eq!(v.partial_start("with hunter2-d"), Some(5));
        assert_eq!(v.partial_start("with hunter2%2"), Some(5));
        assert_eq!(v.partial_start("with nothing."), None);
        let spaced = Values::new(["a b c d e f".to_string()]);
        assert!(redacted(&spaced, "q=a+b+c+d+e+f"));
    }
}
