//! The two protocol eras, and the bridge between them.
//!
//! Handshake era (up to 2025-11-25): a connection starts with `initialize`, and what the client
//! can do, its log level and its subscriptions are connection state. 2026-07-28: every request
//! carries its version, client info and capabilities in `params._meta` (the envelope), the
//! server answers `server/discover`, and server→client requests became `input_required`
//! results. A child speaks one era for its whole life (the official SDKs lock it on the first
//! request), and sessions of either era share it. This module owns the translation rules: the
//! envelope the daemon puts on a request made for a handshake-era session (or for itself), the
//! `initialize` answer built from a DiscoverResult, the version a session is answered with, and
//! the errors a 2026-07-28 session gets where the child cannot serve it.

use std::sync::LazyLock;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::wire::{self, Object, ObjectText, raw};

pub(crate) use crate::wire::Era;

/// The 2026-07-28 revision, the only modern one so far.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";
/// Handshake-era versions the daemon can answer a session with, oldest first.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub(crate) const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// `UnsupportedProtocolVersionError` (2026-07-28): `data: {supported, requested}`.
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;

/// The handshake-era version to answer an `initialize` with: the one the session asked for
/// when the daemon can serve it (known, and not newer than what the child speaks), else the
/// child's.
pub(super) fn negotiate(requested: Option<&str>, child: &str) -> String {
    let rank = |v: &str| HANDSHAKE_VERSIONS.iter().position(|k| *k == v);
    match (requested.and_then(rank), rank(child)) {
        (Some(r), Some(c)) if r <= c => HANDSHAKE_VERSIONS[r].to_string(),
        (Some(r), None) => HANDSHAKE_VERSIONS[r].to_string(),
        _ => child.to_string(),
    }
}

/// The newest handshake-era version, for a session on a 2026-07-28 child.
pub(super) fn latest_handshake() -> &'static str {
    HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1]
}

/// An `initialize` result for a handshake-era session on a 2026-07-28 child, from the child's
/// DiscoverResult: the same capabilities, server info and instructions the child declared.
pub(super) fn initialize_from_discover(discover: &RawValue, version: &str) -> Box<RawValue> {
    let d: Value = serde_json::from_str(discover.get()).unwrap_or(Value::Null);
    let mut capabilities = d.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    if let Some(tools) = capabilities
        .get_mut("tools")
        .and_then(|t| t.as_object_mut())
    {
        // The daemon tells handshake-era sessions when the tools change (it listens for them,
        // and compares the list after every respawn), whatever the child declares for its
        // own streams.
        tools.insert("listChanged".into(), json!(true));
    }
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": d.pointer(&format!("/_meta/{}", META_SERVER_INFO.replace('/', "~1")))
            .cloned()
            .unwrap_or_else(|| json!({"name": "unknown", "version": "0"})),
    });
    if let Some(i) = d.get("instructions") {
        result["instructions"] = i.clone();
    }
    raw(&result)
}

/// The versions a DiscoverResult says the child serves.
pub(super) fn supported_versions(discover: &RawValue) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Supported {
        #[serde(rename = "supportedVersions", default)]
        versions: Vec<String>,
    }
    serde_json::from_str::<Supported>(discover.get())
        .map(|s| s.versions)
        .unwrap_or_default()
}

/// The `-32022` error a request asking for a version the child does not serve gets.
pub(super) fn unsupported_version_line(
    id: &RawValue,
    supported: &[String],
    requested: &str,
) -> Vec<u8> {
    let error = json!({
        "code": UNSUPPORTED_VERSION,
        "message": "Unsupported protocol version",
        "data": {"supported": supported, "requested": requested},
    });
    wire::response_error_line(id, &raw(&error))
}

/// What a 2026-07-28 request gets from a child that speaks only the handshake era: `-32022`
/// naming the versions the child does speak, so a dual-era client falls back to `initialize`
/// and a modern-only one can say why it cannot connect.
pub(super) fn handshake_only_line(
    id: &RawValue,
    server: &str,
    child_version: &str,
    requested: &str,
) -> Vec<u8> {
    let error = json!({
        "code": UNSUPPORTED_VERSION,
        "message": format!(
            "the `{server}` server speaks only the handshake protocol era ({child_version}), not {requested}; connect with initialize"
        ),
        "data": {"supported": [child_version], "requested": requested},
    });
    wire::response_error_line(id, &raw(&error))
}

/// A requester's `initialize` capabilities and client info as JSON text, as the envelope
/// quotes them (`{}` for capabilities never declared).
pub(super) struct EnvelopeText {
    capabilities: Box<RawValue>,
    client_info: Option<Box<RawValue>>,
}

impl EnvelopeText {
    pub fn of(capabilities: Option<&Value>, client_info: Option<&Value>) -> EnvelopeText {
        EnvelopeText {
            capabilities: raw(capabilities.unwrap_or(&json!({}))),
            client_info: client_info.map(raw),
        }
    }
}

/// The envelope the daemon puts on a request it sends to a 2026-07-28 child for someone who
/// did not write one: a handshake-era session (its own `initialize` capabilities and client
/// info, and the level it chose with `logging/setLevel`), or the daemon itself.
pub(super) fn envelope(
    session: &EnvelopeText,
    log_level: Option<u8>,
) -> Vec<(&'static str, &RawValue)> {
    /// The version's JSON text, made once: it is quoted on every request.
    static VERSION: LazyLock<Box<RawValue>> = LazyLock::new(|| raw(MODERN_VERSION));
    let mut fields = Vec::with_capacity(4);
    fields.push((META_VERSION, &**VERSION));
    fields.push((META_CAPABILITIES, &*session.capabilities));
    if let Some(info) = &session.client_info {
        fields.push((META_CLIENT_INFO, &**info));
    }
    if let Some(level) = log_level.and_then(super::log_level::raw_name) {
        fields.push((META_LOG_LEVEL, level));
    }
    fields
}

