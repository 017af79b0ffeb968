//! Whole-protocol passthrough checked against server-everything (npm), code nobody here wrote:
//! progress, log messages, paginated resources, prompts and completions arrive as they would
//! directly.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn everything_env() -> Option<Env> {
    let bin = require_program("mcp-server-everything")?;
    let env = Env::new();
    env.write_config(&json!({"servers": {"everything": {"command": bin, "args": ["stdio"], "maxConcurrent": 4}}}));
    Some(env)
}

#[test]
fn progress_and_logging_from_server_everything() {
    let Some(env) = everything_env() else { return };
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    // Both sessions use token "p"; each sees only its own progress.
    for s in [&mut a, &mut b] {
        s.send(
            &json!({"jsonrpc":"2.0","id":"long","method":"tools/call","params":{
            "name":"trigger-long-running-operation","arguments":{"duration":1,"steps":3},
            "_meta":{"progressToken":"p"}}}),
        );
    }
    for s in [&mut a, &mut b] {
        let done = s.response(&json!("long"), Duration::from_secs(30));
        assert!(done.get("result").is_some(), "{done}");
        let progress: Vec<&Value> = s
            .stray
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "{:?}", s.stray);
        assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p"));
    }
    // Simulated logging reaches the sessions as notifications/message.
    a.request("logging/setLevel", json!({"level": "debug"}));
    a.call("toggle-simulated-logging", json!({}));
    let m = a.notification("notifications/message", Duration::from_secs(30));
    assert!(m["params"]["level"].is_string(), "{m}");
    a.call("toggle-simulated-logging", json!({}));
}

#[test]
fn paginated_resources_prompts_and_completions_pass_through() {
    let Some(env) = everything_env() else { return };
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..50 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = s.request("resources/list", params);
        let result = &page["result"];
        assert!(result["resources"].is_array(), "{page}");
        uris.extend(
            result["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["uri"].as_str().unwrap().to_string()),
        );
        cursor = result["nextCursor"].as_str().map(String::from);
        if cursor.is_none() {
            break;
        }
    }
    assert!(uris.len() > 1, "{uris:?}");
    let unique: std::collections::HashSet<&String> = uris.iter().collect();
    assert_eq!(unique.len(), uris.len(), "pages must not repeat");
    let read = s.request("resources/read", json!({"uri": uris[0]}));
    assert!(read["result"]["contents"].is_array(), "{read}");
    let templates = s.request("resources/templates/list", json!({}));
    assert!(
        templates["result"]["resourceTemplates"].is_array(),
        "{templates}"
    );

    let prompts = s.request("prompts/list", json!({}));
    let prompts = prompts["result"]["prompts"].as_array().unwrap().clone();
    assert!(!prompts.is_empty());
    let simple = prompts
        .iter()
        .find(|p| p["arguments"].as_array().is_none_or(|a| a.is_empty()))
        .expect("a prompt without arguments");
    let got = s.request("prompts/get", json!({"name": simple["name"]}));
    assert!(got["result"]["messages"].is_array(), "{got}");
    // Completion for a prompt argument that has one.
    if let Some(p) = prompts
        .iter()
        .find(|p| p["arguments"].as_array().is_some_and(|a| !a.is_empty()))
    {
        let arg = p["arguments"][0]["name"].as_str().unwrap();
        let c = s.request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": p["name"]}, "argument": {"name": arg, "value": ""}}),
        );
        assert!(c["result"]["completion"]["values"].is_array(), "{c}");
    }
}
