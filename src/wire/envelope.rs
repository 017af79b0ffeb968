//! The minimal JSON-RPC envelope the router reads: a message as its top-level fields, each kept
//! as raw JSON text, plus the few lines the daemon writes itself. It must never interpret MCP
//! beyond what routing needs: what the router does not touch is written out byte for byte as
//! it came in.

use std::borrow::{Borrow, Cow};

use indexmap::IndexMap;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use super::check;
use super::object::Json;
use super::scan::{bytes_below, bytes_equal};
use super::to_line;
use super::top_fields::{TopFields, Value};

/// JSON-RPC error codes the daemon uses itself.
pub mod rpc_code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Implementation-defined: the upstream is unavailable.
    pub const UPSTREAM_UNAVAILABLE: i64 = -32000;
    /// Implementation-defined: the request timed out.
    pub const REQUEST_TIMEOUT: i64 = -32001;
}

/// A JSON object's fields, in order, each as raw JSON text. Hashed with foldhash, not SipHash:
/// the router builds these maps on every line (SipHash was 14% of the daemon's instructions
/// per call); the seed is still random per process, and every peer is the same user.
pub type Fields = IndexMap<String, Box<RawValue>, foldhash::fast::RandomState>;

/// A JSON-RPC message seen as its top-level fields, each kept as raw JSON text.
///
/// Only `id`, `method` and `params._meta.progressToken` are ever rewritten; every other byte is
/// written back exactly as it was read.
///
/// A message read from a line keeps that line, and its keys and values are borrowed from it:
/// read once, checked once, and not copied (a key and a value of its own for each field were
/// a quarter of the daemon's allocations per call: issue 22). A field the router sets holds its
/// new text; the text it replaced stays in the line while the message lives (a message kept for
/// long, queued or kept for later rounds, is kept as it was read).
pub struct Message {
    read: Read,
}

self_cell::self_cell!(
    /// A line and its top-level fields, borrowed from it.
    struct Read {
        owner: String,
        #[covariant]
        dependent: TopFields,
    }
);

/// The line a message keeps holds at most this many bytes more than twice its fields written
/// out; else the message takes copies of its fields and lets the line go. A line padded with
/// whitespace, or with an earlier value of a key it repeats, would otherwise keep what the
/// fields do not hold for as long as the message is kept (4,096 queued requests of 16 MiB
/// lines of spaces, where the fields were a few bytes).
const LINE_SLACK: usize = 256;

/// The spare room a line's buffer may keep (its reader grows it in steps as a long line
/// arrives): past this it is given back.
const BUFFER_SLACK: usize = 4096;

impl Clone for Message {
    /// A copy whose fields are its own: a copy is edited and sent (each round of a call that
    /// asks for input) while the message it came from is kept as it was read.
    fn clone(&self) -> Message {
        let fields = self.fields();
        let mut copy = TopFields::with_capacity(fields.len());
        for (k, v) in fields.values() {
            copy.insert(top_key(k), v.to_owned_value());
        }
        Message::of(copy)
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.fields().iter()).finish()
    }
}

/// A key of its own: one of the names every message has, without an allocation, or a string.
/// (A key read from a line is borrowed from it, unless it was written with an escape.)
fn top_key<'a>(name: &str) -> Cow<'a, str> {
    const NAMES: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
    match NAMES.iter().find(|n| **n == name) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(name.to_string()),
    }
}

/// Reads a message's fields as serde would read a [`Fields`] map (a repeated key keeps its first
/// place and its last value), borrowed from the line, with room for a usual message's fields.
struct TopFieldsVisitor;

impl<'de> Visitor<'de> for TopFieldsVisitor {
    type Value = TopFields<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopFields<'de>, A::Error> {
        let mut fields = TopFields::with_capacity(6);
        while let Some(TopKey(key)) = map.next_key::<TopKey>()? {
            let value: &'de RawValue = map.next_value()?;
            fields.insert(key, Cow::Borrowed(value));
        }
        Ok(fields)
    }
}

struct TopKey<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for TopKey<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = TopKey<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                key: &'de str,
            ) -> Result<TopKey<'de>, E> {
                Ok(TopKey(Cow::Borrowed(key)))
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<TopKey<'de>, E> {
                Ok(TopKey(top_key(key)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// A message's fields read by serde_json (with [`TopFieldsVisitor`]).
fn serde_fields(text: &str) -> Result<TopFields<'_>, EnvelopeError> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(TopFieldsVisitor)
        .and_then(|f| de.end().map(|()| f))
        .map_err(|e| EnvelopeError::Parse(e.to_string()))
}

/// A message's fields as [`serde_fields`] reads them, found by the wire's own check (see
/// `check.rs`): `None` for any text it does not take whole, which serde_json then reads. Each
/// value is kept as the text it checked, not made a raw value (that would check it again).
fn checked_fields(text: &str) -> Option<TopFields<'_>> {
    let mut fields = TopFields::with_capacity(6);
    check::object_fields(text, |key, value| {
        let value = Value::Written {
            text: Cow::Borrowed(value),
            raw: Default::default(),
        };
        fields.insert(key, value);
    })?;
    Some(fields)
}

/// What a message is, by the JSON-RPC rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("parse error: {0}")]
    Parse(String),
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl EnvelopeError {
    pub fn rpc_code(&self) -> i64 {
        match self {
            EnvelopeError::Parse(_) => rpc_code::PARSE_ERROR,
            EnvelopeError::Invalid(_) => rpc_code::INVALID_REQUEST,
        }
    }
}

impl Message {
    /// A request the daemon writes itself (on behalf of a control connection or a `coogle`
    /// tool operation, or to ask a session for input): `{"jsonrpc":"2.0","id":…,"method":…,
    /// "params":…}`, its params kept byte for byte.
    pub fn request(id: Box<RawValue>, method: &str, params: Box<RawValue>) -> Message {
        let mut fields = TopFields::with_capacity(4);
        fields.insert(top_key("jsonrpc"), Cow::Owned(raw("2.0")));
        fields.insert(top_key("id"), Cow::Owned(id));
        fields.insert(top_key("method"), Cow::Owned(raw(method)));
        fields.insert(top_key("params"), Cow::Owned(params));
        Message::of(fields)
    }

