//! A JSON object's top-level fields read in place: each key and its value's text borrowed
//! from the object's text, nothing copied (only a key written with an escape is decoded into
//! its own string). The daemon reads a few fields of a request's `params` and `_meta`, and of
//! an answer's `result`, on every call. It must read what [`Fields`] reads: the same texts are
//! objects, the last of a repeated key wins, and [`Object::entries`] lists the keys where the
//! map keeps them (a repeated key at its first place, with its last value).
//!
//! An object inside a message is read without checking its text again ([`Object::of`]): the
//! message's one parse checked every byte of it, and serde_json, asked for its fields, checked
//! them all a second time (that second pass over `params` and `result` was about 6,000 of the
//! daemon's 39,000 instructions per call: issue 22). Its values are [`Json`]: text known to be
//! JSON because of where it was found.

use std::borrow::Cow;
use std::sync::LazyLock;

use foldhash::{HashMap, HashMapExt};
use memchr::memmem::Finder;
use serde_json::value::RawValue;

use super::scan::{skip_space, string_end, value_end};

#[cfg(doc)]
use super::Fields;

/// Up to this many fields, a repeated key is found by a scan (see [`Object::entries`]).
const SCAN_UP_TO: usize = 32;

/// One JSON value's text, found inside text that was checked as a whole (or written by the
/// wire from such values): JSON by where it came from, so it is read without being checked
/// again. Only the wire makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Json<'a>(&'a str);

impl<'a> Json<'a> {
    /// A raw value's text (serde_json made it, so it is JSON).
    pub fn of(raw: &'a RawValue) -> Json<'a> {
        Json(raw.get())
    }

    /// Text the wire wrote itself from values that are JSON (see `ObjectText`).
    pub(super) fn written(text: &'a str) -> Json<'a> {
        Json(text)
    }

    /// The value's text, as written.
    pub fn get(self) -> &'a str {
        self.0
    }

    /// A raw value of its own. serde_json makes one of text only by checking it, so this is
    /// one more pass over it: for what is kept (a progress token, a session's capabilities),
    /// not for what is only looked at.
    pub fn to_raw(self) -> Box<RawValue> {
        RawValue::from_string(self.0.to_owned()).unwrap_or_else(|_| {
            debug_assert!(false, "Json is JSON: {}", self.0);
            RawValue::from_string("null".into()).expect("null is JSON")
        })
    }

    /// The value decoded as a JSON string (borrowed when it has no escape); `None` when it is
    /// not a string.
    pub fn string(self) -> Option<Cow<'a, str>> {
        string_of(self.0)
    }

    /// Whether a key `key` may be written anywhere in this value, at any depth: `false` only
    /// when it surely is not (its text appears nowhere, and no escape could spell it). A look
    /// at a few bytes a step, before a walk of every field for a key most values lack (a call's
    /// `isError`, a sign-in's account argument): the walk was a tenth of the daemon's work per
    /// call (issue 22). For a key looked for on every call, see [`may_hold`](Self::may_hold).
    pub fn may_hold_key(self, key: &str) -> bool {
        self.may_hold(&KeyLook::new(key))
    }

    /// [`may_hold_key`](Self::may_hold_key) with the key's searcher built once.
    pub fn may_hold(self, look: &KeyLook) -> bool {
        static ESCAPE_U: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
        let text = self.0.as_bytes();
        look.key.find(text).is_some()
            || match look.short_escape {
                true => memchr::memchr(b'\\', text).is_some(),
                false => ESCAPE_U.find(text).is_some(),
            }
    }
    /// The value's fields, when it is an object.
    pub fn object(self) -> Option<Object<'a>> {
        Object::scan(self.0)
    }

    /// The value of field `key` (the last one written under it), when this is an object: one
    /// field looked up without gathering the others.
    pub fn field(self, key: &str) -> Option<Json<'a>> {
        let mut found = None;
        fields(self.0, |k, v| {
            if k == key {
                found = Some(v);
            }
        })?;
        found
    }
}

