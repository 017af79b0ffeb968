//! Which request a line from the daemon answers, found by walking the line's top level without
//! parsing it. The shim reads every line the daemon sends it only for this, to cross the
//! answered request off; a full parse ([`Head::parse`]) checks every byte of a result it never
//! reads, and was half of the shim's work per call (callgrind, issue 22).
//!
//! Only for lines the daemon wrote: the daemon writes nothing it did not parse as JSON first
//! (or build itself), so a line's strings, nesting and keys can be trusted to be well formed
//! and only need finding. It must never be used on what a client or a child wrote. A line that
//! does not walk as expected gives `None`, and the caller parses it in full.

#[cfg(doc)]
use super::Head;
use super::scan::{skip_space, string_end, value_end};

/// What a line from the daemon is, as far as crossing off an answered request goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Daemon<'a> {
    /// A response (a result or an error, no method), with the text of its `id`, as written.
    Answer { id: &'a str },
    /// Anything else: a request, a notification, a response with no id.
    Other,
}

/// What the daemon's `line` is, or `None` when it does not walk as well-formed JSON (the
/// caller then parses it). It reads what [`Head::parse`] reads of such a line: the last of a
/// repeated key wins, and a key may be spelt with escapes.
pub(crate) fn from_daemon(line: &[u8]) -> Option<Daemon<'_>> {
    let mut at = skip_space(line, 0);
    if line.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(line, at + 1);
    let (mut id, mut method, mut answer) = (None, false, false);
    if line.get(at) == Some(&b'}') {
        at += 1;
    } else {
        loop {
            let (key_end, _) = string_end(line, at)?;
            let key = &line[at + 1..key_end - 1];
            at = skip_space(line, key_end);
            if line.get(at) != Some(&b':') {
                return None;
            }
            let value_start = skip_space(line, at + 1);
            let value_end = value_end(line, value_start)?;
            match key_name(key)? {
                Key::Id => id = Some(std::str::from_utf8(&line[value_start..value_end]).ok()?),
                Key::Method => method = true,
                Key::Answer => answer = true,
                Key::Other => {}
            }
            at = skip_space(line, value_end);
            match line.get(at) {
                Some(b',') => at = skip_space(line, at + 1),
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if skip_space(line, at) != line.len() {
        return None;
    }
    Some(match (method, answer, id) {
        (false, true, Some(id)) => Daemon::Answer { id },
        _ => Daemon::Other,
    })
}

enum Key {
    Id,
    Method,
    /// `result` or `error`.
    Answer,
    Other,
}

/// A key's meaning, from its text between the quotes (decoded when it has an escape).
fn key_name(key: &[u8]) -> Option<Key> {
    let name = |k: &[u8]| match k {
        b"id" => Key::Id,
        b"method" => Key::Method,
        b"result" | b"error" => Key::Answer,
        _ => Key::Other,
    };
    if !key.contains(&b'\\') {
        return Some(name(key));
    }
    let quoted = [b"\"", key, b"\""].concat();
    let decoded: String = serde_json::from_slice(&quoted).ok()?;
    Some(name(decoded.as_bytes()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::wire::{Head, Kind, arb};

    const NAMES: &[&str] = &["id", "method", "result", "error", "jsonrpc", "params"];

    /// What the full parse says of a line, in the walk's terms.
    fn by_parse(line: &[u8]) -> Daemon<'static> {
        match Head::parse(line) {
            Ok(h) if h.kind() == Kind::Response && h.id().is_some() => Daemon::Answer {
                id: Box::leak(h.id().unwrap().get().to_string().into_boxed_str()),
            },
            _ => Daemon::Other,
        }
    }

    #[test]
    fn reads_what_the_parse_reads() {
        let lines: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\"}{]["}]}}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","error":{"code":-32000,"message":"x"}}"#,
            r#"{"result":{},"jsonrpc":"2.0","id":3}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
            r#" { "id" : "sp\\ace\"d" , "result" : [ 1 , true , null , -2.5e3 ] } "#,
            r#"{"\u0069d":9,"res\u0075lt":"ok"}"#,
            r#"{"id":1,"id":2,"result":[]}"#,
            r#"{"id":1}"#,
            r#"{}"#,
            r#"{"id":"\\","result":"\\\\"}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{"text":"é and 漢字 and \ud83d\ude00"}}"#,
        ];
        for line in lines {
            assert_eq!(
                from_daemon(line.as_bytes()),
                Some(by_parse(line.as_bytes())),
                "{line}"
            );
        }
    }

    /// What is not well formed gives up, so the caller parses it (and refuses it).
    #[test]
    fn gives_up_on_what_does_not_walk() {
        for line in [
            "",
            "[1]",
            "42",
            r#"{"id":1,"result":"#,
            r#"{"id":1,"result":"unterminated}"#,
            r#"{"id":1,"result":{}"#,
            r#"{"id":1 "result":{}}"#,
            r#"{"id":1,"result":{}} trailing"#,
            r#"{"id":1,"result":{}}}"#,
            r#"{id:1}"#,
        ] {
            assert_eq!(from_daemon(line.as_bytes()), None, "{line}");
        }
    }

    proptest! {
        /// Any object serde_json writes, with the daemon's keys among its fields, compact or
        /// pretty (whitespace between every token), walks to what the parse reads.
        #[test]
        fn any_json_object_walks_as_it_parses(
            fields in prop::collection::vec((arb::key(NAMES), arb::value(NAMES)), 0..6),
            id in prop_oneof![any::<i64>().prop_map(Value::from), ".*".prop_map(Value::from), Just(Value::Null)],
            pretty in any::<bool>(),
        ) {
            let mut object = serde_json::Map::new();
            object.insert("jsonrpc".into(), json!("2.0"));
            object.insert("id".into(), id);
            for (k, v) in fields {
                object.insert(k, v);
            }
            let object = Value::Object(object);
            let line = if pretty {
                serde_json::to_string_pretty(&object).unwrap()
            } else {
                serde_json::to_string(&object).unwrap()
            };
            prop_assert_eq!(from_daemon(line.as_bytes()), Some(by_parse(line.as_bytes())), "{}", line);
        }
    }
}