    /// A message of fields that are all its own (no line).
    fn of(fields: TopFields<'static>) -> Message {
        Message {
            read: Read::new(String::new(), |_| fields),
        }
    }

    /// Read a message from a line (a copy of it is kept: see [`parse_owned`](Self::parse_owned)
    /// for a line the caller can give away).
    pub fn parse(line: &[u8]) -> Result<Message, EnvelopeError> {
        let text = std::str::from_utf8(line).map_err(not_utf8)?;
        Message::parse_text(text.to_owned())
    }

    /// Read a message from a line, which it keeps: its fields are borrowed from it.
    pub fn parse_owned(line: Vec<u8>) -> Result<Message, EnvelopeError> {
        let text = String::from_utf8(line).map_err(|e| not_utf8(e.utf8_error()))?;
        Message::parse_text(text)
    }

    fn parse_text(mut text: String) -> Result<Message, EnvelopeError> {
        if !text.trim_start().starts_with('{') {
            // Validate it is JSON at all, to choose between parse error and invalid request.
            return match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
                Ok(_) => Err(EnvelopeError::Invalid(
                    "a message must be a JSON object (batches are not supported)".into(),
                )),
                Err(e) => Err(EnvelopeError::Parse(e.to_string())),
            };
        }
        if text.capacity() - text.len() > BUFFER_SLACK {
            text.shrink_to_fit();
        }
        let read = Read::try_new(text, |text| {
            // Text the wire's own check does not take, serde_json reads: it says what is wrong.
            checked_fields(text).map_or_else(|| serde_fields(text), Ok)
        })?;
        let msg = Message { read };
        let fields = msg.fields();
        if fields
            .text("method")
            .is_some_and(|m| Json::written(m).string().is_none())
        {
            return Err(EnvelopeError::Invalid("method must be a string".into()));
        }
        if !fields.contains_key("method")
            && !fields.contains_key("result")
            && !fields.contains_key("error")
        {
            return Err(EnvelopeError::Invalid(
                "a message needs a method, a result or an error".into(),
            ));
        }
        if msg.read.borrow_owner().len() > 2 * (written_size(fields.iter()) + 2) + LINE_SLACK {
            return Ok(msg.clone());
        }
        Ok(msg)
    }

    fn fields(&self) -> &TopFields<'_> {
        self.read.borrow_dependent()
    }

    /// Set a top-level field to text of its own (a field already there keeps its place).
    fn insert(&mut self, name: &str, value: Box<RawValue>) {
        self.read
            .with_dependent_mut(|_, fields| fields.insert(top_key(name), Cow::Owned(value)));
    }

    /// Set a top-level field to text the wire wrote from parts that are JSON: written out as
    /// it is, never checked for the line (see [`ObjectText`]).
    fn insert_written(&mut self, name: &str, text: String) {
        let value = Value::Written {
            text: Cow::Owned(text),
            raw: Default::default(),
        };
        self.read
            .with_dependent_mut(|_, fields| fields.insert(top_key(name), value));
    }

    pub fn kind(&self) -> Kind {
        if self.fields().contains_key("method") {
            if self.has_id() {
                Kind::Request
            } else {
                Kind::Notification
            }
        } else {
            Kind::Response
        }
    }

    fn has_id(&self) -> bool {
        self.fields().text("id").is_some_and(|id| id != "null")
    }

    /// A method with `"id": null`: neither a proper request (MCP ids are strings or numbers)
    /// nor a notification (those have no id at all).
    pub fn has_null_id(&self) -> bool {
        self.fields().contains_key("method")
            && self.fields().text("id").is_some_and(|id| id == "null")
    }

    pub fn id(&self) -> Option<&RawValue> {
        self.fields().get("id")
    }

    pub fn set_id(&mut self, id: Box<RawValue>) {
        self.insert("id", id);
    }

    pub fn method(&self) -> Option<String> {
        self.field_json("method")
            .and_then(Json::string)
            .map(Cow::into_owned)
    }

    pub fn field(&self, name: &str) -> Option<&RawValue> {
        self.fields().get(name)
    }

    /// A field's text as it is written out: for a field the wire wrote itself
    /// ([`set_field_text`](Self::set_field_text)), without making a raw value of it.
    pub fn field_json(&self, name: &str) -> Option<Json<'_>> {
        self.fields().text(name).map(Json::written)
    }

    pub fn has_field(&self, name: &str) -> bool {
        self.fields().contains_key(name)
    }

    pub fn set_field(&mut self, name: &str, value: Box<RawValue>) {
        self.insert(name, value);
    }

    /// Set a top-level field to an object written from parts (see [`ObjectText`]).
    pub fn set_field_text(&mut self, name: &str, value: ObjectText) {
        self.insert_written(name, value.0);
    }

    pub fn params(&self) -> Option<&RawValue> {
        self.field("params")
    }

    /// `params` parsed as a JSON value (for the few methods the daemon reads).
    pub fn params_value(&self) -> serde_json::Value {
        self.field_json("params")
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// `params._meta.progressToken`, raw.
    pub fn progress_token(&self) -> Option<Box<RawValue>> {
        self.meta_field("progressToken")
    }

    /// Replace `params._meta.progressToken`, leaving every other byte of params as it was.
    pub fn set_progress_token(&mut self, token: Box<RawValue>) {
        self.set_meta_fields(vec![("progressToken", token)]);
    }

    /// Set fields of `params._meta` (creating `params` and `_meta` when absent), leaving every
    /// other byte of params as it was. A `params` that is not an object is left alone.
    pub fn set_meta_fields(&mut self, fields: Vec<(&str, Box<RawValue>)>) {
        self.set_meta_fields_of("params", fields);
    }

    /// `params._meta.<name>`, raw.
    pub fn meta_field(&self, name: &str) -> Option<Box<RawValue>> {
        // Read in place (a copy of `params` and a map of it for every notification was what
        // a child's progress cost: review of session 18).
        let meta = self.field_json("params")?.field("_meta")?;
        meta.field(name).map(Json::to_raw)
    }

    /// Set fields of `<object>._meta` for a top-level object field (`params`, `result`).
    pub fn set_meta_fields_of(&mut self, object: &str, fields: Vec<(&str, Box<RawValue>)>) {
        // Written from parts that are JSON already (see `with_meta_text`): not checked again.
        if let Some(text) = with_meta_text(self.field_json(object), &fields) {
            self.insert_written(object, text);
        }
    }

    /// Remove a field of `params._meta`, and `_meta` itself when that leaves it empty.
    pub fn remove_meta_field(&mut self, name: &str) {
        self.rewrite_object("params", false, |obj| {
            let Some(mut meta) = obj
                .get("_meta")
                .and_then(|m| serde_json::from_str::<Fields>(m.get()).ok())
            else {
                return;
            };
            meta.shift_remove(name);
            if meta.is_empty() {
                obj.shift_remove("_meta");
            } else {
                obj.insert("_meta".to_string(), raw(&meta));
            }
        });
    }

    /// Set top-level fields of `params` (creating it when absent).
    pub fn set_params_fields(&mut self, fields: Vec<(&str, Box<RawValue>)>) {
        self.rewrite_object("params", true, |obj| {
            for (k, v) in fields {
                obj.insert(k.to_string(), v);
            }
        });
    }

    /// For notifications whose params name a token or a request (`progressToken`, `requestId`):
    /// read that top-level params field.
    pub fn params_field(&self, name: &str) -> Option<Box<RawValue>> {
        self.field_json("params")?.field(name).map(Json::to_raw)
    }

    pub fn set_params_field(&mut self, name: &str, value: Box<RawValue>) {
        self.set_params_fields(vec![(name, value)]);
    }

    /// Rewrite a top-level object field in place; with `create`, an absent one starts as `{}`.
    fn rewrite_object(&mut self, field: &str, create: bool, f: impl FnOnce(&mut Fields)) {
        let mut obj: Fields = match self.fields().text(field) {
            Some(v) => match serde_json::from_str(v) {
                Ok(o) => o,
                Err(_) => return,
            },
            None if create => Fields::default(),
            None => return,
        };
        f(&mut obj);
        self.insert(field, raw(&obj));
    }

    /// The `error` of a response, parsed, if it is one.
    pub fn error_message(&self) -> Option<String> {
        let e = self.field_json("error")?;
        let v: serde_json::Value = serde_json::from_str(e.get()).ok()?;
        Some(
            v.get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("error")
                .to_string(),
        )
    }

    pub fn is_error_response(&self) -> bool {
        self.fields().contains_key("error")
    }

    /// The message as one line, with its newline.
    pub fn to_line(&self) -> Vec<u8> {
        self.line_with(&[])
    }

    /// The line a request goes to the child as: what [`to_line`](Self::to_line) would write
    /// after [`set_meta_fields`](Self::set_meta_fields) with `meta` and [`set_id`](Self::set_id)
    /// with `id`, byte for byte, with the message left as it is. The params go straight into
    /// the line ([`with_meta_text`]): no field is rebuilt as a raw value of its own, which
    /// serde_json would parse again to check (that, and the maps, were the daemon's largest
    /// cost per call to a 2026-07-28 child for a handshake-era session: issue 22).
    pub fn child_line(&self, id: &str, meta: &[(&str, impl Borrow<RawValue>)]) -> Vec<u8> {
        let params = match meta.is_empty() {
            true => None,
            false => with_meta_text(self.field_json("params"), meta),
        };
        // `params` before `id`: a field the message lacks is added at the end in this order,
        // as setting `_meta` and then the id added them.
        match &params {
            Some(params) => self.line_with(&[("params", params), ("id", id)]),
            None => self.line_with(&[("id", id)]),
        }
    }

    /// The message as one line, with some top-level fields' text replaced (a field it lacks is
    /// added at the end, as [`set_field`](Self::set_field) adds it).
    fn line_with(&self, replace: &[(&str, &str)]) -> Vec<u8> {
        let size = written_size(self.fields().iter()) + written_size(replace.iter().copied());
        let mut out = String::with_capacity(size + 3);
        let added = replace
            .iter()
            .filter(|(k, _)| !self.fields().contains_key(k))
            .copied();
        push_object(
            &mut out,
            self.fields()
                .iter()
                .map(|(k, v)| {
                    let text = replace
                        .iter()
                        .find(|(r, _)| *r == k)
                        .map_or(v, |(_, text)| *text);
                    (k, text)
                })
                .chain(added),
        );
        out.push('\n');
        out.into_bytes()
    }
}

