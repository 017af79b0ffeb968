//! MCP tasks (protocol 2025-11-25): each task belongs to the session whose request created it,
//! and no other session may see it, fetch its result, cancel it, or answer its requests.
//!
//! This module owns the task → session table and reading task ids out of messages; the router
//! decides what to do with an owner.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::Value;

use crate::daemon::SessionId;
use crate::wire::{KeyLook, Message, raw};

/// The metadata key that ties a server request or notification to a task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// How a request relates to tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskRole {
    None,
    /// Task-augmented (`params.task`): its answer names a task this session now owns.
    Creates,
    /// `tasks/list`: its answer is filtered to the session's own tasks.
    Lists,
}

#[derive(Default)]
pub(super) struct Tasks {
    owners: HashMap<String, SessionId>,
    /// Tasks not known to have ended: the child works on them, so it is not parked.
    running: std::collections::HashSet<String>,
}

impl Tasks {
    pub fn owner(&self, task: &str) -> Option<SessionId> {
        self.owners.get(task).copied()
    }

    /// Record the task a `CreateTaskResult` names as `session`'s.
    pub fn created(&mut self, session: SessionId, answer: &Message) {
        if let Some(task) = created_task_id(answer) {
            self.running.insert(task.clone());
            self.owners.insert(task, session);
        }
    }

    /// A `notifications/tasks/status`: a task that reached a final status has ended.
    pub fn status(&mut self, msg: &Message) {
        let field = |name: &str| {
            msg.params_field(name)
                .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
        };
        if let (Some(task), Some(status)) = (field("taskId"), field("status"))
            && matches!(status.as_str(), "completed" | "failed" | "cancelled")
        {
            self.running.remove(&task);
        }
    }

