//! Routing what sessions (and control connections) send: each request is classified once,
//! then answered by the daemon, held until the child is ready, queued (calls), served from
//! the cache (a first-page tool list) or forwarded with the daemon's own id.
//!
//! Session-local requests never reach the child: `initialize` (answered from the child's own
//! result), `ping`, `logging/setLevel` (fanned in, see [`super::log_level`]), subscriptions
//! after the first, and requests for another session's task. Nothing a session sends can make
//! the daemon act for another session.

use std::time::{Duration, Instant};

use serde_json::json;

use super::request::{Method, Request};
use super::tasks::TaskRole;
use super::{Origin, Queued, Upstream, inflight::Pending, log_level};
use crate::daemon::SessionId;
use crate::daemon::coogle_tool;
use crate::daemon::scheduler::QueueKey;
use crate::daemon::stats::Outcome;
use crate::wire::{
    self, ErrorCode, Kind, Message, error_line, id_key, raw, response_line, rpc_code,
};

impl Upstream {
    pub(super) fn on_session_line(&mut self, sid: SessionId, line: &[u8]) {
        if !self.sessions.contains_key(&sid) {
            return;
        }
        let msg = match Message::parse(line) {
            Ok(m) => m,
            Err(e) => {
                self.send_to_session(sid, error_line(None, e.rpc_code(), &e.to_string()));
                return;
            }
        };
        match msg.kind() {
            Kind::Request => self.on_session_request(sid, Request::classify(msg)),
            Kind::Notification => self.on_session_notification(sid, msg),
            Kind::Response => {
                let key = msg.id().map(id_key).unwrap_or_default();
                if let Some(r) = self.server_requests.take_answer(sid, &key) {
                    let mut msg = msg;
                    msg.set_id(r.child_id);
                    self.to_child(msg.to_line());
                }
            }
        }
    }

