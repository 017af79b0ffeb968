//! Strategies for the wire's property tests: any JSON value, with strings full of what delimits
//! JSON text, and keys that are the router's own names or anything at all.

use proptest::prelude::*;
use serde_json::Value;

/// Any JSON value, nested a few levels; objects' keys come from `names` or anywhere.
pub(super) fn value(names: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".*".prop_map(Value::from),
        prop::sample::select(vec!["\"", "\\", "}", "]", "{\"id\":1}", "\\\"", ",", ":"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::vec((key(names), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// One of `names`, or any string.
pub(super) fn key(names: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![prop::sample::select(names).prop_map(str::to_string), ".*",]
}

/// `bytes` with one byte changed (`edit` 0), dropped (1) or added (2) at `at`, or as it is
/// (3): what the checks of a line are held to serde_json on.
pub(super) fn damage(mut bytes: Vec<u8>, at: prop::sample::Index, edit: u8, byte: u8) -> Vec<u8> {
    let i = at.index(bytes.len() + 1);
    match edit {
        0 if i < bytes.len() => bytes[i] = byte,
        1 if i < bytes.len() => {
            bytes.remove(i);
        }
        2 => bytes.insert(i, byte),
        _ => {}
    }
    bytes
}
