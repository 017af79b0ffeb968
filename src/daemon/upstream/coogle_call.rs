//! The actor's side of the `coogle` tool: each action run against this upstream's state. The
//! tool's definition, argument parsing and the store of operations are in
//! [`crate::daemon::coogle_tool`].

use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::lifecycle::RestartWaiter;
use super::request::Request;
use super::status::status_text;
use super::{Origin, Upstream};
use crate::daemon::SessionId;
use crate::daemon::child;
use crate::daemon::coogle_tool::{self, Action};
use crate::daemon::operations::{self, Owner, WaitOutcome, Waiter};
use crate::daemon::stats::Outcome;
use crate::wire::{self, Json, Message, ToolCallParams, raw, response_line};

impl Upstream {
    pub(super) fn offers_coogle_tool(&self) -> bool {
        self.coogle_tool && !self.cache.upstream_has_coogle
    }

    /// A first-page tool list as sessions see it, when that differs from `result`: with the
    /// `coogle` tool, when it is offered.
    pub(super) fn tools_for_session(&self, result: Json<'_>) -> Option<Box<RawValue>> {
        if !self.offers_coogle_tool() {
            return None;
        }
        coogle_tool::inject(result.get(), &self.name)
    }

    /// A call of the `coogle` tool, answered by the daemon.
    pub(super) fn coogle_call(
        &mut self,
        sid: SessionId,
        client_id: Box<RawValue>,
        arguments: &Value,
    ) {
        self.ops.expire(Instant::now());
        let action = match coogle_tool::parse(arguments) {
            Ok(a) => a,
            Err(e) => {
                let result = wire::tool_error_result(&format!("coogle: {e}"));
                self.send_to_session(sid, response_line(&client_id, &raw(&result)));
                return;
            }
        };
        let owner = self.owner_of(sid);
        let result = match action {
            Action::Status => self.status_result(sid, &owner),
            Action::Info => self.info_result(sid),
            Action::Restart { force } => {
                if let Some(refusal) = self.restart_refusal(sid, &owner, force) {
                    refusal
                } else {
                    self.request_restart(RestartWaiter::Tool {
                        session: sid,
                        client_id,
                    });
                    return;
                }
            }
            Action::StartCall { tool, arguments } => {
                self.start_operation(sid, &owner, &tool, arguments)
            }
            Action::Wait { operation, wait } => {
                let waiter = Waiter {
                    operation: operation.clone(),
                    session: sid,
                    client_id: client_id.clone(),
                };
                match self.ops.wait(waiter, &owner, wait) {
                    WaitOutcome::Done(result) => {
                        self.send_to_session(sid, response_line(&client_id, &result));
                        return;
                    }
                    WaitOutcome::Waiting => return,
                    WaitOutcome::Running => coogle_tool::running(&operation),
                    WaitOutcome::Unknown => wire::tool_error_result(&format!(
                        "coogle: no operation {operation:?} of this session (results are kept {} minutes after they finish, the newest {} of a session)",
                        operations::RETENTION.as_secs() / 60,
                        operations::MAX_FINISHED_PER_OWNER
                    )),
                }
            }
            Action::ListOperations => {
                let list = self.ops.list(&owner);
                let n = list.as_array().map_or(0, Vec::len);
                coogle_tool::result(&format!("{n} operation(s)"), json!({"operations": list}))
            }
            Action::Cancel { operation } => self.cancel_operation(sid, &owner, &operation),
        };
        self.send_to_session(sid, response_line(&client_id, &raw(&result)));
    }

    fn info_result(&self, sid: SessionId) -> Value {
        let command = child::display_command(&self.config);
        let info = json!({
            "coogle": wire::VERSION,
            "daemonPid": std::process::id(),
            "server": self.name,
            "command": command,
            "session": sid,
        });
        let text = format!(
            "coogle {} (daemon pid {}), server `{}` ({command}), this session #{sid}",
            wire::VERSION,
            std::process::id(),
            self.name,
        );
        coogle_tool::result(&text, info)
    }

    /// Who a session's operations belong to: its shim process, by the secret token of its
    /// hello (the same after a reconnect), else the connection (see `operations`).
    fn owner_of(&self, sid: SessionId) -> Owner {
        match self.sessions.get(&sid) {
            Some(s) => Owner::of(sid, &s.hello),
            None => Owner::Connection(sid),
        }
    }

