//! A message's top-level fields read as a map of the line's pairs would hold them (the
//! `IndexMap` coogle used before `wire/top_fields.rs`): a repeated key at its first place with
//! its last value, every lookup the same, on both sides of the 32 fields where the fields move
//! into a map. From the independent review of session 12, which found the first version held
//! every key twice past 32 fields.

use coogle::wire::Message;
use indexmap::IndexMap;
use proptest::prelude::*;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

fn rv(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_string()).unwrap()
}

/// Every (key, value) of a top-level object in the order written, repeats kept.
fn pairs(text: &str) -> Vec<(String, String)> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("map")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = m.next_key::<String>()? {
                let v: Box<RawValue> = m.next_value()?;
                out.push((k, v.get().to_string()));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    (&mut de).deserialize_map(V).unwrap()
}

/// What the old `IndexMap` made of the line.
fn reference(text: &str) -> IndexMap<String, String> {
    let mut m = IndexMap::new();
    for (k, v) in pairs(text) {
        m.insert(k, v);
    }
    m
}

/// `line` parsed as a `Message`: written back, the pairs the reference holds, in its order; each
/// of `probes` and the reference's keys looked up, the reference's value.
fn check(line: &str, probes: &[String]) {
    let msg = Message::parse(line.as_bytes()).unwrap();
    let want = reference(line);
    let out = msg.to_line();
    let got = pairs(std::str::from_utf8(&out).unwrap().trim_end());
    let want_pairs: Vec<(String, String)> =
        want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want_pairs, "line {line}");
    for p in probes.iter().chain(want.keys()) {
        assert_eq!(
            msg.field(p).map(|v| v.get().to_string()),
            want.get(p).cloned(),
            "probe {p:?} in {line}"
        );
    }
}

/// Keys that collide in the ways that matter: written with an escape and without, empty,
/// differing only after the first byte, sharing a length.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("method".to_string()),
        Just("\\u006dethod".to_string()),
        Just("id".to_string()),
        Just("i\\u0064".to_string()),
        Just("mx".to_string()),
        Just("nethod".to_string()),
        Just("methoe".to_string()),
        Just("é".to_string()),
        Just("\\u00e9".to_string()),
        Just("\\\"".to_string()),
        "[a-c]{0,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    #[test]
    fn a_messages_fields_are_those_of_a_map_of_its_pairs(
        keys in prop::collection::vec(key(), 0..90),
        extra in prop::collection::vec("[a-c]{0,3}", 0..5),
    ) {
        let mut body: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("\"{k}\":\"v{i}\""))
            .collect();
        body.push("\"result\":0".into());
        let line = format!("{{{}}}", body.join(","));
        let probes: Vec<String> = extra
            .into_iter()
            .chain(["method".into(), "".into(), "zzz".into()])
            .collect();
        check(&line, &probes);
    }
}

/// Exactly 32 and 33 distinct fields, then repeats of the first, middle and last; set_field on
/// an existing and a new key once the index exists; child_line adding a missing `id` at the end.
#[test]
fn fields_around_32_are_read_and_rewritten_in_place() {
    for n in [31usize, 32, 33, 34, 65] {
        let mut body: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        for r in [0, n / 2, n - 1] {
            body.push(format!("\"k{r}\":\"again{r}\""));
        }
        body.push("\"method\":\"m\"".to_string());
        let line = format!("{{{}}}", body.join(","));
        check(&line, &["k0".into(), format!("k{n}"), "".into()]);
        let mut msg = Message::parse(line.as_bytes()).unwrap();
        msg.set_field("k1", rv("\"set\""));
        msg.set_field("new", rv("\"added\""));
        msg.set_field("k0", rv("\"set0\""));
        let got = pairs(std::str::from_utf8(&msg.to_line()).unwrap().trim_end());
        assert_eq!(got.len(), n + 2);
        assert_eq!(got[0], ("k0".into(), "\"set0\"".into()));
        assert_eq!(got[1], ("k1".into(), "\"set\"".into()));
        assert_eq!(got[n + 1], ("new".into(), "\"added\"".into()));
        assert_eq!(msg.field("new").unwrap().get(), "\"added\"");
        // A notification (no id) of n fields: the child's line adds id at the end.
        let child = msg.child_line("\"cid\"", &[] as &[(&str, Box<RawValue>)]);
        let got = pairs(std::str::from_utf8(&child).unwrap().trim_end());
        assert_eq!(
            got.last().unwrap(),
            &("id".to_string(), "\"cid\"".to_string()),
            "n={n}"
        );
        assert_eq!(got.len(), n + 3);
        // With an id already there (past the index), it is replaced in place.
        msg.set_id(rv("7"));
        let child = msg.child_line("\"cid\"", &[] as &[(&str, Box<RawValue>)]);
        let got = pairs(std::str::from_utf8(&child).unwrap().trim_end());
        assert_eq!(
            got[n + 2],
            ("id".to_string(), "\"cid\"".to_string()),
            "n={n}"
        );
        assert_eq!(got.len(), n + 3);
    }
}