/// An object's text written from fields whose values are JSON ([`Json`], or another
/// `ObjectText`): JSON by how it was made, so it is not checked again for the line it goes
/// into (serde_json makes a raw value only by checking its text: for a result rewritten on
/// every call, one more pass over all of it).
#[derive(Debug, Clone)]
pub struct ObjectText(String);

impl ObjectText {
    /// `{"key":value,…}`: each key quoted as serde_json quotes it, each value as it is.
    pub fn of(entries: &[(&str, Json<'_>)]) -> ObjectText {
        let size = written_size(entries.iter().map(|(k, v)| (*k, v.get())));
        let mut out = String::with_capacity(size + 2);
        push_object(&mut out, entries.iter().map(|(k, v)| (*k, v.get())));
        ObjectText(out)
    }

    pub fn get(&self) -> &str {
        &self.0
    }

    /// The text as a value of an entry of another object.
    pub fn as_json(&self) -> Json<'_> {
        Json::written(&self.0)
    }

    /// A raw value of its own (checked, as serde_json makes every raw value).
    pub fn into_raw(self) -> Box<RawValue> {
        self.as_json().to_raw()
    }
}

/// The bytes fields take in an object's text, `"key":value,` each (a key's escapes aside):
/// what a line is sized for, and what a message's line is weighed against.
fn written_size<'v>(fields: impl Iterator<Item = (&'v str, &'v str)>) -> usize {
    fields.map(|(k, v)| k.len() + v.len() + 4).sum()
}

