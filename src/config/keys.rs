//! The keys config.json may hold, the built-in defaults, and how the user's file merges over
//! them (objects merge key by key, arrays and scalars replace). Unknown keys are kept with the
//! config ([`UnknownKey`], with a "did you mean"), never an error, so a newer config still
//! loads in an older coogle.

use serde_json::{Map, Value, json};

use super::DEFAULT_CALL_TIMEOUT_MS;

pub(super) const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 5000;
pub(super) const DEFAULT_LOG_LEVEL: &str = "info";
pub(super) const DEFAULT_CLAUDE_JSON: &str = "~/.claude.json";
pub(super) const DEFAULT_MCP_SERVER_NAME: &str = "coogle";
pub(super) const DEFAULT_SERVER: &str = "google";

pub(super) const TOP_LEVEL_KEYS: &[&str] = &[
    "socketPath",
    "path",
    "logLevel",
    "maxLineBytes",
    "maxConnections",
    "maxInstances",
    "idleStopMs",
    "shutdownGraceMs",
    "callTimeoutMs",
    "coogleTool",
    "servers",
    "mcp",
    "credentials",
    "search",
];
pub(super) const SEARCH_KEYS: &[&str] = &[
    "apiKey",
    "apiBaseUrl",
    "models",
    "timeoutMs",
    "retryBaseMs",
    "maxRetries",
    "maxConcurrent",
];
pub(super) const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "envFile",
    "passEnv",
    "credentials",
    "maxConcurrent",
    "callTimeoutMs",
    "clientCapabilities",
    "idleStopMs",
    "stateful",
    "sharing",
    "signIn",
];
pub(super) const SIGN_IN_KEYS: &[&str] = &["urlMarker", "accountArgument"];

/// Merge `overlay` into `base`: objects merge key by key, recursively; arrays, scalars and
/// `null` in the overlay replace what was there.
pub(super) fn deep_merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(slot) => deep_merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, overlay) => *slot = overlay,
    }
}

/// The built-in defaults, in the original TypeScript coogle's flat shape: one upstream
/// (`uvx workspace-mcp --tool-tier core`) whose credentials come from `~/.claude.json`.
pub(super) fn defaults() -> Value {
    json!({
        "mcp": {
            "command": "uvx",
            "args": ["workspace-mcp", "--tool-tier", "core"],
        },
        "credentials": {
            "source": "claude-json",
            "claudeJsonPath": DEFAULT_CLAUDE_JSON,
            "mcpServerName": DEFAULT_MCP_SERVER_NAME,
        },
        "callTimeoutMs": DEFAULT_CALL_TIMEOUT_MS,
        "logLevel": DEFAULT_LOG_LEVEL,
    })
}

/// The same user config in the native shape: a flat one's `mcp` and `credentials` (merged over
/// the defaults, as loading does) become `servers.google`, in the place `mcp` had; a config
/// that already has `servers` comes back unchanged. Whoever adds a server must start from this,
/// since a `servers` key makes loading ignore `mcp` and with it the `google` upstream.
pub fn native_shape(user: &Value) -> Value {
    if user.get("servers").is_some_and(|v| !v.is_null()) {
        return user.clone();
    }
    let Some(obj) = user.as_object() else {
        return user.clone();
    };
    let d = defaults();
    let mut google = d["mcp"].clone();
    if let Some(mcp) = obj.get("mcp") {
        deep_merge(&mut google, mcp.clone());
    }
    // A native `google` without `credentials` gets the defaults' block: only the user's own
    // needs writing (merged over the defaults, as the flat shape reads it).
    if let Some(creds) = obj.get("credentials") {
        let mut merged = d["credentials"].clone();
        deep_merge(&mut merged, creds.clone());
        google["credentials"] = merged;
    }
    let servers = json!({ DEFAULT_SERVER: google });
    let mut out = Map::new();
    for (k, v) in obj {
        match k.as_str() {
            "mcp" => {
                out.insert("servers".into(), servers.clone());
            }
            "credentials" | "servers" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !out.contains_key("servers") {
        out.insert("servers".into(), servers);
    }
    Value::Object(out)
}

/// A key config.json holds that coogle does not know: a typo, most often. Named (with the
/// key it most likely meant) by doctor and `coogle reload`, and in the daemon's log; never an
/// error, so a newer config still loads in an older coogle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// The full key path: `servers.time.comand`.
    pub key: String,
    /// The known key at the same place it most resembles: `command`.
    pub did_you_mean: Option<&'static str>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown key {}", self.key)?;
        if let Some(known) = self.did_you_mean {
            write!(f, " (did you mean {known}?)")?;
        }
        Ok(())
    }
}

