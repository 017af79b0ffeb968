//! Routing what the child sends: answers go back to whoever asked, under the id they used;
//! notifications go to the session they concern (progress by token, task status by task,
//! resource updates by subscription, logs by level) or to everyone (list changes); the child's
//! own requests (sampling, elicitation, roots) go to the session whose call caused them, or
//! are answered with an error when that cannot be known. A line that is not JSON-RPC is
//! logged and dropped; it never reaches a session.

use serde_json::json;

use super::inflight::Pending;
use super::tasks::{TaskRole, related_task};
use super::{Internal, Origin, Upstream, log_level};
use crate::daemon::SessionId;
use crate::daemon::stats::Outcome;
use crate::wire::{
    self, ErrorCode, Kind, Message, WireError, error_line, id_key, raw, response_line, rpc_code,
};

impl Upstream {
    pub(super) fn on_child_line(&mut self, line: &[u8]) {
        let mut msg = match Message::parse(line) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(upstream = %self.name, "ignoring a line from the upstream that is not JSON-RPC: {e}");
                return;
            }
        };
        match msg.kind() {
            Kind::Response => {
                let uid = msg
                    .id()
                    .and_then(|id| serde_json::from_str::<u64>(id.get()).ok());
                let Some(p) = uid.and_then(|u| self.inflight.remove(u)) else {
                    tracing::debug!(upstream = %self.name, "dropping a response to no pending request (cancelled or timed out)");
                    return;
                };
                self.complete(p, msg);
            }
            Kind::Request => self.on_server_request(msg),
            Kind::Notification => {
                let method = msg.method().unwrap_or_default();
                self.on_child_notification(&method, &mut msg);
            }
        }
    }

    /// The child answered request `p`: account for it and hand the answer to its origin.
    fn complete(&mut self, p: Pending, mut msg: Message) {
        let latency = p.started.elapsed();
        if p.is_call {
            self.life.consecutive_timeouts = 0;
            let outcome = if msg.is_error_response() || result_is_error(&msg) {
                Outcome::Error
            } else {
                Outcome::Ok
            };
            self.stats.record(outcome, latency);
            self.count_session_outcome(&p.origin, outcome, latency);
            if let Some(account) = &p.account {
                self.track_sign_in(account, &msg);
            }
        }
        match p.origin {
            Origin::Session { id, client_id } => {
                match p.task {
                    TaskRole::Creates => self.tasks.created(id, &msg),
                    TaskRole::Lists => self.tasks.filter_list(id, &mut msg),
                    TaskRole::None => {}
                }
                if p.first_tools_page
                    && let Some(result) = msg.field("result")
                {
                    let listed = self.tools_for_session(result);
                    msg.set_field("result", listed);
                }
                msg.set_id(client_id);
                self.send_to_session(id, msg.to_line());
            }
            Origin::Control(reply) => {
                let result = match msg.field("result") {
                    Some(r) => Ok(r.to_owned()),
                    None => Err(WireError::new(
                        ErrorCode::UpstreamError,
                        msg.error_message()
                            .unwrap_or_else(|| "the upstream answered without a result".into()),
                    )),
                };
                let _ = reply.send(result);
            }
            Origin::Operation(op) => {
                let result = match msg.field("result") {
                    Some(r) => r.to_owned(),
                    None => raw(&wire::tool_error_result(
                        &msg.error_message()
                            .unwrap_or_else(|| "the call failed".into()),
                    )),
                };
                self.finish_operation(&op, result);
            }
            Origin::Internal(Internal::Initialize) => self.on_initialized(&msg),
            Origin::Internal(Internal::ToolsList) => {
                if let Some(result) = msg.field("result") {
                    self.set_tools_cache(result.to_owned());
                }
            }
            Origin::Internal(Internal::Housekeeping) => {
                if let Some(e) = msg.error_message() {
                    tracing::debug!(upstream = %self.name, "the upstream refused a housekeeping request: {e}");
                }
            }
        }
        self.pump();
        self.check_shutdown();
    }

    fn on_child_notification(&mut self, method: &str, msg: &mut Message) {
        match method {
            "notifications/progress" => {
                let token = msg
                    .params_field("progressToken")
                    .and_then(|t| serde_json::from_str::<u64>(t.get()).ok());
                let Some((sid, original)) = token.and_then(|t| self.inflight.progress_owner(t))
                else {
                    return;
                };
                msg.set_params_field("progressToken", original.to_owned());
                self.send_to_session(sid, msg.to_line());
            }
            "notifications/message" => {
                let level = msg
                    .params_field("level")
                    .and_then(|l| serde_json::from_str::<String>(l.get()).ok())
                    .and_then(|l| log_level::rank(&l))
                    .unwrap_or(0);
                self.fan_out_log(level, &msg.to_line());
            }
            "notifications/tasks/status" => {
                let owner = msg
                    .params_field("taskId")
                    .and_then(|t| serde_json::from_str::<String>(t.get()).ok())
                    .and_then(|t| self.tasks.owner(&t));
                if let Some(sid) = owner {
                    self.send_to_session(sid, msg.to_line());
                }
            }
            "notifications/resources/updated" => {
                let uri = msg
                    .params_field("uri")
                    .and_then(|u| serde_json::from_str::<String>(u.get()).ok())
                    .unwrap_or_default();
                let line = msg.to_line();
                for sid in self.subscriptions.subscribers(&uri) {
                    self.send_to_session(sid, line.clone());
                }
            }
            "notifications/cancelled" => {
                // The child cancels a request it sent: the session knows it by the daemon's id.
                let Some(child_key) = msg.params_field("requestId").map(|r| id_key(&r)) else {
                    return;
                };
                let Some((sid, shown)) = self.server_requests.cancelled_by_child(&child_key) else {
                    return;
                };
                msg.set_params_field("requestId", shown);
                self.send_to_session(sid, msg.to_line());
            }
            _ => {
                if method == "notifications/tools/list_changed" {
                    // Serve the next tools/list live, and refresh the cache.
                    self.cache.tools = None;
                    if self.life.is_ready() {
                        self.send_internal(Internal::ToolsList, "tools/list", &json!({}));
                    }
                }
                self.broadcast(&msg.to_line());
            }
        }
    }

    /// A request from the child to a client: to the session whose call caused it, provided its
    /// client declared the capability; else an error to the child.
    fn on_server_request(&mut self, mut msg: Message) {
        let method = msg.method().unwrap_or_default();
        let child_id = msg.id().map(|i| i.to_owned()).unwrap_or_else(|| raw(&()));
        if method == "ping" {
            self.to_child(response_line(&child_id, &raw(&json!({}))));
            return;
        }
        let capability = method.split('/').next().unwrap_or_default();
        let target = self.caller_of(&msg).filter(|id| {
            self.sessions.get(id).is_some_and(|s| {
                s.capabilities
                    .as_ref()
                    .is_some_and(|c| c.get(capability).is_some())
            })
        });
        let Some(sid) = target else {
            let text = format!(
                "coogle: no connected session can answer {method} (the calling session's client does not declare the `{capability}` capability, or the caller is ambiguous)"
            );
            self.to_child(error_line(
                Some(&child_id),
                rpc_code::METHOD_NOT_FOUND,
                &text,
            ));
            return;
        };
        let shown = self.server_requests.insert(sid, child_id);
        msg.set_id(shown);
        self.send_to_session(sid, msg.to_line());
    }

    /// The session that caused a child's request: the owner of the task it names, else the
    /// one session with requests in flight.
    fn caller_of(&self, msg: &Message) -> Option<SessionId> {
        if let Some(owner) = related_task(msg).and_then(|t| self.tasks.owner(&t)) {
            return Some(owner);
        }
        let mut busy = self.inflight.busy_sessions();
        match (busy.next(), busy.next()) {
            (Some(id), None) => Some(id),
            _ => None,
        }
    }

    /// Note what a call's answer says about its account's Google sign-in.
    fn track_sign_in(&mut self, account: &str, answer: &Message) {
        use super::sign_in::{Change, notice_text};
        match self.sign_ins.track(account, answer) {
            Change::Asked(url) => {
                tracing::warn!(upstream = %self.name, account, "Google sign-in required: {url}");
                let data = notice_text(&self.name, &url);
                let params = json!({"level": "warning", "logger": "coogle", "data": data});
                let line = wire::notification_line("notifications/message", Some(&params));
                self.broadcast(&line);
            }
            Change::Done => {
                tracing::info!(upstream = %self.name, account, "signed in: calls work again")
            }
            Change::Nothing => {}
        }
    }

    fn set_tools_cache(&mut self, result: Box<serde_json::value::RawValue>) {
        if self.cache.set_tools(result) {
            self.broadcast(&wire::notification_line(
                "notifications/tools/list_changed",
                None,
            ));
        }
    }
}

/// A `tools/call` result that reports failure.
fn result_is_error(msg: &Message) -> bool {
    #[derive(serde::Deserialize)]
    struct IsError {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    msg.field("result")
        .and_then(|r| serde_json::from_str::<IsError>(r.get()).ok())
        .is_some_and(|r| r.is_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_error_results() {
        let m =
            Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}"#)
                .unwrap();
        assert!(result_is_error(&m));
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#).unwrap();
        assert!(!result_is_error(&m));
    }
}