    /// A session left. Operations its connection owned can never be asked for again: they go,
    /// and those still running are cancelled upstream. A shim's (by its token) stay for its
    /// reconnect, within their bounds.
    pub(super) fn forget_operations_of(&mut self, owner: &Owner) {
        if !matches!(owner, Owner::Connection(_)) {
            return;
        }
        for op in self.ops.forget_owner(owner) {
            let is_op = |p: &super::inflight::Pending| matches!(&p.origin, Origin::Operation(x) if *x == op);
            if let Some(uid) = self.inflight.find(is_op) {
                self.abandon(uid, "the client disconnected", Outcome::Cancelled);
            }
        }
    }

    /// `status` for one session: everything about the server, this session's own details, and
    /// the others only as counts (their clients, pids and calls are theirs).
    fn status_result(&self, sid: SessionId, owner: &Owner) -> Value {
        let mut status = self.status();
        let others = status.sessions.iter().filter(|s| s.id != sid).count();
        status.sessions.retain(|s| s.id == sid);
        let text = format!(
            "{}\nOther sessions: {others}; their background operations: {}.",
            status_text(&status, others + status.sessions.len()),
            self.ops.others(owner)
        );
        let mut structured = serde_json::to_value(&status).unwrap_or(Value::Null);
        structured["otherSessions"] = json!(others);
        coogle_tool::result(&text, structured)
    }

    /// A restart ends every call the child is working on. Refused, unless forced, while other
    /// sessions have calls queued or in flight, with what it would do to them.
    fn restart_refusal(&self, sid: SessionId, owner: &Owner, force: bool) -> Option<Value> {
        if force {
            return None;
        }
        let status = self.status();
        let theirs: usize = status
            .sessions
            .iter()
            .filter(|s| s.id != sid)
            .map(|s| s.in_flight + s.queued)
            .sum::<usize>()
            + self.ops.others_running(owner);
        (theirs > 0).then(|| {
            wire::tool_error_result(&format!(
                "coogle: not restarted: other sessions have {theirs} call(s) queued or in flight on the `{}` server, and a restart would fail them. Retry when they are done, or pass \"force\": true to restart anyway.",
                self.name
            ))
        })
    }

    fn start_operation(
        &mut self,
        sid: SessionId,
        owner: &Owner,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Value {
        let op = self.ops.start(tool, owner);
        let params = raw(&ToolCallParams {
            name: tool,
            arguments: &arguments,
        });
        let msg = Message::request(raw(&0), "tools/call", params);
        self.forward(sid, Origin::Operation(op.clone()), Request::classify(msg));
        // Refused at once (the queue is full, the daemon is stopping): nothing was started, so
        // nothing is kept, and the refusal is the answer.
        if let Err(refusal) = self.ops.started(&op) {
            return serde_json::from_str(refusal.get())
                .unwrap_or_else(|_| wire::tool_error_result("coogle: the call was refused"));
        }
        coogle_tool::result(
            &format!(
                "Started operation {op} (`{tool}`); fetch its result with action `wait` and operation \"{op}\"."
            ),
            json!({"operation": op, "status": "running"}),
        )
    }

    fn cancel_operation(&mut self, sid: SessionId, owner: &Owner, operation: &str) -> Value {
        if self.ops.is_running(operation, owner) != Some(true) {
            return wire::tool_error_result(&format!(
                "coogle: operation {operation:?} of this session is not running"
            ));
        }
        let is_op = |o: &Origin| matches!(o, Origin::Operation(x) if x == operation);
        if self
            .waiting
            .remove_call(sid, |w| is_op(&w.origin))
            .is_none()
            && let Some(uid) = self.inflight.find(|p| is_op(&p.origin))
        {
            self.abandon(uid, "cancelled with the coogle tool", Outcome::Cancelled);
        }
        let text = format!("coogle: operation {operation} was cancelled");
        self.finish_operation(operation, raw(&wire::tool_error_result(&text)));
        coogle_tool::result(
            &format!("Cancelled operation {operation}."),
            json!({"operation": operation, "status": "cancelled"}),
        )
    }

    pub(super) fn finish_operation(&mut self, op: &str, result: Box<RawValue>) {
        for w in self.ops.finish(op, result.clone()) {
            self.send_to_session(w.session, response_line(&w.client_id, &result));
        }
    }
}
