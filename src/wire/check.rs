//! Whether text is JSON, checked exactly as serde_json checks a value it makes a raw value of
//! (`ignore_value`): the same grammar, the same strings (a control character refused, any
//! four hex digits after `\u`, a lone surrogate among them too), no limit on how deep values
//! nest. It only says where a value ends, or that it is not one: what went wrong is told by
//! serde_json, which reads the line again then (see `Message::parse`).
//!
//! Why a check of coogle's own: serde_json's was the largest single part of the daemon's work
//! per call (6,900 of its 36,000 instructions, with a step per byte of every string; issue 22).
//! Strings here go eight bytes at a time, as the walks of `scan.rs` do.

use std::borrow::Cow;

use super::scan::{bytes_below, bytes_equal, skip_space};

/// The fields of the JSON object that is the whole of `text` (whitespace around it aside), in
/// the order written, a repeated key each time: each key decoded as serde_json decodes it, each
/// value's text. `None`, and nothing more said, when `text` is not one object serde_json would
/// read whole, or has a key serde_json refuses (an escaped lone surrogate).
pub(super) fn object_fields<'a>(
    text: &'a str,
    mut each: impl FnMut(Cow<'a, str>, &'a str),
) -> Option<()> {
    let b = text.as_bytes();
    let mut at = skip_space(b, 0);
    if *b.get(at)? != b'{' {
        return None;
    }
    at = skip_space(b, at + 1);
    if *b.get(at)? != b'}' {
        loop {
            let key_end = string_end(b, at)?;
            let key = text.get(at + 1..key_end - 1)?;
            let key = match key.contains('\\') {
                false => Cow::Borrowed(key),
                true => Cow::Owned(serde_json::from_str::<String>(text.get(at..key_end)?).ok()?),
            };
            let colon = skip_space(b, key_end);
            if *b.get(colon)? != b':' {
                return None;
            }
            let start = skip_space(b, colon + 1);
            let end = value_end(b, start)?;
            each(key, text.get(start..end)?);
            at = skip_space(b, end);
            match *b.get(at)? {
                b',' => at = skip_space(b, at + 1),
                b'}' => break,
                _ => return None,
            }
        }
    }
    (skip_space(b, at + 1) == b.len()).then_some(())
}

/// Where the JSON value that starts at `b[i]` ends (just past it); `None` when the text from
/// `i` is not one value serde_json would take. Whitespace before it is not skipped.
pub(super) fn value_end(b: &[u8], i: usize) -> Option<usize> {
    let mut open = Open::default();
    let mut at = i;
    loop {
        // One value, starting at `at`.
        at = match *b.get(at)? {
            b'"' => string_end(b, at)?,
            b'-' | b'0'..=b'9' => number_end(b, at)?,
            b't' => literal_end(b, at, b"true")?,
            b'f' => literal_end(b, at, b"false")?,
            b'n' => literal_end(b, at, b"null")?,
            c @ (b'[' | b'{') => {
                let inside = skip_space(b, at + 1);
                let close = if c == b'[' { b']' } else { b'}' };
                if *b.get(inside)? == close {
                    inside + 1
                } else {
                    open.push(c == b'{');
                    at = if c == b'{' { key(b, inside)? } else { inside };
                    continue;
                }
            }
            _ => return None,
        };
        // After a value: the end of what holds it, or the next of its values.
        loop {
            let Some(in_object) = open.top() else {
                return Some(at);
            };
            let next = skip_space(b, at);
            match *b.get(next)? {
                b',' => {
                    let item = skip_space(b, next + 1);
                    at = if in_object { key(b, item)? } else { item };
                    break;
                }
                b']' if !in_object => {}
                b'}' if in_object => {}
                _ => return None,
            }
            open.pop();
            at = next + 1;
        }
    }
}

/// A key at `b[i]` and its colon: where its value starts (whitespace skipped).
fn key(b: &[u8], i: usize) -> Option<usize> {
    let colon = skip_space(b, string_end(b, i)?);
    (*b.get(colon)? == b':').then(|| skip_space(b, colon + 1))
}