/// A key [`Json::may_hold`] looks for, its searcher built once. Three looks on every call with
/// `str::contains`, which builds a two-way searcher each time and steps a byte at a time, were
/// about 1,700 of the daemon's 36,000 instructions per call in Claude Code's era (issue 22).
pub struct KeyLook {
    key: Finder<'static>,
    /// Letters, digits and most punctuation can only be escaped as `\uXXXX`; a quote, a
    /// backslash, a slash or a control character has a short escape too.
    short_escape: bool,
}

impl KeyLook {
    pub fn new(key: &str) -> KeyLook {
        KeyLook {
            key: Finder::new(key.as_bytes()).into_owned(),
            short_escape: key
                .bytes()
                .any(|b| matches!(b, b'"' | b'\\' | b'/') || b < 0x20),
        }
    }
}

/// A JSON object's top-level fields, in the order written, borrowed from its text.
#[derive(Debug, Default)]
pub struct Object<'a> {
    fields: Vec<(Cow<'a, str>, Json<'a>)>,
}

impl<'a> Object<'a> {
    /// `text`'s fields, or `None` when it is not exactly one JSON object. The text is checked
    /// first, as serde_json checks a raw value.
    pub fn parse(text: &'a str) -> Option<Object<'a>> {
        serde_json::from_str::<&RawValue>(text).ok()?;
        Object::scan(text)
    }

    /// The fields of a raw value serde_json made (and so checked), read without checking it
    /// again; `None` when it is no object.
    pub fn of(raw: &'a RawValue) -> Option<Object<'a>> {
        Object::scan(raw.get())
    }

    /// A field's value: the last one written under `key`.
    pub fn get(&self, key: &str) -> Option<Json<'a>> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.fields.iter().any(|(k, _)| k == key)
    }

    /// A field that is a JSON string, decoded (borrowed when it has no escape).
    pub fn string(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key)?.string()
    }

    /// A field that is a JSON object, read in place.
    pub fn object(&self, key: &str) -> Option<Object<'a>> {
        self.get(key)?.object()
    }

    /// The fields as [`Fields`] would hold them, less the keys in `leave_out`: each key once,
    /// at the place it was first written, with the value it was last given.
    pub fn entries(&self, leave_out: &[&str]) -> Vec<(&str, Json<'a>)> {
        let mut out: Vec<(&str, Json<'a>)> = Vec::with_capacity(self.fields.len());
        // A repeated key is looked for among the few fields a message has; past a few dozen,
        // through an index, so that an object of a million keys costs a million steps, not a
        // million squared.
        let mut index: Option<HashMap<&str, usize>> =
            (self.fields.len() > SCAN_UP_TO).then(|| HashMap::with_capacity(self.fields.len()));
        for (k, v) in &self.fields {
            let k = k.as_ref();
            if leave_out.contains(&k) {
                continue;
            }
            let seen = match &mut index {
                Some(index) => index.get(k).copied(),
                None => out.iter().position(|(seen, _)| *seen == k),
            };
            match seen {
                Some(at) => out[at].1 = *v,
                None => {
                    if let Some(index) = &mut index {
                        index.insert(k, out.len());
                    }
                    out.push((k, *v));
                }
            }
        }
        out
    }

    /// The fields of `text`, which is JSON (checked by whoever made it): `None` when it is no
    /// object.
    fn scan(text: &'a str) -> Option<Object<'a>> {
        // Most objects the daemon reads have a handful of fields: one allocation.
        let mut fields_read = Vec::with_capacity(8);
        fields(text, |k, v| fields_read.push((k, v)))?;
        Some(Object {
            fields: fields_read,
        })
    }
}

/// Each field of the object `text` (which is JSON: checked by whoever made it) in the order
/// written: `None` when it is no object, or when a key is written with an escape serde_json
/// will not decode (a lone surrogate: see `Request::classify`). The walk trusts the text's
/// shape (see `scan.rs`).
fn fields<'a>(text: &'a str, mut each: impl FnMut(Cow<'a, str>, Json<'a>)) -> Option<()> {
    let b = text.as_bytes();
    let mut i = skip_space(b, 0);
    if *b.get(i)? != b'{' {
        return None;
    }
    i = skip_space(b, i + 1);
    if *b.get(i)? == b'}' {
        return Some(());
    }
    loop {
        let (key_end, escaped) = string_end(b, i)?;
        let key = match escaped {
            false => Cow::Borrowed(text.get(i + 1..key_end - 1)?),
            true => Cow::Owned(serde_json::from_str::<String>(text.get(i..key_end)?).ok()?),
        };
        i = skip_space(b, key_end);
        if *b.get(i)? != b':' {
            return None;
        }
        let start = skip_space(b, i + 1);
        let end = value_end(b, start)?;
        each(key, Json(text.get(start..end)?));
        i = skip_space(b, end);
        match *b.get(i)? {
            b',' => i = skip_space(b, i + 1),
            b'}' => return Some(()),
            _ => return None,
        }
    }
}

