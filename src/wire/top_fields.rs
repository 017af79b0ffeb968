//! A message's top-level fields, in the order written, each key once: what a [`Message`] is
//! made of. A message has five or six fields and the router looks them up a dozen times per
//! line, so they are kept in one vector and found by a scan: an `IndexMap` hashed every key on
//! each lookup and built a hash table per line (its lookups were 2,000 of the daemon's 42,000
//! instructions per call: issue 22). Past a few dozen fields they move into an `IndexMap`, so
//! that a line of a million keys costs a million steps, not a million squared, and no more
//! memory than it did (an index of its own beside the vector held every key twice).
//!
//! A field's key and value are borrowed from the message's own line where they can be (see
//! [`Message`]): a field the router rewrites holds its new text, owned.

use std::borrow::Cow;
use std::cell::OnceCell;

use indexmap::IndexMap;
use serde_json::value::RawValue;

#[cfg(doc)]
use super::Message;

/// Up to this many fields, a key is found by a scan.
const SCAN_UP_TO: usize = 32;

type Large<'a> = IndexMap<Cow<'a, str>, Value<'a>, foldhash::fast::RandomState>;

/// A field's value.
#[derive(Debug)]
pub(super) enum Value<'a> {
    /// A raw value: read from the line, or set.
    Raw(Cow<'a, RawValue>),
    /// Text known to be JSON: read from the line by the wire's own check (`check.rs`), or
    /// written by the wire from parts that are JSON (see `ObjectText`), and written out as it
    /// is. serde_json makes a raw value of text only by checking it (`RawValue::from_string`),
    /// so one is made the first time the field is read as a raw value, not for every line.
    Written {
        text: Cow<'a, str>,
        raw: OnceCell<Box<RawValue>>,
    },
}

impl<'a> Value<'a> {
    pub(super) fn text(&self) -> &str {
        match self {
            Value::Raw(raw) => raw.get(),
            Value::Written { text, .. } => text,
        }
    }

    fn raw(&self) -> &RawValue {
        match self {
            Value::Raw(raw) => raw,
            Value::Written { text, raw } => raw.get_or_init(|| {
                RawValue::from_string(text.to_string()).unwrap_or_else(|_| {
                    debug_assert!(false, "written text is JSON: {text}");
                    RawValue::from_string("null".into()).expect("null is JSON")
                })
            }),
        }
    }
}

impl Value<'_> {
    /// The same value, owned.
    pub(super) fn to_owned_value(&self) -> Value<'static> {
        match self {
            Value::Raw(raw) => Value::Raw(Cow::Owned(raw.clone().into_owned())),
            Value::Written { text, raw } => Value::Written {
                text: Cow::Owned(text.clone().into_owned()),
                raw: raw.clone(),
            },
        }
    }
}

impl<'a> From<Cow<'a, RawValue>> for Value<'a> {
    fn from(raw: Cow<'a, RawValue>) -> Value<'a> {
        Value::Raw(raw)
    }
}

#[derive(Debug, Default)]
pub(super) struct TopFields<'a> {
    /// The fields while there are at most [`SCAN_UP_TO`].
    few: Vec<(Cow<'a, str>, Value<'a>)>,
    /// All of them once there are more (and `few` is empty).
    many: Option<Box<Large<'a>>>,
}