/// Where the string that opens at `b[i]` ends (past its closing quote), when it is one: no
/// control character, each escape one of JSON's. Eight bytes at a time up to a quote, a
/// backslash or a control character.
pub(super) fn string_end(b: &[u8], i: usize) -> Option<usize> {
    if *b.get(i)? != b'"' {
        return None;
    }
    let mut at = i + 1;
    loop {
        if let Some(word) = b.get(at..at + 8) {
            let w = u64::from_le_bytes(word.try_into().ok()?);
            let found = bytes_equal(w, b'"') | bytes_equal(w, b'\\') | bytes_below(w, 0x20);
            if found == 0 {
                at += 8;
                continue;
            }
            at += found.trailing_zeros() as usize / 8;
        }
        match *b.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => {
                at += match *b.get(at + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => 2,
                    b'u' if b.get(at + 2..at + 6)?.iter().all(u8::is_ascii_hexdigit) => 6,
                    _ => return None,
                };
            }
            0..0x20 => return None,
            _ => at += 1,
        }
    }
}

/// Where the number at `b[i]` ends: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`. (`01`
/// ends after its `0`, and what follows is no delimiter, so it is refused, as serde_json does.)
fn number_end(b: &[u8], i: usize) -> Option<usize> {
    let digits = |at: usize| {
        let n = b
            .get(at..)
            .map_or(0, |r| r.iter().take_while(|c| c.is_ascii_digit()).count());
        (n > 0).then_some(at + n)
    };
    let mut at = i + usize::from(b[i] == b'-');
    at = match *b.get(at)? {
        b'0' => at + 1,
        _ => digits(at)?,
    };
    if b.get(at) == Some(&b'.') {
        at = digits(at + 1)?;
    }
    if let Some(b'e' | b'E') = b.get(at) {
        at += 1;
        if let Some(b'+' | b'-') = b.get(at) {
            at += 1;
        }
        at = digits(at)?;
    }
    Some(at)
}