    fn on_session_request(&mut self, sid: SessionId, req: Request) {
        let answer = |this: &mut Self, line: Vec<u8>| this.send_to_session(sid, line);
        match req.method {
            Method::ToolsCall
                if self.offers_coogle_tool() && req.tool == coogle_tool::TOOL_NAME =>
            {
                let args = req
                    .arguments
                    .as_ref()
                    .and_then(|a| serde_json::from_str(a.get()).ok())
                    .unwrap_or_else(|| json!({}));
                self.coogle_call(sid, req.id, &args);
            }
            Method::Initialize => self.on_session_initialize(sid, req),
            Method::Ping => answer(self, response_line(&req.id, &raw(&json!({})))),
            Method::SetLevel => {
                let Some(level) = req.level.as_deref().and_then(log_level::rank) else {
                    let usage = log_level::USAGE;
                    answer(
                        self,
                        error_line(Some(&req.id), rpc_code::INVALID_PARAMS, usage),
                    );
                    return;
                };
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.log_level = Some(level);
                }
                answer(self, response_line(&req.id, &raw(&json!({}))));
                self.sync_child_log_level();
            }
            Method::TaskOp => {
                let task_id = req.task_id.clone().unwrap_or_default();
                if self.tasks.owner(&task_id) != Some(sid) {
                    let text = format!(
                        "no task {task_id:?} (a task is visible only to the session that created it)"
                    );
                    answer(
                        self,
                        error_line(Some(&req.id), rpc_code::INVALID_PARAMS, &text),
                    );
                    return;
                }
                self.forward_for(sid, req);
            }
            Method::Subscribe | Method::Unsubscribe => {
                let Some(uri) = req.uri.clone() else {
                    let text = format!("{} needs params.uri", req.name);
                    answer(
                        self,
                        error_line(Some(&req.id), rpc_code::INVALID_PARAMS, &text),
                    );
                    return;
                };
                // The child hears the first subscribe and the last unsubscribe of each URI.
                let tell_child = if req.method == Method::Subscribe {
                    self.subscriptions.subscribe(sid, &uri)
                } else {
                    self.subscriptions.unsubscribe(sid, &uri)
                };
                if tell_child {
                    self.forward_for(sid, req);
                } else {
                    answer(self, response_line(&req.id, &raw(&json!({}))));
                }
            }
            _ => self.forward_for(sid, req),
        }
    }

    fn on_session_initialize(&mut self, sid: SessionId, req: Request) {
        let params = req.msg.params_value();
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.client_info = params.get("clientInfo").cloned();
            s.capabilities = params.get("capabilities").cloned();
            s.protocol_version = params
                .get("protocolVersion")
                .and_then(|v| v.as_str())
                .map(String::from);
        }
        match &self.cache.init_result {
            Some(init) => {
                let line = response_line(&req.id, init);
                self.send_to_session(sid, line);
            }
            None => {
                let origin = Origin::Session {
                    id: sid,
                    client_id: req.id.clone(),
                };
                self.held.push_back((sid, origin, req));
                self.demand();
            }
        }
    }

    fn forward_for(&mut self, sid: SessionId, req: Request) {
        let origin = Origin::Session {
            id: sid,
            client_id: req.id.clone(),
        };
        self.forward(sid, origin, req);
    }

    /// Requests bound for the child: queue calls, serve a first tool page from the cache, hold
    /// the rest until the child is ready, else send them now.
    pub(super) fn forward(&mut self, key: QueueKey, origin: Origin, req: Request) {
        if self.life.shutting_down() {
            let is_call = req.method == Method::ToolsCall;
            let text = "coogle is shutting down";
            self.reply_error(origin, is_call, ErrorCode::ShuttingDown, text);
            return;
        }
        if req.method == Method::ToolsCall {
            let enqueued = Instant::now();
            self.queue.push(
                key,
                Queued {
                    origin,
                    req,
                    enqueued,
                },
            );
            self.demand();
            self.pump();
            return;
        }
        if req.is_first_tools_page()
            && let Some(cache) = &self.cache.tools
        {
            let listed = match origin {
                Origin::Session { .. } => self.tools_for_session(cache),
                _ => cache.clone(),
            };
            self.reply_ok(origin, &listed);
            return;
        }
        if self.life.is_ready() {
            self.dispatch(origin, req);
        } else {
            self.held.push_back((key, origin, req));
            self.demand();
        }
    }

    /// Send a request to the child under a fresh id, and remember who asked.
    fn dispatch(&mut self, origin: Origin, mut req: Request) {
        let uid = self.inflight.take_uid();
        let from_session = matches!(origin, Origin::Session { .. });
        let mut token = None;
        if from_session && let Some(t) = req.progress_token.take() {
            req.msg.set_progress_token(raw(&uid));
            token = Some(t);
        }
        let task = match req.method {
            _ if !from_session => TaskRole::None,
            _ if req.creates_task => TaskRole::Creates,
            Method::TasksList => TaskRole::Lists,
            _ => TaskRole::None,
        };
        let is_call = req.method == Method::ToolsCall;
        req.msg.set_id(raw(&uid));
        self.to_child(req.msg.to_line());
        let now = Instant::now();
        self.inflight.insert(
            uid,
            Pending {
                is_call,
                tool: is_call.then(|| req.tool.clone()),
                account: is_call.then(|| req.account.clone()),
                first_tools_page: from_session && req.is_first_tools_page(),
                origin,
                started: now,
                deadline: now + self.config.call_timeout,
                token,
                task,
            },
        );
    }

    /// Start queued calls while there is room under `maxConcurrent`.
    pub(super) fn pump(&mut self) {
        if !self.life.is_ready() || self.life.shutting_down() {
            return;
        }
        while self.inflight.calls() < self.config.max_concurrent {
            let Some((_, q)) = self.queue.pop() else {
                break;
            };
            // A call that was already waiting when the upstream asked this account to sign in
            // gets that same sign-in: forwarding it would only start another flow.
            if let Some(url) = self.sign_ins.answer_for(&q.req.account, q.enqueued) {
                let text = super::sign_in::call_text(&self.name, url);
                self.count_session_outcome(&q.origin, Outcome::Error, Duration::ZERO);
                self.reply_error(q.origin, true, ErrorCode::UpstreamError, &text);
                continue;
            }
            self.dispatch(q.origin, q.req);
        }
    }

    fn on_session_notification(&mut self, sid: SessionId, msg: Message) {
        match msg.method().as_deref() {
            Some("notifications/initialized") => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.initialized = true;
                }
            }
            Some("notifications/cancelled") => {
                if let Some(req) = msg.params_field("requestId") {
                    let reason = msg
                        .params_value()
                        .get("reason")
                        .and_then(|r| r.as_str())
                        .unwrap_or("cancelled by the client")
                        .to_string();
                    self.cancel(sid, &id_key(&req), &reason);
                }
            }
            _ => {
                if self.life.is_ready() {
                    self.to_child(msg.to_line());
                }
            }
        }
    }

    /// Cancel one of a session's requests wherever it is: queued, held or in flight.
    fn cancel(&mut self, sid: SessionId, key: &str, reason: &str) {
        if let Some(q) = self
            .queue
            .remove_first(sid, |q| q.origin.matches_client(sid, key))
        {
            self.count_session_outcome(&q.origin, Outcome::Cancelled, Duration::ZERO);
            self.stats.record(Outcome::Cancelled, Duration::ZERO);
            return;
        }
        if let Some(pos) = self
            .held
            .iter()
            .position(|(_, o, _)| o.matches_client(sid, key))
        {
            self.held.remove(pos);
            return;
        }
        if let Some(uid) = self.inflight.find_client(sid, key) {
            self.abandon(uid, reason, Outcome::Cancelled);
        }
    }

    /// Forget an in-flight request and tell the child to stop working on it.
    pub(super) fn abandon(&mut self, uid: u64, reason: &str, outcome: Outcome) -> Option<Pending> {
        let p = self.inflight.remove(uid)?;
        if p.is_call {
            let took = p.started.elapsed();
            self.count_session_outcome(&p.origin, outcome, took);
            self.stats.record(outcome, took);
        }
        self.to_child(wire::notification_line(
            "notifications/cancelled",
            Some(&json!({"requestId": uid, "reason": reason})),
        ));
        self.pump();
        self.check_shutdown();
        Some(p)
    }

    /// A request's deadline passed.
    pub(super) fn on_timeout(&mut self, uid: u64) {
        let is_init = matches!(
            self.inflight.get(uid).map(|p| &p.origin),
            Some(Origin::Internal(super::Internal::Initialize))
        );
        if is_init {
            self.inflight.remove(uid);
            self.on_initialize_timeout();
            return;
        }
        let secs = self.config.call_timeout.as_secs_f64();
        let reason = format!("timed out after {secs} s");
        let Some(p) = self.abandon(uid, &reason, Outcome::Timeout) else {
            return;
        };
        let what = p.tool.as_deref().map_or_else(
            || "the request".to_string(),
            |t| format!("the call to `{t}`"),
        );
        let text = format!(
            "coogle: {what} on the `{}` server timed out after {secs} s and was cancelled upstream",
            self.name
        );
        tracing::warn!(upstream = %self.name, "{text}");
        self.reply_error(p.origin, p.is_call, ErrorCode::Timeout, &text);
        if p.is_call {
            self.note_call_timeout();
        }
    }

    /// A request on behalf of a control connection (`tools/list`, `tools/call`).
    pub(super) fn on_control_request(
        &mut self,
        method: &str,
        params: &serde_json::Value,
        reply: super::ControlReply,
    ) {
        let line = wire::request_line(&raw(&0), method, params);
        let msg = match Message::parse(line.trim_ascii_end()) {
            Ok(m) => m,
            Err(e) => {
                let _ = reply.send(Err(wire::WireError::new(
                    ErrorCode::Internal,
                    e.to_string(),
                )));
                return;
            }
        };
        let key = self.next_control_key;
        self.next_control_key += 1;
        self.forward(key, Origin::Control(reply), Request::classify(msg));
    }
}