impl<'a> TopFields<'a> {
    pub(super) fn with_capacity(n: usize) -> TopFields<'a> {
        TopFields {
            few: Vec::with_capacity(n),
            many: None,
        }
    }

    /// Set `key` to `value`: a key already there keeps its place (as a repeated key in JSON
    /// keeps its first place and its last value, and as `IndexMap::insert` does).
    pub(super) fn insert(&mut self, key: Cow<'a, str>, value: impl Into<Value<'a>>) {
        let value = value.into();
        if let Some(many) = &mut self.many {
            many.insert(key, value);
            return;
        }
        if let Some(at) = self.few.iter().position(|(k, _)| same_key(k, &key)) {
            self.few[at].1 = value;
            return;
        }
        self.few.push((key, value));
        if self.few.len() > SCAN_UP_TO {
            let mut many = Large::with_capacity_and_hasher(self.few.len() * 2, Default::default());
            many.extend(std::mem::take(&mut self.few));
            self.many = Some(Box::new(many));
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&RawValue> {
        self.value(key).map(Value::raw)
    }

    /// A field's text, as it is written out.
    pub(super) fn text(&self, key: &str) -> Option<&str> {
        self.value(key).map(Value::text)
    }

    /// Whether a written field has been made a raw value (it is made only when read as one).
    #[cfg(test)]
    pub(super) fn made_raw(&self, key: &str) -> bool {
        matches!(self.value(key), Some(Value::Written { raw, .. }) if raw.get().is_some())
    }

    fn value(&self, key: &str) -> Option<&Value<'a>> {
        match &self.many {
            Some(many) => many.get(key),
            None => self
                .few
                .iter()
                .find(|(k, _)| same_key(k, key))
                .map(|(_, v)| v),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.many.as_ref().map_or(self.few.len(), |m| m.len())
    }

    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// The fields in the order they were first written.
    pub(super) fn values(&self) -> impl Iterator<Item = (&str, &Value<'a>)> {
        let many = self.many.iter().flat_map(|m| m.iter());
        self.few
            .iter()
            .map(|(k, v)| (k, v))
            .chain(many)
            .map(|(k, v)| (k.as_ref(), v))
    }

    /// The fields in the order they were first written, each as its text.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let many = self.many.iter().flat_map(|m| m.iter());
        self.few
            .iter()
            .map(|(k, v)| (k, v))
            .chain(many)
            .map(|(k, v)| (k.as_ref(), v.text()))
    }
}

/// `a == b`, told apart by length and first byte before the bytes are compared: JSON-RPC's
/// keys mostly share a length (`method`, `params`, `result`), and comparing the bytes is a call
/// into the C library, where a lookup is otherwise a few instructions.
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().first() == b.as_bytes().first() && a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Cow<'static, RawValue> {
        Cow::Owned(RawValue::from_string(text.to_string()).unwrap())
    }

    /// A repeated key keeps its first place and its last value, below and above the scan's
    /// limit, and every key is found whichever way it is looked up.
    #[test]
    fn a_repeated_key_keeps_its_place_and_its_last_value() {
        for n in [3, SCAN_UP_TO, SCAN_UP_TO + 1, 5_000] {
            let mut f = TopFields::with_capacity(4);
            for i in 0..n {
                f.insert(Cow::Owned(format!("k{i}")), raw(&i.to_string()));
            }
            f.insert(Cow::Borrowed("k0"), raw("\"last\""));
            f.insert(Cow::Owned(format!("k{}", n - 1)), raw("\"end\""));
            let keys: Vec<&str> = f.iter().map(|(k, _)| k).collect();
            assert_eq!(keys.len(), n, "n = {n}");
            assert_eq!(keys[0], "k0");
            assert_eq!(f.get("k0").unwrap().get(), "\"last\"");
            assert_eq!(f.text("k0"), Some("\"last\""));
            assert_eq!(f.get(&format!("k{}", n - 1)).unwrap().get(), "\"end\"");
            for i in 1..n - 1 {
                assert_eq!(f.get(&format!("k{i}")).unwrap().get(), i.to_string());
            }
            assert!(!f.contains_key("missing"));
            assert!(f.contains_key(&format!("k{}", n / 2)));
        }
    }

    /// A line of many keys: each is looked up through the index, not by a scan of the others
    /// (a scan each would be 10^10 steps here, minutes, not milliseconds).
    #[test]
    fn many_keys_cost_a_step_each() {
        let n = 100_000;
        let started = std::time::Instant::now();
        let mut f = TopFields::with_capacity(4);
        for i in 0..n {
            f.insert(Cow::Owned(format!("k{i}")), raw("1"));
        }
        for i in 0..n {
            f.insert(Cow::Owned(format!("k{i}")), raw("2"));
        }
        assert!(f.iter().all(|(_, v)| v == "2"));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
}