/// `{"key":value,…}` of keys quoted as serde_json quotes them and values as they are.
fn push_object<'v>(out: &mut String, entries: impl Iterator<Item = (&'v str, &'v str)>) {
    out.push('{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        if is_plain(k) {
            out.push('"');
            out.push_str(k);
            out.push('"');
        } else {
            // Serializing a &str cannot fail.
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
        }
        out.push(':');
        out.push_str(v);
    }
    out.push('}');
}

/// The text an object field (`params`, `result`; `None` when the message has none) has after
/// [`Message::set_meta_fields_of`] with `fields`, written from its parts. The splice keeps the
/// object's own bytes when it can; otherwise the object and its `_meta` are read in place and
/// written as their maps would write them (a repeated key once, at its first place, with its
/// last value). `None` when nothing changes: a field that is not an object.
fn with_meta_text(
    object: Option<Json<'_>>,
    fields: &[(&str, impl Borrow<RawValue>)],
) -> Option<String> {
    if let Some(text) = object.and_then(|o| splice_meta_text(o, fields)) {
        return Some(text);
    }
    let parsed = match object {
        Some(o) => Some(o.object()?),
        None => None,
    };
    let entries = parsed.as_ref().map(|o| o.entries(&[])).unwrap_or_default();
    let old_meta = entries
        .iter()
        .find(|(k, _)| *k == "_meta")
        .and_then(|(_, m)| m.object());
    let mut meta: Vec<(&str, &str)> = old_meta
        .as_ref()
        .map(|m| {
            m.entries(&[])
                .into_iter()
                .map(|(k, v)| (k, v.get()))
                .collect()
        })
        .unwrap_or_default();
    for (k, v) in fields {
        let v = v.borrow().get();
        match meta.iter_mut().find(|(seen, _)| seen == k) {
            Some(slot) => slot.1 = v,
            None => meta.push((k, v)),
        }
    }
    let mut meta_text = String::new();
    push_object(&mut meta_text, meta.into_iter());
    let size = entries
        .iter()
        .map(|(k, v)| k.len() + v.get().len() + 4)
        .sum::<usize>();
    let mut out = String::with_capacity(size + meta_text.len() + 10);
    let has_meta = entries.iter().any(|(k, _)| *k == "_meta");
    let with_meta = entries
        .iter()
        .map(|(k, v)| (*k, if *k == "_meta" { &meta_text } else { v.get() }))
        .chain((!has_meta).then_some(("_meta", meta_text.as_str())));
    push_object(&mut out, with_meta);
    Some(out)
}

/// A key serde_json writes as it is, between quotes: no quote, backslash or control character
/// to escape (nearly every key of every message). Checked eight bytes at a time: the envelope's
/// keys are 30 to 40 bytes long, and a byte at a time was a tenth of the line's writing.
fn is_plain(key: &str) -> bool {
    let bytes = key.as_bytes();
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        if bytes_below(w, 0x20) | bytes_equal(w, b'"') | bytes_equal(w, b'\\') != 0 {
            return false;
        }
    }
    words
        .remainder()
        .iter()
        .all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// `object` with a `_meta` of `fields` added at its end, written into its text without
/// parsing it into a map and writing it back (on every call to a 2026-07-28 child this was the
/// daemon's largest cost). Only when `object` is an object with no `_meta` key (none can hide
/// behind a `\u` escape: `_meta` needs one to be spelt otherwise) and `fields` names each key
/// once. Everything else of `object` stays as the client wrote it, byte for byte: a key it gave
/// twice stays twice, as the child would have had it from the client directly (the map kept
/// one). `None` means: use the map.
fn splice_meta_text(object: Json<'_>, fields: &[(&str, impl Borrow<RawValue>)]) -> Option<String> {
    let text = object.get().trim();
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    if text.contains("_meta") || text.contains("\\u") {
        return None;
    }
    let names = || fields.iter().map(|(k, _)| *k);
    if names()
        .enumerate()
        .any(|(i, k)| names().skip(i + 1).any(|other| other == k))
    {
        return None;
    }
    let mut out = String::with_capacity(
        text.len()
            + 12
            + fields
                .iter()
                .map(|(k, v)| k.len() + v.borrow().get().len() + 4)
                .sum::<usize>(),
    );
    out.push('{');
    let inner = inner.trim();
    if !inner.is_empty() {
        out.push_str(inner);
        out.push(',');
    }
    out.push_str("\"_meta\":");
    push_object(&mut out, fields.iter().map(|(k, v)| (*k, v.borrow().get())));
    out.push('}');
    // An object's text with one more member of valid JSON after the last: JSON still, so it is
    // not parsed again to be checked.
    Some(out)
}

fn not_utf8(e: std::str::Utf8Error) -> EnvelopeError {
    EnvelopeError::Parse(format!("not UTF-8: {e}"))
}

/// Serialize a value to a boxed raw value (cannot fail for the plain types used here).
pub fn raw<T: Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value)
        .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON"))
}

/// A JSON-RPC success response line.
pub fn response_line(id: &RawValue, result: &RawValue) -> Vec<u8> {
    response_line_json(id, Json::of(result))
}