/// A 2026-07-28 result as a handshake-era client would have had it from a handshake-era child:
/// without the fields that era does not know (`resultType` of a complete result, the cache
/// hints). Every other byte is kept. `None` when it has nothing to leave out.
pub(super) fn handshake_view(result: &RawValue) -> Option<ObjectText> {
    handshake_view_of(&Object::of(result)?)
}

/// [`handshake_view`] of a result already read: `None` when it has nothing to leave out.
/// Written from the result's own parts, so not checked again.
pub(super) fn handshake_view_of(fields: &Object) -> Option<ObjectText> {
    let complete = fields
        .get("resultType")
        .is_some_and(|t| t.get() == "\"complete\"");
    let mut leave_out = Vec::with_capacity(4);
    leave_out.extend(["ttlMs", "cacheScope"]);
    if complete {
        leave_out.push("resultType");
    }
    let mut changed = leave_out.iter().any(|k| fields.contains_key(k));
    // 2026-07-28 servers name themselves in every result's `_meta`; the handshake era did not.
    let meta = fields.object("_meta");
    let mut new_meta = None;
    if let Some(meta) = &meta
        && meta.contains_key(META_SERVER_INFO)
    {
        changed = true;
        let kept = meta.entries(&[META_SERVER_INFO]);
        if kept.is_empty() {
            leave_out.push("_meta");
        } else {
            new_meta = Some(ObjectText::of(&kept));
        }
    }
    if !changed {
        return None;
    }
    let mut entries = fields.entries(&leave_out);
    if let Some(m) = &new_meta
        && let Some(slot) = entries.iter_mut().find(|(k, _)| *k == "_meta")
    {
        slot.1 = m.as_json();
    }
    Some(ObjectText::of(&entries))
}

/// The envelope of a request the daemon makes for itself or a control connection (the
/// `server/discover` probe, its tool lists and housekeeping, `call` and `list_tools`): the
/// capabilities it declares (config's, or those a tool list is revalidated for) and its own
/// client info.
pub(super) fn daemon_envelope(capabilities: &Value) -> Vec<(&'static str, Box<RawValue>)> {
    let text = EnvelopeText::of(Some(capabilities), Some(&daemon_client_info()));
    envelope(&text, None)
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect()
}

/// The daemon's own client info, for requests it makes itself.
pub(super) fn daemon_client_info() -> Value {
    json!({"name": "coogle", "title": "coogle", "version": wire::VERSION})
}

/// The canonical text of a capability set, to key what depends on it (a child's tool list may
/// differ with what the client can do).
pub(super) fn capabilities_key(capabilities: Option<&RawValue>) -> String {
    capabilities
        .and_then(|c| serde_json::from_str::<Value>(c.get()).ok())
        .map(|v| canonical(&v))
        .unwrap_or_else(|| "{}".to_string())
}

/// JSON with object keys sorted, so equal capability sets give equal text.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_gets_the_version_it_asked_when_the_daemon_can_serve_it() {
        assert_eq!(negotiate(Some("2025-03-26"), "2025-11-25"), "2025-03-26");
        assert_eq!(negotiate(Some("2025-11-25"), "2025-06-18"), "2025-06-18");
        assert_eq!(negotiate(Some("1999-01-01"), "2025-11-25"), "2025-11-25");
        assert_eq!(negotiate(None, "2025-11-25"), "2025-11-25");
        assert_eq!(negotiate(Some("2025-06-18"), "2099-01-01"), "2025-06-18");
    }

    #[test]
    fn initialize_is_built_from_what_the_child_discovered() {
        let d = raw(
            &json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": false}}, "instructions": "hi",
            "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "ws", "version": "2.2.1"}}}),
        );
        let init: Value =
            serde_json::from_str(initialize_from_discover(&d, "2025-11-25").get()).unwrap();
        assert_eq!(
            init,
            json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "ws", "version": "2.2.1"}, "instructions": "hi"})
        );
        assert_eq!(supported_versions(&d), vec!["2026-07-28".to_string()]);
    }

    #[test]
    fn a_handshake_view_drops_only_what_that_era_does_not_know() {
        let r = RawValue::from_string(
            r#"{"cacheScope":"private","resultType":"complete","tools":[{"name":"a","x":1.50}],"ttlMs":0,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}"#.into(),
        )
        .unwrap();
        assert_eq!(
            handshake_view(&r).unwrap().get(),
            r#"{"tools":[{"name":"a","x":1.50}]}"#
        );
        let kept = RawValue::from_string(
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{},"k":1}}"#.into(),
        )
        .unwrap();
        assert_eq!(
            handshake_view(&kept).unwrap().get(),
            r#"{"content":[],"_meta":{"k":1}}"#
        );
        let ir = RawValue::from_string(r#"{"resultType":"input_required"}"#.into()).unwrap();
        assert!(handshake_view(&ir).is_none());
    }

    #[test]
    fn capability_keys_ignore_key_order() {
        let a = raw(&json!({"roots": {"listChanged": true}, "elicitation": {"form": {}}}));
        let b = RawValue::from_string(
            r#"{"elicitation":{"form":{}},"roots":{"listChanged":true}}"#.into(),
        )
        .unwrap();
        assert_eq!(capabilities_key(Some(&a)), capabilities_key(Some(&b)));
        assert_ne!(capabilities_key(Some(&a)), capabilities_key(None));
    }
}