    /// The tasks `session` owns.
    pub fn of_session(&self, session: SessionId) -> Vec<String> {
        self.owners
            .iter()
            .filter(|(_, o)| **o == session)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// A task the daemon this one replaced knew as `session`'s (running, as far as known).
    pub fn adopt(&mut self, task: String, session: SessionId) {
        self.running.insert(task.clone());
        self.owners.insert(task, session);
    }

    /// Whether the child may still be working on a task.
    pub fn any_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Forget a session's tasks; returns them, so the child can be told to cancel them.
    pub fn remove_session(&mut self, session: SessionId) -> Vec<String> {
        let owned: Vec<String> = self
            .owners
            .iter()
            .filter(|(_, owner)| **owner == session)
            .map(|(t, _)| t.clone())
            .collect();
        for t in &owned {
            self.owners.remove(t);
            self.running.remove(t);
        }
        owned
    }

    /// Keep only `session`'s own tasks in a `tasks/list` answer.
    pub fn filter_list(&self, session: SessionId, msg: &mut Message) {
        let Some(result) = msg.field("result") else {
            return;
        };
        let mut result = match serde_json::from_str::<Value>(result.get()) {
            Ok(r) if r.get("tasks").is_none_or(Value::is_array) => r,
            // Fail closed: a list that cannot be read cannot be filtered, and passed on as it
            // is it would show every session's tasks to this one. The check lets through text
            // serde_json makes no tree of (a lone surrogate, a number past f64, depth past 128).
            _ => {
                tracing::warn!(
                    "a tasks/list answer could not be read to keep only the session's own tasks: answered with none"
                );
                msg.set_field("result", raw(&serde_json::json!({"tasks": []})));
                return;
            }
        };
        if let Some(tasks) = result.get_mut("tasks").and_then(|t| t.as_array_mut()) {
            tasks.retain(|t| {
                t.get("taskId")
                    .and_then(|id| id.as_str())
                    .is_some_and(|id| self.owner(id) == Some(session))
            });
        }
        msg.set_field("result", raw(&result));
    }
}

/// The task a `CreateTaskResult` names.
fn created_task_id(msg: &Message) -> Option<String> {
    // Read in place, after a look for the key: every 2026-07-28 call's answer is read here, and
    // a tree of the whole result was made for this one field (issue 22).
    static TASK: LazyLock<KeyLook> = LazyLock::new(|| KeyLook::new("task"));
    let result = msg.field_json("result")?;
    if !result.may_hold(&TASK) {
        return None;
    }
    let task = result.field("task")?.field("taskId")?;
    task.string().map(Cow::into_owned)
}

/// The task a server request says it belongs to (`params._meta[RELATED_TASK].taskId`).
pub(super) fn related_task(msg: &Message) -> Option<String> {
    let meta: Value = serde_json::from_str(msg.params_field("_meta")?.get()).ok()?;
    meta.get(RELATED_TASK)?
        .get("taskId")?
        .as_str()
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(line: &str) -> Message {
        Message::parse(line.as_bytes()).unwrap()
    }

    #[test]
    fn a_task_is_listed_only_to_its_creator() {
        let mut t = Tasks::default();
        t.created(
            1,
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a"}}}"#),
        );
        t.created(
            2,
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"b"}}}"#),
        );
        let mut list =
            msg(r#"{"jsonrpc":"2.0","id":1,"result":{"tasks":[{"taskId":"a"},{"taskId":"b"}]}}"#);
        t.filter_list(2, &mut list);
        assert_eq!(
            list.field("result").unwrap().get(),
            r#"{"tasks":[{"taskId":"b"}]}"#
        );
        assert_eq!(t.remove_session(1), vec!["a".to_string()]);
        assert_eq!((t.owner("a"), t.owner("b")), (None, Some(2)));
        let req = msg(
            r#"{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"b"}}}}"#,
        );
        assert_eq!(related_task(&req).as_deref(), Some("b"));
    }

    /// The task id is read as the JSON says it: escaped keys and values decoded, the last of
    /// a repeated key, whitespace anywhere, and nothing taken from a result that only mentions
    /// a task. Text serde_json would not make a tree of elsewhere in the result (a lone
    /// surrogate) does not hide the task: the line was checked as serde_json checks a raw value.
    #[test]
    fn a_created_task_is_read_as_the_json_says() {
        let id = |result: &str| {
            created_task_id(&msg(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#
            )))
        };
        assert_eq!(id(r#"{"task":{"taskId":"a"}}"#).as_deref(), Some("a"));
        // No plain `task` anywhere: only the escape can spell it.
        assert_eq!(
            id(r#"{"\u0074ask":{"\u0074askId":"a\"\u0062"}}"#).as_deref(),
            Some("a\"b")
        );
        assert_eq!(
            id(r#" { "task" : { "taskId" : "a" } } "#).as_deref(),
            Some("a")
        );
        assert_eq!(
            id(r#"{"task":{"taskId":"a"},"task":{"taskId":"b"}}"#).as_deref(),
            Some("b")
        );
        assert_eq!(id(r#"{"task":{"taskId":"a"},"task":null}"#), None);
        assert_eq!(
            id(r#"{"task":{"taskId":"a"},"n":"\ud800"}"#).as_deref(),
            Some("a")
        );
        assert_eq!(id(r#"{"content":[{"text":"task taskId"}]}"#), None);
        assert_eq!(id(r#"{"content":[{"task":{"taskId":"a"}}]}"#), None);
        assert_eq!(id(r#"{"task":{"taskId":5}}"#), None);
        assert_eq!(id(r#"{"task":"x"}"#), None);
        assert_eq!(id("null"), None);
        assert_eq!(id(r#"[{"task":{"taskId":"a"}}]"#), None);
    }

    /// A task list that cannot be read to be filtered is answered as empty, never passed on
    /// with every session's tasks in it.
    #[test]
    fn an_unreadable_task_list_shows_no_one_elses_tasks() {
        let mut t = Tasks::default();
        t.created(
            2,
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"b"}}}"#),
        );
        for result in [
            r#"{"tasks":[{"taskId":"a","statusMessage":"\ud800"},{"taskId":"b"}]}"#,
            r#"{"tasks":{"taskId":"a"}}"#,
        ] {
            let mut list = msg(&format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#));
            t.filter_list(1, &mut list);
            assert_eq!(
                list.field("result").unwrap().get(),
                r#"{"tasks":[]}"#,
                "{result}"
            );
        }
    }

    /// A task the child may still work on keeps it from being parked until it ends.
    #[test]
    fn a_task_runs_until_a_final_status_or_its_session_leaves() {
        let mut t = Tasks::default();
        assert!(!t.any_running());
        t.created(
            1,
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a","status":"working"}}}"#),
        );
        assert!(t.any_running());
        let status = |s: &str| {
            msg(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{{"taskId":"a","status":"{s}"}}}}"#
            ))
        };
        t.status(&status("input_required"));
        assert!(t.any_running(), "still working");
        t.status(&status("completed"));
        assert!(!t.any_running());
        t.created(
            1,
            &msg(r#"{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"b"}}}"#),
        );
        t.remove_session(1);
        assert!(!t.any_running(), "its session's leaving cancels it");
    }
}
