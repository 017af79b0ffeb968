//! What `coogle share` will do, decided before any file is touched: which upstream each chosen
//! entry runs behind (one per distinct launch), the upstreams config.json gains, and each
//! entry's replacement. Pure functions on parsed JSON.
//!
//! Naming: an entry whose launch equals a configured upstream's (or one named earlier in the
//! same run) runs behind that upstream. Otherwise the upstream takes the entry's name (made
//! valid for config.json); when that is taken, by another launch or by coogle's own `google`
//! and `search`, the first free of `NAME-2`, `NAME-3`, ... So two projects' `memory` entries
//! with the same launch share `memory`, and a third with other env gets `memory-2`.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::launch::{Launch, server_name};
use super::scan::Candidate;
use crate::setup::client_config::{Change, Plan, get_path, get_path_mut};

/// Names coogle gives its own upstreams; a shared entry never takes them.
const RESERVED: [&str; 2] = ["google", "search"];

/// The upstream a candidate runs behind.
#[derive(Debug, Clone, PartialEq)]
pub struct Assigned {
    pub upstream: String,
    /// True when this run adds it to config.json (with this block).
    pub block: Option<Value>,
}

/// Pick each candidate's upstream, given the config's `servers` (in the native shape).
pub fn assign(candidates: &[&Candidate], servers: &Map<String, Value>) -> Vec<Assigned> {
    let mut known: Vec<(String, Option<Launch>)> = servers
        .iter()
        .map(|(name, block)| (name.clone(), Launch::of_block(block).ok()))
        .collect();
    let mut out = Vec::new();
    for c in candidates {
        if let Some((name, _)) = known.iter().find(|(_, l)| l.as_ref() == Some(&c.launch)) {
            out.push(Assigned {
                upstream: name.clone(),
                block: None,
            });
            continue;
        }
        let base = server_name(c.name());
        let taken = |n: &str| RESERVED.contains(&n) || known.iter().any(|(k, _)| k == n);
        let name = std::iter::once(base.clone())
            .chain((2..).map(|i| format!("{base}-{i}")))
            .find(|n| !taken(n))
            .expect("an unbounded sequence has a free name");
        known.push((name.clone(), Some(c.launch.clone())));
        out.push(Assigned {
            upstream: name,
            block: Some(c.launch.server_block()),
        });
    }
    // The first candidate of a new upstream adds it; the others reuse it.
    let mut seen = Vec::new();
    for a in &mut out {
        if a.block.is_some() && seen.contains(&a.upstream) {
            a.block = None;
        }
        seen.push(a.upstream.clone());
    }
    out
}