fn literal_end(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// The arrays and objects a value is inside, innermost last: a bit each (set for an object),
/// the first 64 in a word, so that a usual message, a few levels deep, allocates nothing.
#[derive(Default)]
struct Open {
    depth: usize,
    low: u64,
    deeper: Vec<bool>,
}

impl Open {
    fn push(&mut self, object: bool) {
        if self.depth < 64 {
            self.low = (self.low & !(1 << self.depth)) | (u64::from(object) << self.depth);
        } else {
            self.deeper.push(object);
        }
        self.depth += 1;
    }

    fn pop(&mut self) {
        self.depth -= 1;
        if self.depth >= 64 {
            self.deeper.pop();
        }
    }

    /// Whether the innermost is an object; `None` at the top level.
    fn top(&self) -> Option<bool> {
        match self.depth {
            0 => None,
            d if d <= 64 => Some(self.low & (1 << (d - 1)) != 0),
            _ => self.deeper.last().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What serde_json says of `text` as one value (with whitespace around it allowed, as
    /// `from_str` allows).
    fn serde_takes(text: &str) -> bool {
        serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok()
    }

    fn check_takes(text: &str) -> bool {
        let b = text.as_bytes();
        value_end(b, skip_space(b, 0)).is_some_and(|end| skip_space(b, end) == b.len())
    }

    fn same_as_serde(text: &str) {
        assert_eq!(
            check_takes(text),
            serde_takes(text),
            "check and serde_json disagree on {text:?}"
        );
    }

    /// Each rule of the grammar, on both sides of its line.
    #[test]
    fn agrees_with_serde_json_on_each_rule() {
        let cases = [
            // Literals and numbers.
            "true",
            "false",
            "null",
            "tru",
            "nul",
            "truee",
            "True",
            "0",
            "-0",
            "01",
            "-01",
            "1.",
            "1.5",
            ".5",
            "-",
            "+1",
            "1e",
            "1e5",
            "1E+5",
            "1e-5",
            "1e+",
            "1.5e3",
            "0.0",
            "00",
            "1.2.3",
            "-a",
            "123456789012345678901234567890",
            "0x10",
            "1_000",
            "NaN",
            "Infinity",
            "-Infinity",
            "1 2",
            "0e",
            "0e1",
            "0.e1",
            // Strings.
            r#""""#,
            r#""a""#,
            r#""\""#,
            r#""\\""#,
            r#""\/""#,
            r#""\b\f\n\r\t""#,
            r#""\a""#,
            r#""\u0041""#,
            r#""\u004""#,
            r#""\u00zz""#,
            r#""\ud800""#,
            r#""\udc00\ud800""#,
            r#""\U0041""#,
            "\"a\tb\"",
            "\"a\u{1f}b\"",
            "\"a\u{7f}b\"",
            "\"é日本\"",
            "\"abc",
            "\"abcdefghijklmnop\u{1}qrs\"",
            "\"abcdefgh\\\"ijklmnop\"",
            "\"\\",
            // Arrays and objects.
            "[]",
            "[ ]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "[1,2]",
            "[[[]]]",
            "[[[]]",
            "[]]",
            "{}",
            "{ }",
            r#"{"a":1}"#,
            r#"{"a":1,}"#,
            r#"{"a"1}"#,
            r#"{a:1}"#,
            r#"{"a":}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{1:2}"#,
            r#"{"a":[1,{"b":null}]}"#,
            r#"[{"a":1}]"#,
            r#"{"a":{"b":{}}}"#,
            r#"{"a":1]"#,
            r#"[1}"#,
            r#"{"\u00e9":1}"#,
            r#"{"\ud800":1}"#,
            "{\"a\"\n:\r1\t}",
            " [ 1 , 2 ] ",
            "\u{a0}1",
            "\u{c}1",
            "[1]x",
            "",
            " ",
            "{",
            "[",
            "]",
            "}",
            ",",
            ":",
        ];
        for text in cases {
            same_as_serde(text);
        }
    }

    /// A byte that ends or breaks a string, at every place of the eight-byte words and of
    /// the bytes after them: found, or let through, as serde_json does.
    #[test]
    fn every_byte_at_every_place_of_a_word() {
        let specials = [
            "\u{0}", "\u{1f}", " ", "\u{7f}", "\"", "\\", "\\u", "\\n", "é", "日",
        ];
        for len in 0..20 {
            for at in 0..=len {
                for special in specials {
                    let mut text = "a".repeat(len);
                    text.insert_str(at, special);
                    same_as_serde(&format!("\"{text}\""));
                    same_as_serde(&format!("[\"{text}\",1]"));
                }
            }
        }
    }

    /// Deep nesting: serde_json sets no limit on what it skips, and neither does the check (a
    /// stack of bits, not recursion: a line of a million brackets is no stack overflow).
    #[test]
    fn any_depth_without_recursion() {
        for depth in [63, 64, 65, 128, 129, 1_000, 1_000_000] {
            let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            assert!(check_takes(&text), "{depth}");
            let objects = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
            assert!(check_takes(&objects), "{depth}");
            let mixed: String = (0..depth)
                .map(|i| if i % 2 == 0 { "[" } else { r#"{"k":"# })
                .collect();
            let closed: String = (0..depth)
                .rev()
                .map(|i| if i % 2 == 0 { "]" } else { "}" })
                .collect();
            same_as_serde(&format!("{mixed}0{closed}"));
            // A closer of the wrong kind, at every depth past the word.
            let wrong: String = (0..depth)
                .rev()
                .map(|i| if i % 2 == 0 { "}" } else { "]" })
                .collect();
            same_as_serde(&format!("{mixed}0{wrong}"));
            assert!(!check_takes(&"[".repeat(depth)));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any JSON value is taken, and found to end where it ends.
        #[test]
        fn takes_any_json(v in crate::wire::arb::value(&["id", "method", "params"])) {
            let text = serde_json::to_string(&v).unwrap();
            prop_assert!(check_takes(&text), "{}", text);
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            prop_assert!(check_takes(&pretty), "{}", pretty);
        }

        /// Any JSON with one byte changed, dropped or added: taken exactly when serde_json takes
        /// it (the property that matters: never taken when serde_json would refuse it).
        #[test]
        fn agrees_with_serde_json_on_damaged_json(
            v in crate::wire::arb::value(&["id", "method", "params"]),
            at in any::<prop::sample::Index>(),
            edit in 0u8..3,
            byte in prop::sample::select(b"\"\\{}[],:.-+eE0123456789 \tntfu\x01\x7fa/".to_vec()),
        ) {
            let bytes = crate::wire::arb::damage(serde_json::to_string(&v).unwrap().into_bytes(), at, edit, byte);
            if let Ok(text) = String::from_utf8(bytes) {
                prop_assert_eq!(check_takes(&text), serde_takes(&text), "{:?}", text);
            }
        }
    }
}