/// The keys of `obj` not in `known`, as full key paths (`at` is the prefix, e.g. `servers.x.`),
/// each with the known key it most resembles.
pub(super) fn unknown_keys(
    obj: &Map<String, Value>,
    known: &[&'static str],
    at: &str,
) -> Vec<UnknownKey> {
    obj.keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| UnknownKey {
            key: format!("{at}{k}"),
            did_you_mean: closest(k, known),
        })
        .collect()
}

/// The known key a typo most likely meant: clap's rule for subcommands (Jaro similarity above
/// 0.7), case ignored, so `idelStopMs` finds `idleStopMs` and `comand` finds `command`.
fn closest(typed: &str, known: &[&'static str]) -> Option<&'static str> {
    let typed = typed.to_lowercase();
    known
        .iter()
        .map(|k| (strsim::jaro(&typed, &k.to_lowercase()), *k))
        .filter(|(score, _)| *score > 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn defaults_are_the_flat_shape_without_socket_path() {
        let d = defaults();
        assert_eq!(
            d,
            json!({
                "mcp": {"command": "uvx", "args": ["workspace-mcp", "--tool-tier", "core"]},
                "credentials": {"source": "claude-json", "claudeJsonPath": "~/.claude.json", "mcpServerName": "coogle"},
                "callTimeoutMs": 120000,
                "logLevel": "info",
            })
        );
        assert!(d.get("socketPath").is_none());
    }

    /// A flat config and its native shape load as the same upstreams.
    #[test]
    fn native_shape_loads_the_same() {
        for user in [
            json!({}),
            json!({"logLevel": "debug", "mcp": {"args": ["workspace-mcp"], "env": {"A": "1"}},
                   "credentials": {"source": "manual", "clientId": "i", "clientSecret": "s"}}),
            json!({"credentials": {"source": "env"}, "callTimeoutMs": 5000}),
            json!({"servers": {"x": {"command": "x"}}}),
        ] {
            let native = native_shape(&user);
            assert!(native.get("servers").is_some(), "{native}");
            assert!(native.get("mcp").is_none(), "{native}");
            let (a, b) = (from(user.clone()).unwrap(), from(native).unwrap());
            assert_eq!(
                format!("{:?}", a.servers),
                format!("{:?}", b.servers),
                "{user}"
            );
        }
    }

    #[test]
    fn deep_merge_semantics() {
        let mut base = json!({
            "a": {"x": 1, "y": {"deep": true, "keep": 1}},
            "arr": [1, 2, 3],
            "s": "base",
            "n": 5,
            "gone": {"k": 1},
        });
        deep_merge(
            &mut base,
            json!({
                "a": {"y": {"deep": false}, "z": 2},
                "arr": [9],
                "s": {"now": "object"},
                "n": null,
                "new": [1],
            }),
        );
        assert_eq!(
            base,
            json!({
                "a": {"x": 1, "y": {"deep": false, "keep": 1}, "z": 2},
                "arr": [9],
                "s": {"now": "object"},
                "n": null,
                "gone": {"k": 1},
                "new": [1],
            })
        );
        // Key order of the base is kept, new keys come last.
        assert_eq!(
            base.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["a", "arr", "s", "n", "gone", "new"]
        );
        let mut scalar = json!(1);
        deep_merge(&mut scalar, json!({"a": 1}));
        assert_eq!(scalar, json!({"a": 1}));
    }

    #[test]
    fn unknown_keys_are_ignored_and_named() {
        let config = from(json!({"theme": "dark", "mcp": {"extra": 1}})).unwrap();
        assert_eq!(config.servers["google"].command, "uvx");
        let user = json!({"theme": "dark", "logLevel": "x", "servers": {}, "zzz": 1});
        let named = |obj: &Value, known, at| {
            unknown_keys(obj.as_object().unwrap(), known, at)
                .into_iter()
                .map(|u| u.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            named(&user, TOP_LEVEL_KEYS, ""),
            ["unknown key theme", "unknown key zzz"]
        );
        let server = json!({"command": "c", "comand": "typo", "maxConcurrent": 1});
        assert_eq!(
            named(&server, SERVER_KEYS, "servers.g."),
            ["unknown key servers.g.comand (did you mean command?)"]
        );
        let typos = json!({"idelStopMs": 1, "sockePath": "x", "calltimeoutms": 1});
        assert_eq!(
            named(&typos, TOP_LEVEL_KEYS, ""),
            [
                "unknown key idelStopMs (did you mean idleStopMs?)",
                "unknown key sockePath (did you mean socketPath?)",
                "unknown key calltimeoutms (did you mean callTimeoutMs?)"
            ]
        );
    }
}