/// A JSON string's text, decoded: borrowed when it has no escape; `None` when it is not a
/// string.
pub fn string_text(raw: &RawValue) -> Option<Cow<'_, str>> {
    string_of(raw.get())
}

fn string_of(text: &str) -> Option<Cow<'_, str>> {
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
        && !inner.contains('\\')
    {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;
    use crate::wire::arb;
    use crate::wire::{Fields, ObjectText, raw};

    const NAMES: &[&str] = &["_meta", "result", "a", "isError", "é", "\"", "\\"];

    /// `o` holds what the map `f` holds: each key's value, the same entries in the same order,
    /// written back to the same text.
    fn same(o: &Object, f: &Fields, text: &str) {
        let entries = o.entries(&[]);
        assert_eq!(entries.len(), f.len(), "{text}");
        for ((ok, ov), (fk, fv)) in entries.iter().zip(f) {
            assert_eq!((*ok, ov.get()), (fk.as_str(), fv.get()), "{text}");
            assert_eq!(o.get(ok).map(Json::get), Some(fv.get()), "{text}");
            assert!(o.contains_key(ok), "{text}");
        }
        assert_eq!(ObjectText::of(&entries).get(), raw(f).get(), "{text}");
    }

    /// Object reads every text as a `Fields` map does: the same texts refused, and the same
    /// fields of the rest, whether the text is checked ([`Object::parse`]) or was already
    /// ([`Object::of`], which reads without checking).
    #[test]
    fn reads_what_fields_reads() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(300), "]".repeat(300));
        let texts: &[&str] = &[
            r#"{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#" { "a" : [ 1 , 2 ] , "b" : { "c" : null } } "#,
            r#"{"\u0069d":3,"i\"d":4,"ke\\y":"v\n"}"#,
            r#"{}"#,
            "{ \t\r\n}",
            r#"{"a":1,"a":2,"a":3,"b":4}"#,
            r#"{"a":"}","b":"]","c":"{\"x\":[","d":"\\","e":"\\\""}"#,
            r#"{"a":[{"b":"]}"},["}"]],"c":-1.5e-7,"d":true,"e":false,"f":null,"g":0}"#,
            r#"{"a":"é😀","b":"\ud83d\ude00","c":1E+2}"#,
            "{\"a\"\n:\n[\n1\n,\n{\n}\n]\n,\n\"b\"\n:\n\"x\"\n}",
            &deep,
            r#"[1,2]"#,
            r#""text""#,
            r#"null"#,
            r#"{"a":1"#,
            r#"{"a":1} trailing"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":tru}"#,
            r#"{"a":"x}"#,
            r#""#,
        ];
        for text in texts {
            let fields = serde_json::from_str::<Fields>(text).ok();
            match (Object::parse(text), &fields) {
                (Some(o), Some(f)) => same(&o, f, text),
                (None, None) => {}
                (o, f) => panic!("{text}: Object {:?} but Fields {:?}", o.is_some(), f),
            }
            if let Ok(raw) = serde_json::from_str::<&RawValue>(text) {
                match (Object::of(raw), &fields) {
                    (Some(o), Some(f)) => same(&o, f, text),
                    (None, None) => {}
                    (o, f) => panic!("{text}: Object::of {:?} but Fields {:?}", o.is_some(), f),
                }
            }
        }
    }

    /// A quote or a backslash at every place of an eight-byte word, in keys and values, and
    /// multi-byte characters beside them: read as serde_json reads them.
    #[test]
    fn an_escape_anywhere_in_a_word_is_seen() {
        for len in 0..20 {
            for at in 0..=len {
                for special in ["\\\"", "\\\\", "é", "\\u00e9", "😀"] {
                    let mut plain = "a".repeat(len);
                    plain.insert_str(at, special);
                    let text = format!(
                        r#"{{"{plain}":"{plain}","k{plain}":["{plain}",{{"{plain}":1}}]}}"#
                    );
                    let f: Fields = serde_json::from_str(&text).unwrap();
                    same(&Object::parse(&text).unwrap(), &f, &text);
                }
            }
        }
    }

    /// Past the scan's few dozen fields, the index keeps what the scan keeps, and 200,000 keys
    /// take a moment (a scan for each took minutes).
    #[test]
    fn many_fields_are_read_in_linear_time() {
        let mut text = String::from("{");
        for i in 0..200_000 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        text.push_str("\"k7\":\"again\",\"last\":0}");
        let o = Object::parse(&text).expect("an object");
        let started = std::time::Instant::now();
        let entries = o.entries(&["last"]);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(entries.len(), 200_000);
        assert_eq!((entries[7].0, entries[7].1.get()), ("k7", "\"again\""));
        assert_eq!(entries[199_999].0, "k199999");
        let fields: Fields = serde_json::from_str(&text).unwrap();
        assert_eq!(ObjectText::of(&o.entries(&[])).get(), raw(&fields).get());
    }

    #[test]
    fn reads_strings_decoded_and_leaves_keys_out() {
        let o = Object::parse(r#"{"a":"plain","b":"esc\"aped","c":5,"a":"last","d":1}"#)
            .expect("an object");
        assert!(matches!(o.string("a"), Some(Cow::Borrowed("last"))));
        assert_eq!(o.string("b").as_deref(), Some("esc\"aped"));
        assert_eq!(o.string("c"), None);
        assert_eq!(o.string("missing"), None);
        let kept: Vec<&str> = o.entries(&["b", "d"]).iter().map(|(k, _)| *k).collect();
        assert_eq!(kept, ["a", "c"]);
    }

    /// An object's text written field by field (a key may repeat, as a map never writes it),
    /// with whitespace between every token or none.
    fn object_text(fields: &[(String, Value)], space: &str) -> String {
        let mut out = format!("{space}{{{space}");
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                out.push_str(&format!("{space},{space}"));
            }
            let v = match space.is_empty() {
                true => serde_json::to_string(v).unwrap(),
                false => serde_json::to_string_pretty(v).unwrap(),
            };
            out.push_str(&format!(
                "{}{space}:{space}{v}",
                serde_json::to_string(k).unwrap()
            ));
        }
        out.push_str(&format!("{space}}}{space}"));
        out
    }

    /// Every key of `v`, at any depth.
    fn keys_of(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, v)| {
                out.push(k.clone());
                keys_of(v, out);
            }),
            Value::Array(a) => a.iter().for_each(|v| keys_of(v, out)),
            _ => {}
        }
    }

    /// `text` with every letter of every key `key` written as a `\u` escape.
    fn escaped_key(text: &str, key: &str) -> String {
        let spelled: String = key
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        text.replace(
            &serde_json::to_string(key).unwrap(),
            &format!("\"{spelled}\""),
        )
    }

    proptest! {
        /// A key that is there, at any depth, plainly written or escaped, may be there.
        #[test]
        fn may_hold_key_never_misses_a_key(
            v in arb::value(NAMES),
            other in arb::key(NAMES),
        ) {
            let text = serde_json::to_string(&v).unwrap();
            let mut keys = Vec::new();
            keys_of(&v, &mut keys);
            for key in keys.iter().chain([&other]) {
                let there = keys.contains(key);
                let json = Json::written(&text);
                prop_assert!(!there || json.may_hold_key(key), "{} in {}", key, text);
                let escaped = escaped_key(&text, key);
                prop_assert!(!there || Json::written(&escaped).may_hold_key(key), "{} in {}", key, escaped);
            }
        }
    }

    /// Where no key can be, the quick look says so: a value without the key's text and
    /// without an escape that could spell it.
    #[test]
    fn may_hold_key_rules_out_what_cannot_be_there() {
        let j = Json::written(r#"{"content":[{"type":"text","text":"a\nb \"isErr\""}]}"#);
        assert!(!j.may_hold_key("isError"));
        assert!(
            j.may_hold_key("a/b"),
            "a short escape is there: a slash could be one"
        );
        assert!(Json::written(r#"{"is\u0045rror":true}"#).may_hold_key("isError"));
        assert!(Json::written(r#"{"x":"isError"}"#).may_hold_key("isError"));
        // A slash, a quote or a backslash in a key may be written with a short escape.
        assert!(Json::written(r#"{"a\/b":1}"#).may_hold_key("a/b"));
        assert!(Json::written(r#"{"a\"b":1}"#).may_hold_key("a\"b"));
        assert!(Json::written(r#"{"a\\b":1}"#).may_hold_key("a\\b"));
        assert!(!Json::written(r#"{"ab":1}"#).may_hold_key("a/b"));
    }

    proptest! {
        /// Any object, its keys repeated or escaped, its strings full of what delimits JSON,
        /// compact or spaced: read in place without a check, it holds what serde_json's map of
        /// it holds, and so does each field that is an object itself.
        #[test]
        fn any_object_reads_in_place_as_its_map(
            fields in prop::collection::vec((arb::key(NAMES), arb::value(NAMES)), 0..8),
            repeat in any::<prop::sample::Index>(),
            space in prop::sample::select(vec!["", " ", "\n\t ", "\r\n"]),
        ) {
            let mut fields = fields;
            if !fields.is_empty() {
                let again = fields[repeat.index(fields.len())].0.clone();
                fields.push((again, Value::from("again")));
            }
            let text = object_text(&fields, space);
            let raw: &RawValue = serde_json::from_str(&text).unwrap();
            let f: Fields = serde_json::from_str(&text).unwrap();
            let o = Object::of(raw).unwrap();
            same(&o, &f, &text);
            for (k, v) in &f {
                prop_assert_eq!(Json::of(raw).field(k).map(Json::get), Some(v.get()));
            }
            prop_assert!(Json::of(raw).field("no such key").is_none());
            same(&Object::parse(&text).unwrap(), &f, &text);
            for (k, v) in o.entries(&[]) {
                let inner = serde_json::from_str::<Fields>(v.get()).ok();
                prop_assert_eq!(v.object().is_some(), inner.is_some(), "{}: {}", k, v.get());
                match (v.object(), inner) {
                    (Some(o), Some(f)) => same(&o, &f, v.get()),
                    _ => prop_assert!(v.field(k).is_none(), "{}", v.get()),
                }
                let string = serde_json::from_str::<String>(v.get()).ok();
                prop_assert_eq!(v.string().map(Cow::into_owned), string);
            }
        }
    }
}
