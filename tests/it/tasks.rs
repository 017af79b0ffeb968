//! MCP tasks (protocol 2025-11-25) through the daemon, against server-everything: a task is
//! owned by the session that created it and invisible to the others, its status notifications
//! reach only its owner, and the elicitation it asks for is routed to its owner, who answers it.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn init(s: &mut Shim, capabilities: Value) {
    s.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
               "clientInfo": {"name": "tasks-test", "version": "1"}}),
    );
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s.request("ping", json!({}));
}

#[test]
fn tasks_belong_to_their_session_and_their_elicitations_reach_it() {
    let Some(bin) = require_program("mcp-server-everything") else {
        return;
    };
    let env = Env::new();
    env.write_config(&json!({"servers": {"everything": {
        "command": bin, "args": ["stdio"],
        "clientCapabilities": {"roots": {}, "elicitation": {}, "tasks": {}},
    }}}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    init(&mut a, json!({"elicitation": {}, "tasks": {}}));
    init(&mut b, json!({}));

    let created = a.request(
        "tools/call",
        json!({"name": "simulate-research-query",
               "arguments": {"topic": "cats", "ambiguous": true},
               "task": {"ttl": 60000}}),
    );
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no task created: {created}"))
        .to_string();

    // Status notifications reach the owner only.
    let status = a.notification("notifications/tasks/status", Duration::from_secs(10));
    assert_eq!(status["params"]["taskId"], task_id);

    // The task is invisible to B.
    let listed_b = b.request("tasks/list", json!({}));
    assert_eq!(listed_b["result"]["tasks"], json!([]), "{listed_b}");
    let get_b = b.request("tasks/get", json!({"taskId": task_id}));
    assert_eq!(get_b["error"]["code"], -32602, "{get_b}");
    let listed_a = a.request("tasks/list", json!({}));
    assert!(listed_a.to_string().contains(&task_id), "{listed_a}");

    // A waits for the result; the elicitation the task needs is routed to A.
    a.send(&json!({"jsonrpc": "2.0", "id": "result", "method": "tasks/result", "params": {"taskId": task_id}}));
    let elicit = a.notification("elicitation/create", Duration::from_secs(30));
    let id = elicit["id"].clone();
    assert!(
        id.as_str().unwrap().starts_with("coogle-s"),
        "the daemon's own id: {elicit}"
    );
    let choice =
        elicit["params"]["requestedSchema"]["properties"]["interpretation"]["oneOf"][0]["const"]
            .clone();
    let choice = if choice.is_null() {
        json!("cats as pets")
    } else {
        choice
    };
    a.send(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {"interpretation": choice}}}));
    let result = a.response(&json!("result"), Duration::from_secs(60));
    assert!(result.get("result").is_some(), "{result}");
    assert!(result.to_string().contains("cats"), "{result}");

    // B never heard of any of it.
    while let Some(m) = b.recv(Duration::from_millis(300)) {
        assert_ne!(m["method"], "notifications/tasks/status", "{m}");
        assert_ne!(m["method"], "elicitation/create", "{m}");
    }
}