/// A JSON-RPC success response line, its result text known to be JSON.
pub fn response_line_json(id: &RawValue, result: Json<'_>) -> Vec<u8> {
    let result = result.get();
    let mut out = Vec::with_capacity(id.get().len() + result.len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(result.as_bytes());
    out.extend_from_slice(b"}\n");
    out
}

/// A JSON-RPC error response line.
pub fn error_line(id: Option<&RawValue>, code: i64, message: &str) -> Vec<u8> {
    let error = raw(&serde_json::json!({"code": code, "message": message}));
    response_error_line(id.unwrap_or(&raw(&())), &error)
}

/// A JSON-RPC error response line with a whole `error` object (one with `data`, or a child's
/// own error passed on as it was).
pub fn response_error_line(id: &RawValue, error: &RawValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(id.get().len() + error.get().len() + 40);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(b",\"error\":");
    out.extend_from_slice(error.get().as_bytes());
    out.extend_from_slice(b"}\n");
    out
}

/// A JSON-RPC notification line.
pub fn notification_line(method: &str, params: Option<&serde_json::Value>) -> Vec<u8> {
    let mut v = serde_json::json!({"jsonrpc": "2.0", "method": method});
    if let Some(p) = params {
        v["params"] = p.clone();
    }
    to_line(&v)
}

/// A JSON-RPC request line.
pub fn request_line(id: &RawValue, method: &str, params: &serde_json::Value) -> Vec<u8> {
    let mut out = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":", id.get()).into_bytes();
    out.extend_from_slice(&serde_json::to_vec(method).unwrap_or_default());
    out.extend_from_slice(b",\"params\":");
    out.extend_from_slice(&serde_json::to_vec(params).unwrap_or_default());
    out.extend_from_slice(b"}\n");
    out
}

/// `tools/call`'s params for a call the daemon makes itself (a control `call`, a `coogle` tool
/// operation).
#[derive(Debug, Serialize)]
pub struct ToolCallParams<'a> {
    pub name: &'a str,
    pub arguments: &'a serde_json::Map<String, serde_json::Value>,
}

/// A tool result that reports a failure the agent should read (STYLE rule 8).
pub fn tool_error_result(text: &str) -> serde_json::Value {
    serde_json::json!({
        "content": [{"type": "text", "text": text}],
        "isError": true
    })
}

/// The notification the daemon writes last to a session it disconnects, with `params.reason`:
/// the shim reads it (and does not pass it on) to tell the agent what really happened.
pub const DISCONNECTED_NOTICE: &str = "notifications/coogle/disconnected";

/// The daemon's last line to a session before an upgrade in place closes its connection: no
/// request of the session's that is unanswered was started, so the shim sends them all again
/// to the new daemon, and the agent notices nothing. Never forwarded to the client.
pub const HANDOVER_NOTICE: &str = "notifications/coogle/handover";

/// Canonical text of a JSON-RPC id, so the same id written differently (`1`, `1.0` aside:
/// whitespace, escapes) still matches.
pub fn id_key(id: &RawValue) -> String {
    id_key_of(id.get())
}

/// [`id_key`] of an id's JSON text.
pub fn id_key_of(id: &str) -> String {
    // The usual ids (small integers, strings without escapes) are written canonically already:
    // no parse (the shim and the daemon take a key per message).
    if is_canonical_id(id) {
        return id.to_string();
    }
    serde_json::from_str::<serde_json::Value>(id)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| id.to_string())
}

/// Whether `text` is what `Value`'s Display writes for it: an integer of at most 18 digits
/// (no `-0`), or a string with no escape, quote or control character in it.
fn is_canonical_id(text: &str) -> bool {
    let b = text.as_bytes();
    match b {
        [b'"', inner @ .., b'"'] => inner.iter().all(|&c| c >= 0x20 && c != b'"' && c != b'\\'),
        [b'-', digits @ ..] => matches!(digits.first(), Some(b'1'..=b'9')) && all_digits(digits),
        digits => all_digits(digits) && (digits.len() == 1 || digits[0] != b'0'),
    }
}

