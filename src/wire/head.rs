//! A JSON-RPC message's routing fields read in place: `id`, `method`, `params` and `result`
//! borrowed from the line, nothing copied. The shim reads two lines per tool call (the request
//! and its answer) only to track what is in flight; building a [`Message`] for each (every
//! top-level field copied into its own allocation, keys hashed into a map) was most of the
//! shim's work per call (callgrind, issue 22). It must accept and refuse exactly the lines
//! [`Message::parse`] does, and read the same values (the last of a repeated key wins).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};

use super::{EnvelopeError, Json, Kind, Message};

/// The top-level fields the shim routes by, borrowed from one line.
#[derive(Debug, Default)]
pub struct Head<'a> {
    id: Option<Json<'a>>,
    method: Option<Cow<'a, str>>,
    params: Option<Json<'a>>,
    result: Option<Json<'a>>,
}

impl<'a> Head<'a> {
    /// Read `line`'s routing fields; the same lines fail as with [`Message::parse`].
    pub fn parse(line: &'a [u8]) -> Result<Head<'a>, EnvelopeError> {
        let text = std::str::from_utf8(line)
            .map_err(|e| EnvelopeError::Parse(format!("not UTF-8: {e}")))?;
        // The wire's own check reads it (see `check.rs`); what that does not take, serde_json
        // reads, and anything else (an array, a number, not JSON) Message says, in its words.
        let fields = match checked(text) {
            Some(fields) => fields,
            None => match serde_json::from_str::<RawFields<'a>>(text) {
                Ok(fields) => fields,
                Err(_) => return Err(Message::parse(line).err().unwrap_or_else(not_object)),
            },
        };
        let method = match fields.method {
            None => None,
            Some(raw) => Some(
                raw.string()
                    .ok_or_else(|| EnvelopeError::Invalid("method must be a string".into()))?,
            ),
        };
        if method.is_none() && fields.result.is_none() && !fields.has_error {
            return Err(EnvelopeError::Invalid(
                "a message needs a method, a result or an error".into(),
            ));
        }
        Ok(Head {
            id: fields.id,
            method,
            params: fields.params,
            result: fields.result,
        })
    }

    /// What the message is, by the JSON-RPC rules (as [`Message::kind`]).
    pub fn kind(&self) -> Kind {
        match (&self.method, self.id) {
            (Some(_), Some(id)) if id.get() != "null" => Kind::Request,
            (Some(_), _) => Kind::Notification,
            (None, _) => Kind::Response,
        }
    }

    pub fn id(&self) -> Option<Json<'a>> {
        self.id
    }

    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    pub fn params(&self) -> Option<Json<'a>> {
        self.params
    }

    pub fn result(&self) -> Option<Json<'a>> {
        self.result
    }
}

/// The routing fields found by the wire's own check; `None` for text it does not take whole.
fn checked(text: &str) -> Option<RawFields<'_>> {
    let mut fields = RawFields::default();
    super::check::object_fields(text, |key, value| {
        let value = Some(Json::written(value));
        match &*key {
            "id" => fields.id = value,
            "method" => fields.method = value,
            "params" => fields.params = value,
            "result" => fields.result = value,
            "error" => fields.has_error = true,
            _ => {}
        }
    })?;
    Some(fields)
}

fn not_object() -> EnvelopeError {
    EnvelopeError::Invalid("a message must be a JSON object (batches are not supported)".into())
}

/// The top-level object as its routing fields, each the last of its key.
#[derive(Default)]
struct RawFields<'a> {
    id: Option<Json<'a>>,
    method: Option<Json<'a>>,
    params: Option<Json<'a>>,
    result: Option<Json<'a>>,
    has_error: bool,
}

impl<'de> Deserialize<'de> for RawFields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = RawFields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = RawFields::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Id => fields.id = Some(Json::of(map.next_value()?)),
                Key::Method => fields.method = Some(Json::of(map.next_value()?)),
                Key::Params => fields.params = Some(Json::of(map.next_value()?)),
                Key::Result => fields.result = Some(Json::of(map.next_value()?)),
                Key::Error => {
                    map.next_value::<IgnoredAny>()?;
                    fields.has_error = true;
                }
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// A top-level key, decoded (`"\u0069d"` is `id`) without allocating.
enum Key {
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn texts(f: &RawFields<'_>) -> [Option<String>; 5] {
        let t = |j: Option<Json<'_>>| j.map(|j| j.get().to_string());
        [
            t(f.id),
            t(f.method),
            t(f.params),
            t(f.result),
            f.has_error.then(String::new),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// The check's routing fields are serde_json's, for any line and any damaged line.
        #[test]
        fn checked_fields_are_serde_jsons(
            fields in proptest::collection::vec(
                (crate::wire::arb::key(&["id", "method", "params", "result", "error"]),
                 crate::wire::arb::value(&["id", "method"])), 0..6),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            edit in 0u8..4,
            byte in proptest::sample::select(b"\"\\{}[],: \x01n0-".to_vec()),
        ) {
            let items: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
                .collect();
            let bytes = crate::wire::arb::damage(format!("{{{}}}", items.join(",")).into_bytes(), at, edit, byte);
            if let Ok(text) = String::from_utf8(bytes) {
                let serde = serde_json::from_str::<RawFields<'_>>(&text).ok();
                proptest::prop_assert_eq!(
                    checked(&text).map(|f| texts(&f)),
                    serde.map(|f| texts(&f)),
                    "{:?}", text
                );
            }
        }
    }

    /// Head reads every line as Message does: the same lines refused, the same kind, id,
    /// method, params and result.
    #[test]
    fn reads_what_message_reads() {
        let lines: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\"b"}}}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/list","params":{"cursor":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"odd"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":8,"error":null}"#,
            r#" { "id" : 2 , "method" : "tools\/call" , "params" : [ 1 , 2 ] } "#,
            r#"{"\u0069d":3,"method":"ping"}"#,
            r#"{"id":1,"id":2,"method":"ping","method":"tools/list"}"#,
            r#"{"id":1,"method":5,"method":"ping"}"#,
            r#"{"id":1,"method":"ping","method":5}"#,
            r#"{"id":1,"method":null}"#,
            r#"{"id":1}"#,
            r#"{}"#,
            r#"[{"id":1,"method":"ping"}]"#,
            r#"42"#,
            r#"{"id":1,"method":"ping""#,
            r#"{"id":1,"method":"ping"} trailing"#,
            r#"not json"#,
            r#""#,
        ];
        for line in lines {
            let (head, msg) = (
                Head::parse(line.as_bytes()),
                Message::parse(line.as_bytes()),
            );
            match (head, msg) {
                (Ok(h), Ok(m)) => {
                    assert_eq!(h.kind(), m.kind(), "{line}");
                    assert_eq!(h.id().map(Json::get), m.id().map(RawValue::get), "{line}");
                    assert_eq!(h.method().map(str::to_string), m.method(), "{line}");
                    assert_eq!(
                        h.params().map(Json::get),
                        m.params().map(RawValue::get),
                        "{line}"
                    );
                    assert_eq!(
                        h.result().map(Json::get),
                        m.field("result").map(RawValue::get),
                        "{line}"
                    );
                }
                (Err(h), Err(m)) => assert_eq!(h.to_string(), m.to_string(), "{line}"),
                (h, m) => panic!("{line}: Head {:?} but Message {:?}", h.is_ok(), m.is_ok()),
            }
        }
        let invalid_utf8 = b"{\"id\":1,\"method\":\"\xff\"}";
        assert!(Head::parse(invalid_utf8).is_err() && Message::parse(invalid_utf8).is_err());
    }
}
