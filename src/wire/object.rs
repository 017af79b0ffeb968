//! A JSON object's top-level fields read in place: each key and its value's raw text borrowed
//! from the object's text, nothing copied (only a key written with an escape is decoded into
//! its own string). The daemon reads a few fields of a request's `params` and `_meta`, and of
//! an answer's `result`, on every call; parsing each into a [`Fields`] map (every key and value
//! copied into an allocation of its own, the map built and dropped) was a large part of its
//! work per call (callgrind, issue 22). It must read what [`Fields`] reads: the same texts are
//! objects, the last of a repeated key wins, and [`Object::entries`] lists the keys where the
//! map keeps them (a repeated key at its first place, with its last value).

use std::borrow::Cow;
use std::fmt;

use foldhash::{HashMap, HashMapExt};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[cfg(doc)]
use super::Fields;

/// Up to this many fields, a repeated key is found by a scan (see [`Object::entries`]).
const SCAN_UP_TO: usize = 32;

/// A JSON object's top-level fields, in the order written, borrowed from its text.
#[derive(Debug, Default)]
pub struct Object<'a> {
    fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> Object<'a> {
    /// `text`'s fields, or `None` when it is not exactly one JSON object.
    pub fn parse(text: &'a str) -> Option<Object<'a>> {
        serde_json::from_str(text).ok()
    }

    /// A field's raw value: the last one written under `key`.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
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
        string_text(self.get(key)?)
    }

    /// The fields as [`Fields`] would hold them, less the keys in `leave_out`: each key once,
    /// at the place it was first written, with the value it was last given.
    pub fn entries(&self, leave_out: &[&str]) -> Vec<(&str, &'a RawValue)> {
        let mut out: Vec<(&str, &'a RawValue)> = Vec::with_capacity(self.fields.len());
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
                Some(at) => out[at].1 = v,
                None => {
                    if let Some(index) = &mut index {
                        index.insert(k, out.len());
                    }
                    out.push((k, v));
                }
            }
        }
        out
    }
}

/// A JSON string's text, decoded: borrowed when it has no escape; `None` when it is not a
/// string.
pub fn string_text(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
        && !inner.contains('\\')
    {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

/// Fields to write as one JSON object (`raw(&Entries(…))`): the keys quoted, the values as
/// they are. serde_json trusts what it serialized itself, so the object's text is not parsed
/// again to be checked, as building a raw value from a string would.
pub struct Entries<'e, 'a>(pub &'e [(&'e str, &'a RawValue)]);

impl Serialize for Entries<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Object<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Object<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Most objects the daemon reads have a handful of fields: one allocation.
        let mut fields = Vec::with_capacity(8);
        while let Some(Key(key)) = map.next_key::<Key>()? {
            fields.push((key, map.next_value::<&RawValue>()?));
        }
        Ok(Object { fields })
    }
}

/// A key: borrowed from the text, or decoded when it was written with an escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Fields, raw};

    /// Object reads every text as a `Fields` map does: the same texts refused, each key's
    /// value, the same entries in the same order, and written back to the same text.
    #[test]
    fn reads_what_fields_reads() {
        let texts: &[&str] = &[
            r#"{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#" { "a" : [ 1 , 2 ] , "b" : { "c" : null } } "#,
            r#"{"\u0069d":3,"i\"d":4,"ke\\y":"v\n"}"#,
            r#"{}"#,
            r#"{"a":1,"a":2,"a":3,"b":4}"#,
            r#"[1,2]"#,
            r#""text""#,
            r#"null"#,
            r#"{"a":1"#,
            r#"{"a":1} trailing"#,
            r#"{"a":1,}"#,
            r#""#,
        ];
        for text in texts {
            let (object, fields) = (
                Object::parse(text),
                serde_json::from_str::<Fields>(text).ok(),
            );
            match (object, fields) {
                (Some(o), Some(f)) => {
                    let entries = o.entries(&[]);
                    assert_eq!(entries.len(), f.len(), "{text}");
                    for ((ok, ov), (fk, fv)) in entries.iter().zip(&f) {
                        assert_eq!((*ok, ov.get()), (fk.as_str(), fv.get()), "{text}");
                        assert_eq!(o.get(ok).map(RawValue::get), Some(fv.get()), "{text}");
                        assert!(o.contains_key(ok), "{text}");
                    }
                    assert_eq!(raw(&Entries(&entries)).get(), raw(&f).get(), "{text}");
                }
                (None, None) => {}
                (o, f) => panic!("{text}: Object {:?} but Fields {:?}", o.is_some(), f),
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
        assert_eq!(raw(&Entries(&o.entries(&[]))).get(), raw(&fields).get());
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
}