/// The entry that runs `upstream` through coogle's shim: the original's keys in their order,
/// `command` and `args` replaced, `env`, `envFile` and `cwd` gone (they belong to the upstream
/// now: a client would load `envFile` into the shim, and the daemon passes no client's
/// environment on), everything else (a `type`, a client's own settings) kept.
pub fn shared_entry(original: &Value, command: &Path, options: &[String], upstream: &str) -> Value {
    let mut args = vec!["mcp".to_owned(), "--server".to_owned(), upstream.to_owned()];
    args.extend(options.iter().cloned());
    let mut out = Map::new();
    let put = |out: &mut Map<String, Value>, k: &str| match k {
        "command" => {
            out.insert(k.into(), json!(command.to_string_lossy()));
        }
        "args" => {
            out.insert(k.into(), json!(args));
        }
        _ => {}
    };
    for (k, v) in original.as_object().into_iter().flatten() {
        match k.as_str() {
            "command" | "args" => put(&mut out, k),
            "env" | "envFile" | "cwd" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !out.contains_key("args") {
        put(&mut out, "args");
    }
    Value::Object(out)
}

/// One entry to rewrite in a file: where, what must still be there, and its replacement.
#[derive(Debug, Clone)]
pub struct Rewrite {
    pub location: Vec<String>,
    pub original: Value,
    pub written: Value,
}

/// The [`Plan`] that rewrites `rewrites` in a document: only entries still equal to the
/// original are touched, so asked again about its own result it changes nothing, and an entry
/// the client changed in between is left to the next run.
pub fn file_plan(rewrites: &[Rewrite]) -> Box<Plan<'_>> {
    Box::new(move |doc: &Value| {
        let mut new = doc.clone();
        let mut changes = Vec::new();
        for r in rewrites {
            if get_path(&new, &r.location) != Some(&r.original) {
                continue;
            }
            if let Some(slot) = get_path_mut(&mut new, &r.location) {
                *slot = r.written.clone();
            }
            changes.push(Change {
                location: r.location.clone(),
                original: Some(r.original.clone()),
                written: r.written.clone(),
                created_parent: false,
            });
        }
        (new, changes)
    })
}

/// config.json with `added` upstreams: the native shape, each added unless a server of that
/// name exists already.
pub fn add_servers(user: &Value, added: &[(String, Value)]) -> Value {
    let mut doc = crate::config::native_shape(user);
    if let Some(servers) = doc.get_mut("servers").and_then(Value::as_object_mut) {
        for (name, block) in added {
            if !servers.contains_key(name) {
                servers.insert(name.clone(), block.clone());
            }
        }
    }
    doc
}

/// config.json without the servers in `remove` that are still as written; returns the new
/// document and the names left because they were edited since. An emptied `servers` goes,
/// leaving the defaults.
pub fn remove_servers(user: &Value, remove: &[(String, Value)]) -> (Value, Vec<String>) {
    let mut doc = user.clone();
    let mut edited = Vec::new();
    let Some(servers) = doc.get_mut("servers").and_then(Value::as_object_mut) else {
        return (doc, edited);
    };
    for (name, block) in remove {
        match servers.get(name) {
            Some(b) if b == block => {
                servers.shift_remove(name);
            }
            Some(_) => edited.push(name.clone()),
            None => {}
        }
    }
    if servers.is_empty()
        && let Some(root) = doc.as_object_mut()
    {
        root.shift_remove("servers");
    }
    (doc, edited)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::client_config::ClientKind;

    fn cand(name: &str, entry: Value) -> Candidate {
        Candidate {
            kind: ClientKind::ClaudeCode,
            path: "/h/.claude.json".into(),
            location: vec!["mcpServers".into(), name.into()],
            launch: Launch::of_entry(&entry).unwrap(),
            entry,
        }
    }

    #[test]
    fn one_upstream_per_launch_and_free_names() {
        let a = cand(
            "memory",
            json!({"command": "npx", "args": ["m"], "env": {"K": "1"}}),
        );
        let b = cand(
            "memory",
            json!({"command": "npx", "args": ["m"], "env": {"K": "1"}}),
        );
        let c = cand(
            "memory",
            json!({"command": "npx", "args": ["m"], "env": {"K": "2"}}),
        );
        let g = cand("google", json!({"command": "other"}));
        let existing = json!({"google": {"command": "uvx"}, "time": {"command": "t"}});
        let out = assign(&[&a, &b, &c, &g], existing.as_object().unwrap());
        let names: Vec<_> = out.iter().map(|a| a.upstream.as_str()).collect();
        assert_eq!(names, ["memory", "memory", "memory-2", "google-2"]);
        let added: Vec<_> = out.iter().map(|a| a.block.is_some()).collect();
        assert_eq!(added, [true, false, true, true]);
        // A configured upstream with the same launch is reused, whatever its name.
        let t = cand("clock", json!({"command": "t"}));
        let out = assign(&[&t], existing.as_object().unwrap());
        assert_eq!(
            out[0],
            Assigned {
                upstream: "time".into(),
                block: None
            }
        );
    }

    #[test]
    fn the_shared_entry_keeps_other_keys_and_drops_env() {
        let original = json!({"type": "stdio", "command": "npx", "args": ["m"],
                              "env": {"TOKEN": "secret"}, "timeout": 5});
        let e = shared_entry(&original, Path::new("/bin/coogle"), &[], "memory");
        assert_eq!(
            e,
            json!({"type": "stdio", "command": "/bin/coogle",
                   "args": ["mcp", "--server", "memory"], "timeout": 5})
        );
        assert!(!e.to_string().contains("secret"));
    }

    #[test]
    fn remove_keeps_edited_servers() {
        let doc = json!({"servers": {"google": {"command": "uvx"}, "m": {"command": "x"},
                                     "n": {"command": "edited"}}});
        let (new, edited) = remove_servers(
            &doc,
            &[
                ("m".into(), json!({"command": "x"})),
                ("n".into(), json!({"command": "n"})),
            ],
        );
        assert_eq!(
            new,
            json!({"servers": {"google": {"command": "uvx"}, "n": {"command": "edited"}}})
        );
        assert_eq!(edited, ["n"]);
    }
}
