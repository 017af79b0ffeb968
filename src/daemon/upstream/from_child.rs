//! Routing what the child sends: answers go back to whoever asked, under the id they used;
//! notifications go to the session they concern (progress by token, task status by task,
//! resource updates by subscription, logs by level) or to everyone (list changes); the child's
//! own requests (sampling, elicitation, roots) go to the session whose call caused them, or
//! are answered with an error when that cannot be known. A line that is not JSON-RPC is
//! logged and dropped; it never reaches a session.

use std::sync::LazyLock;

use serde_json::json;

use super::era::{Era, META_SUBSCRIPTION};
use super::inflight::Pending;
use super::tasks::{TaskRole, related_task};
use super::{Internal, Origin, Upstream, log_level, mrtr};
use crate::daemon::SessionId;
use crate::daemon::stats::Outcome;
use crate::wire::{
    self, ErrorCode, Json, KeyLook, Kind, Message, Object, WireError, error_line, id_key, raw,
    response_line, rpc_code,
};

/// A call's answer is walked for `isError` only when it may hold one.
static IS_ERROR: LazyLock<KeyLook> = LazyLock::new(|| KeyLook::new("isError"));

impl Upstream {
    pub(super) fn on_child_line(&mut self, line: Vec<u8>) {
        let mut msg = match Message::parse_owned(line) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(upstream = %self.name, "ignoring a line from the upstream that is not JSON-RPC: {e}");
                return;
            }
        };
        match msg.kind() {
            Kind::Response => {
                let uid = msg
                    .field_json("id")
                    .and_then(|id| serde_json::from_str::<u64>(id.get()).ok());
                let Some(p) = uid.and_then(|u| self.inflight.remove(u)) else {
                    if let Some(uid) = uid {
                        self.inflight.settled(uid);
                    }
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
    fn complete(&mut self, mut p: Pending, mut msg: Message) {
        let latency = p.started.elapsed();
        // The result is read once, for all that follows needs of it (a parse each was a large
        // part of the daemon's work per call: issue 22).
        let (input_required, is_error, view) = {
            let result = msg.field_json("result");
            // A call's result is walked for `isError` only when it may hold one.
            let needed = p.retry.is_some()
                || p.handshake_view
                || (p.is_call && result.is_some_and(|r| r.may_hold(&IS_ERROR)));
            let result = needed.then_some(result).flatten().and_then(Json::object);
            let result = result.as_ref();
            (
                result.is_some_and(mrtr::asks_for_input),
                result.is_some_and(result_is_error),
                result
                    .filter(|_| p.handshake_view)
                    .and_then(super::era::handshake_view_of),
            )
        };
        if input_required && let Some(retry) = p.retry.take() {
            // A handshake-era session's call, and the child wants input: ask the session.
            self.start_round(p, retry, &msg);
            self.pump();
            return;
        }
        if p.is_call {
            self.account_call(&p, &msg, is_error, latency);
        }
        if let Some((key, caps)) = p.tools_key.take()
            && let Some(result) = msg.field_json("result")
        {
            let live_refresh = matches!(p.origin, Origin::Internal(Internal::ToolsList));
            if self.cache.set_tools(key, caps, result.to_raw()) {
                // The daemon's own look found a change sessions may not have heard of.
                self.announce_tools_changed(live_refresh);
            }
        }
        if let Some(view) = view {
            msg.set_field_text("result", view);
        }
        self.answer_origin(p, msg);
        self.pump();
        self.check_shutdown();
    }

    /// A call's answer counts: stats, the session's outcome, a sign-in it may announce.
    fn account_call(
        &mut self,
        p: &Pending,
        msg: &Message,
        is_error: bool,
        latency: std::time::Duration,
    ) {
        self.life.consecutive_timeouts = 0;
        let outcome = if msg.is_error_response() || is_error {
            Outcome::Error
        } else {
            Outcome::Ok
        };
        self.stats.record(outcome, latency);
        self.count_session_outcome(&p.origin, outcome, latency);
        if let Some(account) = &p.account {
            self.track_sign_in(account, msg);
        }
    }

    /// Hand the answer to whoever asked: a session (under its own id), a control request,
    /// a background operation, or the daemon itself.
    fn answer_origin(&mut self, p: Pending, mut msg: Message) {
        match p.origin {
            Origin::Session { id, client_id } => {
                match p.task {
                    TaskRole::Creates => self.tasks.created(id, &msg),
                    TaskRole::Lists => self.tasks.filter_list(id, &mut msg),
                    TaskRole::None => {}
                }
                // Read as text: a handshake view set above is not made a raw value to be read.
                if p.first_tools_page
                    && let Some(listed) = msg
                        .field_json("result")
                        .and_then(|r| self.tools_for_session(r))
                {
                    msg.set_field("result", listed);
                }
                if p.listen.is_some() && msg.has_field("result") {
                    // The child ended the subscription: its result names it by the session's id.
                    msg.set_meta_fields_of("result", vec![(META_SUBSCRIPTION, client_id.clone())]);
                }
                msg.set_id(client_id);
                self.send_to_session(id, msg.to_line());
            }
            Origin::Control(reply) => {
                let result = match msg.field("result") {
                    _ if mrtr::is_input_required(&msg) => {
                        Err(WireError::new(ErrorCode::UpstreamError, NEEDS_INPUT))
                    }
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
                    _ if mrtr::is_input_required(&msg) => {
                        raw(&wire::tool_error_result(NEEDS_INPUT))
                    }
                    Some(r) => r.to_owned(),
                    None => raw(&wire::tool_error_result(
                        &msg.error_message()
                            .unwrap_or_else(|| "the call failed".into()),
                    )),
                };
                self.finish_operation(&op, result);
            }
            Origin::Internal(Internal::Discover) => self.on_discovered(&msg),
            Origin::Internal(Internal::Initialize) => self.on_initialized(&msg),
            Origin::Internal(Internal::ToolsList) => {}
            Origin::Internal(Internal::Listen) => {
                if self.own_listen.is_some_and(|_| msg.id().is_some()) {
                    tracing::debug!(upstream = %self.name, "the upstream ended the daemon's subscription");
                }
            }
            Origin::Internal(Internal::Housekeeping) => {
                if let Some(e) = msg.error_message() {
                    tracing::debug!(upstream = %self.name, "the upstream refused a housekeeping request: {e}");
                }
            }
        }
    }

    fn on_child_notification(&mut self, method: &str, msg: &mut Message) {
        // A 2026-07-28 child tags what it sends on a subscription with the listen's id.
        if let Some(tag) = msg.meta_field(META_SUBSCRIPTION) {
            self.on_tagged(&tag, method, msg);
            return;
        }
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
                self.notify_session(sid, msg.to_line(), false);
            }
            "notifications/message" => {
                let level = msg
                    .params_field("level")
                    .and_then(|l| serde_json::from_str::<String>(l.get()).ok())
                    .and_then(|l| log_level::rank(&l))
                    .unwrap_or(0);
                if self.child_era() == Some(Era::Modern) {
                    self.route_request_log(level, &msg.to_line());
                } else {
                    self.fan_out_log(level, &msg.to_line());
                }
            }
            "notifications/tasks/status" => {
                self.tasks.status(msg);
                let owner = msg
                    .params_field("taskId")
                    .and_then(|t| serde_json::from_str::<String>(t.get()).ok())
                    .and_then(|t| self.tasks.owner(&t));
                if let Some(sid) = owner {
                    self.notify_session(sid, msg.to_line(), false);
                }
            }
            "notifications/resources/updated" => {
                self.notify_resource_subscribers(msg);
            }
            "notifications/cancelled" => {
                let Some(request) = msg.params_field("requestId") else {
                    return;
                };
                // A 2026-07-28 child ends a subscription it tore down.
                if let Ok(uid) = serde_json::from_str::<u64>(request.get())
                    && self.on_child_cancelled_listen(uid, msg)
                {
                    return;
                }
                // The child cancels a request it sent: the session knows it by the daemon's id.
                let child_key = id_key(&request);
                let Some((sid, shown)) = self.server_requests.cancelled_by_child(&child_key) else {
                    return;
                };
                msg.set_params_field("requestId", shown);
                self.send_to_session(sid, msg.to_line());
            }
            _ => {
                if method == "notifications/tools/list_changed" {
                    // Serve the next tools/list live, and refresh the cache.
                    self.cache.invalidate_tools();
                    if self.life.is_ready() {
                        self.refresh_tools();
                    }
                }
                let keep = method.ends_with("/list_changed");
                self.broadcast(&msg.to_line(), keep);
            }
        }
    }

    /// A request from the child to a client: to the session whose call caused it, provided its
    /// client declared the capability; else an error to the child.
    fn on_server_request(&mut self, mut msg: Message) {
        let method = msg.method().unwrap_or_default();
        let child_id = msg
            .field_json("id")
            .map(Json::to_raw)
            .unwrap_or_else(|| raw(&()));
        if method == "ping" {
            self.to_child(response_line(&child_id, &raw(&json!({}))));
            return;
        }
        if self.child_era() == Some(Era::Modern) {
            // 2026-07-28 servers must not send requests on stdio; they ask with input_required.
            let text = "coogle: a 2026-07-28 server asks for input with input_required results, not requests";
            self.to_child(error_line(Some(&child_id), rpc_code::INVALID_REQUEST, text));
            return;
        }
        let capability = method.split('/').next().unwrap_or_default();
        let caller = self.caller_of(&msg);
        let target = caller.filter(|id| {
            self.sessions.get(id).is_some_and(|s| {
                s.era != Some(Era::Modern)
                    && s.capabilities
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
    /// one session the child may be working for. A call that timed out or was cancelled still
    /// counts while the child may go on with it (its session, gone or not, stays a candidate),
    /// so another session is never asked on its behalf; more than one candidate, or one that
    /// cannot answer (a control call), and nobody is asked.
    fn caller_of(&mut self, msg: &Message) -> Option<SessionId> {
        if let Some(owner) = related_task(msg).and_then(|t| self.tasks.owner(&t)) {
            return Some(owner);
        }
        let callers = self.inflight.callers(std::time::Instant::now())?;
        let mut it = callers.into_iter();
        match (it.next(), it.next()) {
            (Some(Some(id)), None) => Some(id),
            _ => None,
        }
    }

    /// Note what a call's answer says about its account's sign-in.
    fn track_sign_in(&mut self, account: &str, answer: &Message) {
        use super::sign_in::{Change, notice_text};
        match self.sign_ins.track(account, answer) {
            Change::Asked(url) => {
                tracing::warn!(upstream = %self.name, account, "sign-in required: {url}");
                let data = notice_text(&self.name, &url);
                let params = json!({"level": "warning", "logger": "coogle", "data": data});
                let line = wire::notification_line("notifications/message", Some(&params));
                self.broadcast(&line, true);
            }
            Change::Done => {
                tracing::info!(upstream = %self.name, account, "signed in: calls work again")
            }
            Change::Nothing => {}
        }
    }

    /// A 2026-07-28 child's log message names no request: it belongs to the one session that
    /// may own it (see [`super::inflight::InFlight::log_owner`]). When that cannot be told, no
    /// session gets it (logs are not worth another's leaking).
    fn route_request_log(&mut self, level: u8, line: &[u8]) {
        match self.inflight.log_owner(level, std::time::Instant::now()) {
            Ok(sid) => self.notify_session(sid, line.to_vec(), false),
            Err(0) => {}
            Err(_) => {
                self.unattributed_logs += 1;
                tracing::debug!(upstream = %self.name, "dropped a log message that more than one request, or a call nobody waits for, could own");
            }
        }
    }
}

/// What a control connection or a background operation gets when the child asks for input.
const NEEDS_INPUT: &str = "coogle: the server asked for input (an elicitation, a sampling or the roots) that only an agent session can give; call this tool from an agent session";

/// A `tools/call` result that reports failure.
fn result_is_error(result: &Object) -> bool {
    result.get("isError").is_some_and(|v| v.get() == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_error_results() {
        let error = |result: &str| result_is_error(&Object::parse(result).unwrap());
        assert!(error(r#"{"content":[],"isError":true}"#));
        assert!(error(r#"{"isError" : true, "content":[]}"#));
        assert!(!error(r#"{"content":[]}"#));
        assert!(!error(r#"{"content":[],"isError":false}"#));
        assert!(!error(r#"{"content":[],"isError":"true"}"#));
        // A repeated key: the last one counts, as a client reading the answer directly sees.
        assert!(error(r#"{"isError":false,"content":[],"isError":true}"#));
        assert!(!error(r#"{"isError":true,"content":[],"isError":false}"#));
    }
}
