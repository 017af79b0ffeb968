//! The `coogle` tool that the daemon adds to each upstream's tool list (config `coogleTool`,
//! on by default): an agent can see why calls fail (`status`, `info`), restart a wedged child
//! (`restart`), and run a slow call in the background (`start_call`) to fetch later by its
//! operation id (`wait`, `list_operations`, `cancel`) — the async escape hatch for calls that
//! outlive a client's patience.
//!
//! This module owns the tool's definition, argument parsing and the store of operations; the
//! upstream actor runs the calls. An operation belongs to whoever started it, like a task: its
//! owner is the agent's Claude Code session (`CLAUDE_CODE_SESSION_ID`, which survives the
//! shim reconnecting) or else the connection, never mere knowledge of the id. Other owners'
//! operations are invisible: not listed, not waited for, not cancelled.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::SessionId;

pub const TOOL_NAME: &str = "coogle";
/// How long a finished operation's result is kept.
pub const RETENTION: Duration = Duration::from_secs(600);
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
             `wait_ms`). Results are kept {} minutes.",
            RETENTION.as_secs() / 60
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
pub fn inject(result: &RawValue, server: &str) -> Option<Box<RawValue>> {
    let mut fields: indexmap::IndexMap<String, Box<RawValue>> =
        serde_json::from_str(result.get()).ok()?;
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
    Restart { force: bool },
    StartCall { tool: String, arguments: Value },
    Wait { operation: String, wait: Duration },
    ListOperations,
    Cancel { operation: String },
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
                None | Some(Value::Null) => json!({}),
                Some(a @ Value::Object(_)) => a.clone(),
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

/// Who an operation belongs to (see the module doc).
pub type Owner = String;

struct Operation {
    owner: Owner,
    tool: String,
    started: Instant,
    started_at: SystemTime,
    /// The tool result (or a tool result carrying the error), once finished.
    result: Option<Box<RawValue>>,
    finished: Option<Instant>,
}

/// A session waiting for an operation.
pub struct Waiter {
    pub operation: String,
    pub session: SessionId,
    pub client_id: Box<RawValue>,
}

/// The operations of one upstream, with the sessions waiting for them.
#[derive(Default)]
pub struct Operations {
    ops: HashMap<String, Operation>,
    waiters: HashMap<u64, Waiter>,
    deadlines: BTreeSet<(Instant, u64)>,
    next_waiter: u64,
}

pub enum WaitOutcome {
    Done(Box<RawValue>),
    /// Registered; answered on completion or at the deadline.
    Waiting,
    Running,
    Unknown,
}

impl Operations {
    pub fn start(&mut self, tool: &str, owner: &Owner) -> String {
        let id = format!("op-{}", uuid::Uuid::new_v4().simple());
        self.ops.insert(
            id.clone(),
            Operation {
                owner: owner.clone(),
                tool: tool.to_string(),
                started: Instant::now(),
                started_at: SystemTime::now(),
                result: None,
                finished: None,
            },
        );
        id
    }

    /// Record an operation's result; returns the sessions waiting for it.
    pub fn finish(&mut self, operation: &str, result: Box<RawValue>) -> Vec<Waiter> {
        if let Some(op) = self.ops.get_mut(operation) {
            op.result = Some(result);
            op.finished = Some(Instant::now());
        }
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.operation == operation)
            .map(|(id, _)| *id)
            .collect();
        self.deadlines.retain(|(_, id)| !ids.contains(id));
        ids.into_iter()
            .filter_map(|id| self.waiters.remove(&id))
            .collect()
    }

    pub fn wait(&mut self, waiter: Waiter, owner: &Owner, wait: Duration) -> WaitOutcome {
        let Some(op) = self
            .ops
            .get(&waiter.operation)
            .filter(|op| op.owner == *owner)
        else {
            return WaitOutcome::Unknown;
        };
        if let Some(result) = &op.result {
            return WaitOutcome::Done(result.clone());
        }
        if wait.is_zero() {
            return WaitOutcome::Running;
        }
        let id = self.next_waiter;
        self.next_waiter += 1;
        self.deadlines.insert((Instant::now() + wait, id));
        self.waiters.insert(id, waiter);
        WaitOutcome::Waiting
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    /// Waiters whose time is up (to be told "still running"); forgets expired results.
    pub fn expire(&mut self, now: Instant) -> Vec<Waiter> {
        let mut out = Vec::new();
        while let Some(&(t, id)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.deadlines.pop_first();
            out.extend(self.waiters.remove(&id));
        }
        self.ops.retain(|_, op| {
            op.finished
                .is_none_or(|f| now.duration_since(f) < RETENTION)
        });
        out
    }

    pub fn forget_session(&mut self, session: SessionId) {
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.session == session)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            self.waiters.remove(id);
        }
        self.deadlines.retain(|(_, id)| !ids.contains(id));
    }

    /// Whether `owner`'s operation is still running; `None` for an operation that is not
    /// theirs (or not there).
    pub fn is_running(&self, operation: &str, owner: &Owner) -> Option<bool> {
        self.ops
            .get(operation)
            .filter(|op| op.owner == *owner)
            .map(|op| op.result.is_none())
    }

    /// How many operations belong to someone else (for `status`, which shows only counts).
    pub fn others(&self, owner: &Owner) -> usize {
        self.ops.values().filter(|op| op.owner != *owner).count()
    }

    /// How many of someone else's operations are still running.
    pub fn others_running(&self, owner: &Owner) -> usize {
        self.ops
            .values()
            .filter(|op| op.owner != *owner && op.result.is_none())
            .count()
    }

    pub fn list(&self, owner: &Owner) -> Value {
        let mut ops: Vec<(&String, &Operation)> = self
            .ops
            .iter()
            .filter(|(_, op)| op.owner == *owner)
            .collect();
        ops.sort_by_key(|(_, op)| op.started);
        Value::Array(
            ops.into_iter()
                .map(|(id, op)| {
                    json!({
                        "operation": id,
                        "tool": op.tool,
                        "status": if op.result.is_some() { "done" } else { "running" },
                        "startedAtMs": op.started_at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
                        "runningMs": op.finished.unwrap_or_else(Instant::now).duration_since(op.started).as_millis() as u64,
                    })
                })
                .collect(),
        )
    }
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
        let out = inject(&raw, "google").unwrap();
        let text = out.get();
        assert!(
            text.starts_with(r#"{"tools":[{"name":"a","x":1.50},{"name":"coogle""#),
            "{text}"
        );
        assert!(
            text.ends_with(r#""nextCursor":"c","_meta":{"k":"é"}}"#),
            "{text}"
        );
        assert!(inject(&out, "google").is_none(), "never twice");
        assert!(inject(&RawValue::from_string("{}".into()).unwrap(), "g").is_none());
    }

    #[test]
    fn parses_actions_with_clear_errors() {
        assert_eq!(parse(&json!({"action": "status"})).unwrap(), Action::Status);
        assert_eq!(
            parse(&json!({"action": "start_call", "tool": "echo"})).unwrap(),
            Action::StartCall {
                tool: "echo".into(),
                arguments: json!({})
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

    #[test]
    fn operations_finish_wait_and_expire() {
        let mut ops = Operations::default();
        let me = Owner::from("me");
        let id = ops.start("sleep", &me);
        let w = |op: &str| Waiter {
            operation: op.into(),
            session: 1,
            client_id: RawValue::from_string("7".into()).unwrap(),
        };
        assert!(matches!(
            ops.wait(w(&id), &me, Duration::ZERO),
            WaitOutcome::Running
        ));
        assert!(matches!(
            ops.wait(w("op-nope"), &me, Duration::ZERO),
            WaitOutcome::Unknown
        ));
        assert!(matches!(
            ops.wait(w(&id), &me, Duration::from_secs(60)),
            WaitOutcome::Waiting
        ));
        assert!(ops.next_deadline().is_some());
        let done = ops.finish(&id, RawValue::from_string("{\"ok\":1}".into()).unwrap());
        assert_eq!(done.len(), 1);
        assert!(ops.next_deadline().is_none());
        match ops.wait(w(&id), &me, Duration::ZERO) {
            WaitOutcome::Done(r) => assert_eq!(r.get(), "{\"ok\":1}"),
            _ => panic!("expected the result"),
        }
        // A waiter whose time runs out is handed back; a result past retention is forgotten.
        let other = ops.start("sleep", &me);
        assert!(matches!(
            ops.wait(w(&other), &me, Duration::from_millis(1)),
            WaitOutcome::Waiting
        ));
        let later = Instant::now() + Duration::from_millis(5);
        assert_eq!(ops.expire(later).len(), 1);
        ops.expire(Instant::now() + RETENTION + Duration::from_secs(1));
        assert_eq!(ops.is_running(&id, &me), None);
        assert_eq!(ops.is_running(&other, &me), Some(true));
        assert_eq!(ops.list(&me).as_array().unwrap().len(), 1);
        // Someone else's operation is not there for them.
        let you = Owner::from("you");
        assert_eq!(ops.is_running(&other, &you), None);
        assert!(matches!(
            ops.wait(w(&other), &you, Duration::ZERO),
            WaitOutcome::Unknown
        ));
        assert_eq!(ops.list(&you).as_array().unwrap().len(), 0);
        assert_eq!(ops.others(&you), 1);
    }
}