fn all_digits(b: &[u8]) -> bool {
    !b.is_empty() && b.len() <= 18 && b.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAMES: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

    /// A message's fields as (key, text) pairs, in order.
    fn pairs(fields: &TopFields<'_>) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The wire's own check reads exactly the lines serde_json reads, into the same fields
        /// (repeated keys, escaped keys, whitespace, damaged lines): a line it takes that
        /// serde_json would refuse would reach a child unchecked.
        #[test]
        fn the_wires_check_reads_what_serde_json_reads(
            fields in prop::collection::vec(
                (crate::wire::arb::key(&NAMES), crate::wire::arb::value(&NAMES)), 0..6),
            repeat in any::<bool>(),
            spaced in any::<bool>(),
            at in any::<prop::sample::Index>(),
            edit in 0u8..4,
            byte in prop::sample::select(b"\"\\{}[],: \t\r\x01nt0-e.u".to_vec()),
        ) {
            let sep = if spaced { " , " } else { "," };
            let mut items: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
                .collect();
            if repeat && let Some((k, v)) = fields.first() {
                // The first key again, spaced, with another value.
                items.push(format!("{} : {}", serde_json::to_string(k).unwrap(), !v.is_null()));
            }
            let line = format!("{{{}}}", items.join(sep)).into_bytes();
            let bytes = crate::wire::arb::damage(line, at, edit, byte);
            if let Ok(text) = String::from_utf8(bytes) {
                let checked = checked_fields(&text).map(|f| pairs(&f));
                let serde = serde_fields(&text).ok().map(|f| pairs(&f));
                prop_assert_eq!(checked, serde, "{:?}", text);
            }
        }
    }

    /// A key written with an escape is decoded as serde_json decodes it; one that is a lone
    /// surrogate is left to serde_json, which refuses the line and says why.
    #[test]
    fn escaped_keys_are_read_as_serde_json_reads_them() {
        let ok = r#"{"\u006d\u0065thod":"a","id":1,"x\"y":2}"#;
        let fields = checked_fields(ok).expect("taken");
        assert_eq!(pairs(&fields), pairs(&serde_fields(ok).unwrap()));
        assert_eq!(fields.text("method"), Some(r#""a""#));
        let lone = r#"{"\ud800":1,"method":"a"}"#;
        assert!(checked_fields(lone).is_none());
        let err = Message::parse(lone.as_bytes()).unwrap_err().to_string();
        assert!(err.starts_with("parse error: "), "{err}");
    }

    /// The word-at-a-time check agrees with serde_json on every byte at every place of a word.
    #[test]
    fn a_plain_key_is_one_serde_json_writes_as_it_is() {
        let plain_by_serde = |k: &str| serde_json::to_string(k).unwrap() == format!("\"{k}\"");
        for len in 0..20 {
            for at in 0..len {
                for b in (0u8..=0x7f).chain([0xc3]) {
                    let mut key = vec![b'a'; len];
                    key[at] = b;
                    if b == 0xc3 {
                        // A two-byte character (é) in place of the last two bytes.
                        if at + 1 >= len {
                            continue;
                        }
                        key[at + 1] = 0xa9;
                    }
                    let key = String::from_utf8(key).unwrap();
                    assert_eq!(is_plain(&key), plain_by_serde(&key), "{key:?}");
                }
            }
        }
        assert!(is_plain("io.modelcontextprotocol/clientCapabilities"));
        assert!(!is_plain("io.modelcontextprotocol/client\"Capabilities"));
    }

    /// How `_meta` was set before the fields were written from their parts: spliced into the
    /// text when it could be, else the object and its `_meta` parsed into maps and written back.
    fn set_meta_by_maps(msg: &mut Message, fields: Vec<(&str, Box<RawValue>)>) {
        if let Some(spliced) = msg
            .field_json("params")
            .and_then(|o| splice_meta_text(o, &fields))
            .and_then(|text| RawValue::from_string(text).ok())
        {
            msg.insert("params", spliced);
            return;
        }
        msg.rewrite_object("params", true, |obj| {
            let mut meta: Fields = obj
                .get("_meta")
                .and_then(|m| serde_json::from_str(m.get()).ok())
                .unwrap_or_default();
            for (k, v) in fields {
                meta.insert(k.to_string(), v);
            }
            obj.insert("_meta".to_string(), raw(&meta));
        });
    }

    /// `child_line` writes, byte for byte, what the message's maps write after `_meta` and the
    /// id are set in them, and leaves the message as it was.
    #[test]
    fn child_line_writes_what_the_maps_write() {
        let lines: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"e","_meta":{"progressToken":5,"keep":true}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"odd","params":[1,2]}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"m","params":{"k":"A","b":1,"b":2}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"m","params":{"_meta":5,"a":1}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"m","params":{"_meta":{"a":1,"a":2,"io.modelcontextprotocol/logLevel":"info"}}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"a\"b":1,"_meta":{"c\\d":2}}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"m","params": { "spaced" : [ 1 , 2 ] , "b" : "x" } }"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"m","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"m","params":{"text":"has _meta in it"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","method":"no/id/nor/params"}"#,
            r#"{"method":"m","id":11,"extra":{"z":1},"params":{"a":1},"jsonrpc":"2.0"}"#,
        ];
        let metas: Vec<Vec<(&str, Box<RawValue>)>> = vec![
            vec![],
            vec![("progressToken", raw(&42))],
            vec![
                ("progressToken", raw(&42)),
                ("io.modelcontextprotocol/protocolVersion", raw("2026-07-28")),
                (
                    "io.modelcontextprotocol/clientCapabilities",
                    raw(&serde_json::json!({"roots":{}})),
                ),
                ("io.modelcontextprotocol/logLevel", raw("debug")),
            ],
            vec![("a", raw(&3)), ("q\"uote", raw(&[1, 2]))],
        ];
        for line in lines {
            for meta in &metas {
                let msg = Message::parse(line.as_bytes()).unwrap();
                let before = msg.to_line();
                let mut by_maps = msg.clone();
                if !meta.is_empty() {
                    set_meta_by_maps(&mut by_maps, meta.clone());
                }
                by_maps.set_id(raw(&77));
                let direct = msg.child_line("77", meta);
                assert_eq!(
                    String::from_utf8_lossy(&direct),
                    String::from_utf8_lossy(&by_maps.to_line()),
                    "{line} with {meta:?}"
                );
                serde_json::from_slice::<serde_json::Value>(&direct).expect("the line is JSON");
                assert_eq!(msg.to_line(), before, "{line}: the message was changed");
                // And `set_meta_fields`, written from the parts too, sets what the maps set.
                let mut set = msg.clone();
                let mut set_by_maps = msg.clone();
                if !meta.is_empty() {
                    set.set_meta_fields(meta.clone());
                    set_meta_by_maps(&mut set_by_maps, meta.clone());
                }
                assert_eq!(
                    String::from_utf8_lossy(&set.to_line()),
                    String::from_utf8_lossy(&set_by_maps.to_line()),
                    "set_meta_fields: {line} with {meta:?}"
                );
            }
        }
    }

    /// The shortcut gives the key the parse gives, for ids taken and ids left to the parse.
    #[test]
    fn id_key_shortcut_agrees_with_the_parse() {
        let slow = |t: &str| {
            serde_json::from_str::<serde_json::Value>(t)
                .map(|v| v.to_string())
                .unwrap_or_else(|_| t.to_string())
        };
        for t in [
            "1",
            "0",
            "-1",
            "-0",
            "007",
            "123456789012345678",
            "1234567890123456789012",
            "1.0",
            "1e2",
            "-",
            r#""a""#,
            r#""""#,
            r#""\u0061""#,
            r#""a\"b""#,
            "\"\u{1}\"",
            r#""é ✓""#,
            r#""x y""#,
            "null",
            "true",
            " 1",
            "1 ",
            r#""#,
        ] {
            let raw = RawValue::from_string(t.to_string());
            let Ok(raw) = raw else { continue };
            assert_eq!(id_key(&raw), slow(t), "{t}");
        }
        assert!(is_canonical_id("42") && is_canonical_id(r#""a-1""#));
        assert!(!is_canonical_id("-0") && !is_canonical_id("1.0") && !is_canonical_id(r#""\n""#));
    }

    #[test]
    fn message_round_trips_untouched_fields_byte_for_byte() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"b":1,"a":[1.50,"\u00e9"]},"_meta":{"progressToken":"p1","other":true}}}"#;
        let mut m = Message::parse(line).unwrap();
        assert_eq!(m.kind(), Kind::Request);
        assert_eq!(m.method().as_deref(), Some("tools/call"));
        assert_eq!(m.progress_token().unwrap().get(), "\"p1\"");
        m.set_id(raw(&42u64));
        m.set_progress_token(raw("u42"));
        let out = String::from_utf8(m.to_line()).unwrap();
        assert_eq!(
            out,
            "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{\"b\":1,\"a\":[1.50,\"\\u00e9\"]},\"_meta\":{\"progressToken\":\"u42\",\"other\":true}}}\n"
        );
    }

    /// A request the daemon makes is what a client writing the same line would have sent.
    #[test]
    fn a_request_built_is_the_request_parsed() {
        let params = RawValue::from_string(r#"{"b": 1.50, "a":"\u00e9"}"#.into()).unwrap();
        let built = Message::request(raw(&3), "tools/call", params);
        assert_eq!(built.kind(), Kind::Request);
        assert_eq!(built.method().as_deref(), Some("tools/call"));
        let line = built.to_line();
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"b\": 1.50, \"a\":\"\\u00e9\"}}\n"
        );
        let parsed = Message::parse(line.trim_ascii_end()).unwrap();
        assert_eq!(parsed.to_line(), line);
        let args = serde_json::Map::new();
        let call = raw(&ToolCallParams {
            name: "echo",
            arguments: &args,
        });
        assert_eq!(call.get(), r#"{"name":"echo","arguments":{}}"#);
    }

    #[test]
    fn kinds_and_errors() {
        assert_eq!(
            Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .unwrap()
                .kind(),
            Kind::Notification
        );
        assert_eq!(
            Message::parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#)
                .unwrap()
                .kind(),
            Kind::Response
        );
        assert!(matches!(
            Message::parse(b"{not json"),
            Err(EnvelopeError::Parse(_))
        ));
        assert!(matches!(
            Message::parse(b"[1,2]"),
            Err(EnvelopeError::Invalid(_))
        ));
        assert!(matches!(
            Message::parse(br#"{"id":1}"#),
            Err(EnvelopeError::Invalid(_))
        ));
        assert!(matches!(
            Message::parse(br#"{"id":1,"method":5}"#),
            Err(EnvelopeError::Invalid(_))
        ));
    }

    #[test]
    fn helper_lines_are_valid_json() {
        let id = raw(&"abc");
        for line in [
            response_line(&id, &raw(&serde_json::json!({"x": 1}))),
            error_line(Some(&id), rpc_code::PARSE_ERROR, "bad \"thing\""),
            error_line(None, rpc_code::INVALID_REQUEST, "x"),
            notification_line("notifications/tools/list_changed", None),
            request_line(&id, "ping", &serde_json::json!({})),
        ] {
            let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(v["jsonrpc"], "2.0");
            assert_eq!(*line.last().unwrap(), b'\n');
        }
    }

    #[test]
    fn ids_compare_canonically() {
        assert_eq!(
            id_key(&raw(&1)),
            id_key(&RawValue::from_string("1".into()).unwrap())
        );
        assert_eq!(
            id_key(&RawValue::from_string("\"a\"".into()).unwrap()),
            "\"a\""
        );
        assert_eq!(
            id_key(&RawValue::from_string(" \"\\u0061\"".into()).unwrap()),
            "\"a\""
        );
        assert_ne!(id_key(&raw(&1)), id_key(&raw(&"1")));
    }

    /// What `set_meta_fields_of` gives, by the map (parse, insert, write back): the reference
    /// the splice must match.
    fn by_map(params: &str, fields: &[(&str, &str)]) -> String {
        let mut obj: Fields = serde_json::from_str(params).unwrap();
        let mut meta: Fields = obj
            .get("_meta")
            .and_then(|m| serde_json::from_str(m.get()).ok())
            .unwrap_or_default();
        for (k, v) in fields {
            meta.insert(k.to_string(), RawValue::from_string(v.to_string()).unwrap());
        }
        obj.insert("_meta".to_string(), raw(&meta));
        raw(&obj).get().to_string()
    }

    fn set(params: &str, fields: &[(&str, &str)]) -> String {
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
        let mut msg = Message::parse(line.as_bytes()).unwrap();
        let fields = fields
            .iter()
            .map(|(k, v)| (*k, RawValue::from_string(v.to_string()).unwrap()))
            .collect();
        msg.set_meta_fields(fields);
        msg.params().unwrap().get().to_string()
    }

    /// Parsed with order kept, so keys' order is compared too.
    fn same_json(a: &str, b: &str) -> bool {
        let a: serde_json::Value = serde_json::from_str(a).unwrap();
        let b: serde_json::Value = serde_json::from_str(b).unwrap();
        serde_json::to_string(&a).unwrap() == serde_json::to_string(&b).unwrap()
    }

    /// `_meta` written into the params' text gives the same JSON, keys in the same order, as
    /// the map did, for every shape of params with each key once, and the map is still used
    /// where the text alone cannot tell (a `_meta` already there, perhaps spelt with an escape;
    /// a field given twice).
    #[test]
    fn meta_spliced_into_params_is_what_the_map_gives() {
        let fields = [
            ("io.modelcontextprotocol/version", r#""2026-07-28""#),
            ("progressToken", "7"),
        ];
        for params in [
            r#"{"name":"echo","arguments":{"text":"a \"b\" c"}}"#,
            "{}",
            "{ }",
            r#" { "name" : "echo" } "#,
            r#"{"name":"echo","_meta":{"progressToken":"theirs","other":1}}"#,
            r#"{"name":"echo","\u005fmeta":{"keep":true}}"#,
            r#"{"text":"mentions _meta in a value"}"#,
        ] {
            let got = set(params, &fields);
            let want = by_map(params, &fields);
            assert!(same_json(&got, &want), "{params}: {got} against {want}");
        }
        // The client's own bytes stay, a key it gave twice too (as the child would have had
        // them from the client directly).
        let dup = r#"{"name":"a","name":"b"}"#;
        assert_eq!(
            set(dup, &fields[1..]),
            r#"{"name":"a","name":"b","_meta":{"progressToken":7}}"#
        );
        let twice = [("a", "1"), ("a", "2")];
        let got = set(r#"{"x":1}"#, &twice);
        assert!(same_json(&got, &by_map(r#"{"x":1}"#, &twice)), "{got}");
        assert_eq!(got, r#"{"x":1,"_meta":{"a":2}}"#);
    }

    /// A message read from a line keeps the line, and its fields are the line's own bytes, not
    /// copies (a copy each was a quarter of the daemon's allocations per call: issue 22); a
    /// field that is set, and a copy of the message, hold text of their own.
    #[test]
    fn fields_are_read_in_place_from_the_line() {
        let line =
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e"},"x\u0079":1}"#;
        let mut msg = Message::parse_owned(line.to_vec()).unwrap();
        let owner = msg.read.borrow_owner().as_bytes().as_ptr_range();
        let in_line =
            |m: &Message, name: &str| owner.contains(&m.field_json(name).unwrap().get().as_ptr());
        for name in ["jsonrpc", "id", "method", "params", "xy"] {
            assert!(in_line(&msg, name), "{name}");
        }
        // The keys too, but for the one written with an escape, which is decoded.
        for (key, _) in msg.fields().iter() {
            assert_eq!(owner.contains(&key.as_ptr()), key != "xy", "{key}");
        }
        let copy = msg.clone();
        msg.set_id(raw("a"));
        assert!(!in_line(&msg, "id") && in_line(&msg, "params"));
        assert_eq!(msg.id().unwrap().get(), r#""a""#);
        for name in ["jsonrpc", "id", "method", "params", "xy"] {
            assert!(!in_line(&copy, name), "{name}");
        }
        assert_eq!(
            copy.to_line(),
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"e\"},\"xy\":1}\n"
        );
        assert_eq!(
            msg.to_line(),
            b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"e\"},\"xy\":1}\n"
        );
    }

    /// A line much longer than its fields (padded with whitespace, or with an earlier value of a
    /// key it repeats) is not kept with a message that may be kept for long, nor is a buffer's
    /// spare room: the message holds its fields' copies, as before it kept its line.
    #[test]
    fn a_message_keeps_no_more_than_its_fields_need() {
        let kept = |m: &Message| m.read.borrow_owner().capacity();
        let mut padded =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}"#.to_vec();
        padded.extend(std::iter::repeat_n(b' ', 1 << 20));
        padded.push(b'}');
        let big = "x".repeat(1 << 20);
        let repeated =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":"{big}","params":1}}"#);
        for line in [padded, repeated.into_bytes()] {
            let msg = Message::parse_owned(line.clone()).unwrap();
            assert!(kept(&msg) < 1024, "{}", kept(&msg));
            assert_eq!(msg.to_line(), copy_of(&line).to_line());
        }
        let mut roomy = Vec::with_capacity(1 << 20);
        roomy.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"m"}"#);
        let msg = Message::parse_owned(roomy).unwrap();
        assert!(kept(&msg) < BUFFER_SLACK, "{}", kept(&msg));
        // A usual line is kept as it came.
        let usual = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{"text":"hi"}}}"#;
        let msg = Message::parse_owned(usual.to_vec()).unwrap();
        assert_eq!(msg.read.borrow_owner().as_bytes(), usual);
    }

    /// The message a line makes, every field its own (as a message was before it kept its line).
    fn copy_of(line: &[u8]) -> Message {
        let copy = Message::parse(line).unwrap().clone();
        assert_eq!(copy.read.borrow_owner().capacity(), 0);
        copy
    }

    /// A field set to written text goes into the line as it is, reads back as the same raw
    /// value (made the first time it is asked for), and is carried by a copy; an object of
    /// keys that need escapes is written as serde_json writes its map.
    #[test]
    fn a_written_field_is_written_as_it_is_and_reads_as_its_raw_value() {
        let line = br#"{"jsonrpc":"2.0","id":7,"result":{"a":[1,{"b":"}"}],"drop":1,"k\"ey":"v"}}"#;
        let mut msg = Message::parse(line).unwrap();
        let result = msg.field_json("result").unwrap().object().unwrap();
        let view = ObjectText::of(&result.entries(&["drop"]));
        let expected = r#"{"a":[1,{"b":"}"}],"k\"ey":"v"}"#;
        assert_eq!(view.get(), expected);
        msg.set_field_text("result", view);
        let want = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{expected}}}\n");
        assert_eq!(String::from_utf8(msg.to_line()).unwrap(), want);
        assert_eq!(msg.field_json("result").unwrap().get(), expected);
        assert!(msg.has_field("result") && msg.kind() == Kind::Response);
        assert!(
            !msg.fields().made_raw("result"),
            "written out and looked at without a raw value made"
        );
        let copy = msg.clone();
        assert_eq!(msg.field("result").unwrap().get(), expected);
        assert!(msg.fields().made_raw("result"));
        assert_eq!(String::from_utf8(copy.to_line()).unwrap(), want);
        assert_eq!(copy.field("result").unwrap().get(), expected);
    }
}
