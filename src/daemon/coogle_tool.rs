//! The `coogle` tool that the daemon adds to each upstream's tool list (config `coogleTool`,
//! on by default): an agent can see why calls fail (`status`, `info`), restart a wedged child
//! (`restart`), and run a slow call in the background (`start_call`) to fetch later by its
//! operation id (`wait`, `list_operations`, `cancel`) — the async escape hatch for calls that
//! outlive a client's patience.
//!
//! This module owns the tool's definition and argument parsing; the store of operations, and
//! who owns them, is [`super::operations`]; the upstream actor runs the calls.

use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::operations::{MAX_FINISHED_PER_OWNER, RETENTION};

pub const TOOL_NAME: &str = "coogle";
/// The longest a `wait` may block.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// The tool's definition for `server`.
pub fn definition(server: &str) -> Value {
    json!({
        "name": TOOL_NAME,
        "title": "coogle: the shared server's control",
        "description": format!(
            "Inspect and control the `{server}` MCP server that coogle shares among agent sessions. \
             Use `status` when calls fail or hang (state, queue, last error, Google sign-in needed), \
             `restart` to restart a wedged server, `info` for versions. For a call that may take \
             longer than you can wait, use `start_call` with `tool` and `arguments`: it returns an \
             operation id at once; fetch the result later with `wait` (`operation`, optional \
             `wait_ms`). Results are kept {} minutes, the newest {} of a session.",
            RETENTION.as_secs() / 60,
            MAX_FINISHED_PER_OWNER
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["status", "info", "restart", "start_call", "wait", "list_operations", "cancel"],
                    "description": "What to do"
                },
                "tool": {"type": "string", "description": "start_call: the tool to call"},
                "force": {"type": "boolean", "description": "restart: even while other sessions have calls in flight (they fail)"},
                "arguments": {"type": "object", "description": "start_call: the tool's arguments"},
                "operation": {"type": "string", "description": "wait, cancel: the operation id"},
                "wait_ms": {
                    "type": "integer", "minimum": 0, "maximum": MAX_WAIT.as_millis() as u64,
                    "description": "wait: how long to wait for the result (default 0: answer at once)"
                }
            },
            "required": ["action"]
        },
        "annotations": {"title": "coogle", "readOnlyHint": false, "destructiveHint": false, "openWorldHint": false}
    })
}

/// Append the tool to a `tools/list` result, leaving every other byte of it as it was.
/// `None` when the result is not a tool list or already has a tool of that name.
pub fn inject(result: &str, server: &str) -> Option<Box<RawValue>> {
    let mut fields: crate::wire::Fields = serde_json::from_str(result).ok()?;
    let mut tools: Vec<Box<RawValue>> = serde_json::from_str(fields.get("tools")?.get()).ok()?;
    #[derive(serde::Deserialize)]
    struct Named {
        #[serde(default)]
        name: String,
    }
    let taken = tools
        .iter()
        .any(|t| serde_json::from_str::<Named>(t.get()).is_ok_and(|n| n.name == TOOL_NAME));
    if taken {
        return None;
    }
    tools.push(serde_json::value::to_raw_value(&definition(server)).ok()?);
    fields.insert(
        "tools".into(),
        serde_json::value::to_raw_value(&tools).ok()?,
    );
    serde_json::value::to_raw_value(&fields).ok()
}

/// One action, parsed from the tool's arguments.
#[derive(Debug, PartialEq)]
pub enum Action {
    Status,
    Info,
    Restart {
        force: bool,
    },
    StartCall {
        tool: String,
        arguments: serde_json::Map<String, Value>,
    },
    Wait {
        operation: String,
        wait: Duration,
    },
    ListOperations,
    Cancel {
        operation: String,
    },
}

pub fn parse(arguments: &Value) -> Result<Action, String> {
    let action = arguments.get("action").and_then(Value::as_str).ok_or(
        "`action` is required: status, info, restart, start_call, wait, list_operations or cancel",
    )?;
    let operation = || {
        arguments
            .get("operation")
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(|| format!("`{action}` needs `operation` (the id start_call returned)"))
    };
    Ok(match action {
        "status" => Action::Status,
        "info" => Action::Info,
        "restart" => Action::Restart {
            force: arguments
                .get("force")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        },
        "list_operations" => Action::ListOperations,
        "start_call" => {
            let tool = arguments
                .get("tool")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .ok_or("`start_call` needs `tool`, the name of the tool to call")?;
            if tool == TOOL_NAME {
                return Err("`start_call` runs the server's tools, not coogle itself".into());
            }
            let arguments = match arguments.get("arguments") {
                None | Some(Value::Null) => serde_json::Map::new(),
                Some(Value::Object(a)) => a.clone(),
                Some(_) => return Err("`arguments` must be an object".into()),
            };
            Action::StartCall {
                tool: tool.to_string(),
                arguments,
            }
        }
        "wait" => {
            let ms = match arguments.get("wait_ms") {
                None | Some(Value::Null) => 0,
                Some(v) => v
                    .as_u64()
                    .ok_or("`wait_ms` must be a non-negative integer")?,
            };
            Action::Wait {
                operation: operation()?,
                wait: Duration::from_millis(ms).min(MAX_WAIT),
            }
        }
        "cancel" => Action::Cancel {
            operation: operation()?,
        },
        other => return Err(format!("unknown action {other:?}")),
    })
}

/// A plain tool result with text and structured content.
pub fn result(text: &str, structured: Value) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured})
}

pub fn running(operation: &str) -> Value {
    result(
        &format!("Operation {operation} is still running; call `wait` again later."),
        json!({"operation": operation, "status": "running"}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_appends_once_and_keeps_the_rest_byte_for_byte() {
        let raw = RawValue::from_string(
            r#"{"tools":[{"name":"a","x":1.50}],"nextCursor":"c","_meta":{"k":"é"}}"#.into(),
        )
        .unwrap();
        let out = inject(raw.get(), "google").unwrap();
        let text = out.get();
        assert!(
            text.starts_with(r#"{"tools":[{"name":"a","x":1.50},{"name":"coogle""#),
            "{text}"
        );
        assert!(
            text.ends_with(r#""nextCursor":"c","_meta":{"k":"é"}}"#),
            "{text}"
        );
        assert!(inject(out.get(), "google").is_none(), "never twice");
        assert!(inject("{}", "g").is_none());
    }

    #[test]
    fn parses_actions_with_clear_errors() {
        assert_eq!(parse(&json!({"action": "status"})).unwrap(), Action::Status);
        assert_eq!(
            parse(&json!({"action": "start_call", "tool": "echo"})).unwrap(),
            Action::StartCall {
                tool: "echo".into(),
                arguments: serde_json::Map::new()
            }
        );
        assert_eq!(
            parse(&json!({"action": "wait", "operation": "op-1", "wait_ms": 10_000_000})).unwrap(),
            Action::Wait {
                operation: "op-1".into(),
                wait: MAX_WAIT
            }
        );
        assert!(parse(&json!({})).unwrap_err().contains("action"));
        assert!(
            parse(&json!({"action": "wait"}))
                .unwrap_err()
                .contains("operation")
        );
        assert!(
            parse(&json!({"action": "start_call"}))
                .unwrap_err()
                .contains("tool")
        );
        assert!(parse(&json!({"action": "start_call", "tool": "coogle"})).is_err());
        assert!(parse(&json!({"action": "start_call", "tool": "x", "arguments": 3})).is_err());
        assert!(
            parse(&json!({"action": "fly"}))
                .unwrap_err()
                .contains("fly")
        );
    }
}
