//! Routing what sessions (and control connections) send: each request is classified once,
//! then answered by the daemon, held until the child is ready, queued (calls), served from
//! the cache (a first-page tool list) or forwarded with the daemon's own id.
//!
//! Session-local requests never reach the child: `initialize` (answered from what the child
//! said, in the session's own version), `server/discover` (the child's own answer, kept),
//! and for a handshake-era session `ping`, `logging/setLevel` and subscriptions after the
//! first. A 2026-07-28 session's requests carry their own envelope and pass as they are; a
//! handshake-era session's requests to a 2026-07-28 child get the envelope its `initialize`
//! described (see [`super::era`]). Nothing a session sends can make the daemon act for another
//! session.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde_json::json;
use serde_json::value::RawValue;

use super::era::{self, Era};
use super::inflight::{Pending, Retry};
use super::listen::ListenFilter;
use super::request::{Method, Request};
use super::server_requests::Target;
use super::tasks::TaskRole;
use super::waiting::{Full, MAX_CALLS_PER_SESSION, MAX_WAITING, Waiting, WaitsFor};
use super::{Origin, Upstream, log_level};
use crate::daemon::SessionId;
use crate::daemon::coogle_tool;
use crate::daemon::scheduler::QueueKey;
use crate::daemon::stats::Outcome;
use crate::wire::{
    self, ErrorCode, Json, Kind, Message, ObjectText, error_line, id_key, raw, response_error_line,
    response_line, rpc_code,
};

/// The methods whose answer a 2026-07-28 child may make `input_required`.
const ASKS_FOR_INPUT: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

impl Upstream {
    pub(super) fn on_session_line(&mut self, sid: SessionId, line: Vec<u8>) {
        let Some(session) = self.sessions.get_mut(&sid) else {
            return;
        };
        let msg = match Message::parse_owned(line) {
            Ok(m) => m,
            Err(e) => {
                self.send_to_session(sid, error_line(None, e.rpc_code(), &e.to_string()));
                return;
            }
        };
        match msg.kind() {
            Kind::Request => {
                let req = Request::classify_in(msg, &mut session.meta_memo);
                if let Some(part) = req.unreadable {
                    let text = format!(
                        "invalid params: {part} has a key written with an escape that is not Unicode (a lone surrogate such as \\ud800); send it without that key"
                    );
                    let line = error_line(Some(&req.id), rpc_code::INVALID_PARAMS, &text);
                    self.send_to_session(sid, line);
                    return;
                }
                self.on_session_request(sid, req);
            }
            Kind::Notification if msg.has_null_id() => {
                let text = "invalid request: a request's id must be a string or a number, not null";
                self.send_to_session(sid, error_line(None, rpc_code::INVALID_REQUEST, text));
            }
            Kind::Notification => self.on_session_notification(sid, msg),
            Kind::Response => {
                let key = msg.id().map(id_key).unwrap_or_default();
                let Some(r) = self.server_requests.take_answer(sid, &key) else {
                    return;
                };
                match r.target {
                    Target::Child(child_id) => {
                        let mut msg = msg;
                        msg.set_id(child_id);
                        self.to_child(msg.to_line());
                    }
                    Target::Round { round, key } => self.on_round_answer(round, key, msg),
                }
            }
        }
    }

    /// The child's era as far as the daemon knows it: the live child's, else what the cache
    /// remembers of it. `None` only on a first start with nothing cached.
    pub(super) fn child_era(&self) -> Option<Era> {
        self.cache.era
    }

    pub(super) fn on_session_request(&mut self, sid: SessionId, req: Request) {
        // Much of what a request means depends on the child's era: until it is known, wait.
        let Some(child_era) = self.child_era() else {
            self.wait_for_era(sid, req);
            return;
        };
        if let Some(s) = self.sessions.get_mut(&sid)
            && s.era.is_none()
            && req.envelope.is_some()
            && req.method != Method::Discover
        {
            s.era = Some(Era::Modern);
        }
        let modern = req.envelope.is_some();
        if modern && child_era == Era::Legacy && req.method != Method::Discover {
            let line = era::handshake_only_line(
                &req.id,
                &self.name,
                &self.child_version(),
                req.envelope.as_ref().map_or("", |e| e.version.as_str()),
            );
            self.send_to_session(sid, line);
            return;
        }
        let answer = |this: &mut Self, line: Vec<u8>| this.send_to_session(sid, line);
        match req.method {
            Method::ToolsCall
                if self.offers_coogle_tool() && req.tool == coogle_tool::TOOL_NAME =>
            {
                let args = req
                    .arguments()
                    .and_then(|a| serde_json::from_str(a.get()).ok())
                    .unwrap_or_else(|| json!({}));
                self.coogle_call(sid, req.id, &args);
            }
            Method::Initialize => self.on_session_initialize(sid, req, child_era),
            Method::Discover => self.on_session_discover(sid, req, child_era),
            Method::Ping if !modern => answer(self, response_line(&req.id, &raw(&json!({})))),
            Method::SetLevel if !modern => self.on_set_level(sid, req),
            Method::Subscribe | Method::Unsubscribe if !modern => self.on_subscribe(sid, req),
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
            _ => self.forward_for(sid, req),
        }
    }

    /// `initialize` is never forwarded: the child was initialized (or discovered) once, by the
    /// daemon. The session gets the child's answer in the version it asked for, when the
    /// daemon can serve that version.
    fn on_session_initialize(&mut self, sid: SessionId, req: Request, child_era: Era) {
        let params = req.msg.params_value();
        let requested = params
            .get("protocolVersion")
            .and_then(|v| v.as_str())
            .map(String::from);
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.client_info = params.get("clientInfo").cloned();
            s.capabilities = params.get("capabilities").cloned();
            s.envelope_text =
                era::EnvelopeText::of(s.capabilities.as_ref(), s.client_info.as_ref());
            s.protocol_version = requested.clone();
            s.era = Some(Era::Legacy);
        }
        let result = match child_era {
            Era::Legacy => self.cache.init_result.as_ref().map(|init| {
                let version = era::negotiate(requested.as_deref(), &self.child_version());
                with_version(init, &version)
            }),
            Era::Modern => self.cache.discover.as_ref().map(|d| {
                let version = era::negotiate(requested.as_deref(), era::latest_handshake());
                era::initialize_from_discover(d, &version)
            }),
        };
        match result {
            Some(result) => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    s.protocol_version = version_of(&result);
                }
                self.send_to_session(sid, response_line(&req.id, &result));
            }
            None => self.wait_for_era(sid, req),
        }
    }

    /// `server/discover`, answered at once from what the child said when the daemon asked it:
    /// its DiscoverResult, or the error a handshake-era child gave (so a probing client falls
    /// back to `initialize` without waiting for anything).
    fn on_session_discover(&mut self, sid: SessionId, req: Request, child_era: Era) {
        let line = match (child_era, &self.cache.discover, &self.cache.discover_error) {
            (Era::Modern, Some(d), _) => {
                let supported = era::supported_versions(d);
                match &req.envelope {
                    Some(e) if supported.contains(&e.version) => response_line(&req.id, d),
                    Some(e) => era::unsupported_version_line(&req.id, &supported, &e.version),
                    None => error_line(
                        Some(&req.id),
                        rpc_code::INVALID_PARAMS,
                        "server/discover needs the 2026-07-28 envelope in params._meta (io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities)",
                    ),
                }
            }
            (Era::Legacy, _, Some(e)) => response_error_line(&req.id, e),
            (Era::Legacy, _, None) => error_line(
                Some(&req.id),
                rpc_code::METHOD_NOT_FOUND,
                "Method not found",
            ),
            (Era::Modern, None, _) => {
                self.wait_for_era(sid, req);
                return;
            }
        };
        self.send_to_session(sid, line);
    }

    /// A handshake-era session's `logging/setLevel`: its own level, never another's.
    fn on_set_level(&mut self, sid: SessionId, req: Request) {
        let Some(level) = req.level.as_deref().and_then(log_level::rank) else {
            let usage = log_level::USAGE;
            let line = error_line(Some(&req.id), rpc_code::INVALID_PARAMS, usage);
            self.send_to_session(sid, line);
            return;
        };
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.log_level = Some(level);
        }
        self.send_to_session(sid, response_line(&req.id, &raw(&json!({}))));
        self.sync_child_log_level();
    }

    /// A handshake-era session's `resources/subscribe` or `unsubscribe`. A handshake-era child
    /// hears the first subscribe and the last unsubscribe of each URI; on a 2026-07-28 child
    /// the daemon's own listen follows the set of URIs.
    fn on_subscribe(&mut self, sid: SessionId, req: Request) {
        let Some(uri) = req.uri.clone() else {
            let text = format!("{} needs params.uri", req.name);
            let line = error_line(Some(&req.id), rpc_code::INVALID_PARAMS, &text);
            self.send_to_session(sid, line);
            return;
        };
        let changed = if req.method == Method::Subscribe {
            self.subscriptions.subscribe(sid, &uri)
        } else {
            self.subscriptions.unsubscribe(sid, &uri)
        };
        if self.child_era() == Some(Era::Legacy) && changed {
            self.forward_for(sid, req);
            return;
        }
        if changed && self.child_is_modern() {
            self.open_own_listen();
        }
        self.send_to_session(sid, response_line(&req.id, &raw(&json!({}))));
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
        if self.handed_over && matches!(origin, Origin::Session { .. }) {
            // The session was told of the upgrade in place: its shim sends this again to the
            // new daemon, which answers it.
            return;
        }
        if self.life.shutting_down() {
            let is_call = req.method == Method::ToolsCall;
            let text = "coogle is shutting down";
            self.reply_error(origin, is_call, ErrorCode::ShuttingDown, text);
            return;
        }
        if req.method == Method::ToolsCall {
            if self.waiting.calls() == 0
                && self.waiting.admit(key, WaitsFor::Slot).is_ok()
                && self.can_start_call()
            {
                // Nothing waits for a slot and one is free: the call starts now, as the
                // waiting room would start it at once, without its bookkeeping (a tenth of
                // the daemon's work per call: issue 22).
                self.start_call(origin, req, Instant::now());
                return;
            }
            self.wait(WaitsFor::Slot, Waiting::new(key, origin, req));
            self.pump();
            return;
        }
        if req.is_first_tools_page() {
            let (cache_key, _) = self.tools_key(&origin, &req);
            if let Some(cached) = self.cache.tools(&cache_key, self.life.is_ready()) {
                let view = match &req.envelope {
                    None if self.child_era() == Some(Era::Modern) => era::handshake_view(cached),
                    _ => None,
                };
                let text = view.as_ref().map_or(Json::of(cached), ObjectText::as_json);
                match origin {
                    // A session's list is written from the text, not made a raw value first.
                    Origin::Session { id, client_id } => {
                        let line = match self.tools_for_session(text) {
                            Some(listed) => response_line(&client_id, &listed),
                            None => wire::response_line_json(&client_id, text),
                        };
                        self.send_to_session(id, line);
                    }
                    origin => {
                        let listed = view.map_or_else(|| cached.to_owned(), ObjectText::into_raw);
                        self.reply_ok(origin, &listed);
                    }
                }
                return;
            }
        }
        // Frozen for an upgrade in place: nothing new reaches the child (see `handing_over`).
        if self.life.is_ready() && !self.is_frozen() {
            self.dispatch(origin, req);
        } else {
            self.wait(WaitsFor::Child, Waiting::new(key, origin, req));
        }
    }

    /// Let a request wait (and the child start, if it must), or refuse it at once when too
    /// much waits already.
    fn wait(&mut self, what: WaitsFor, w: Waiting) {
        match self.waiting.admit(w.key, what) {
            Ok(()) => {
                self.waiting.push(what, w);
                self.demand();
            }
            Err(full) => {
                let is_call = w.req.method == Method::ToolsCall;
                let text = match full {
                    Full::Session => format!(
                        "coogle: this session already has {MAX_CALLS_PER_SESSION} calls waiting for the `{}` server; wait for some to finish",
                        self.name
                    ),
                    Full::Upstream => format!(
                        "coogle: {MAX_WAITING} requests already wait for the `{}` server; retry shortly",
                        self.name
                    ),
                };
                if is_call {
                    self.count_session_outcome(&w.origin, Outcome::Error, Duration::ZERO);
                }
                self.reply_error(w.origin, is_call, ErrorCode::UpstreamUnavailable, &text);
            }
        }
    }

    /// Keep a session's request until the child's era is known (a first start).
    fn wait_for_era(&mut self, sid: SessionId, req: Request) {
        let origin = Origin::Session {
            id: sid,
            client_id: req.id.clone(),
        };
        self.wait(WaitsFor::Era, Waiting::new(sid, origin, req));
    }

    /// The capabilities the child sees for a request, and the cache key they give: a
    /// handshake-era child sees the config's for everyone; a 2026-07-28 child sees each
    /// request's own (a handshake-era session's from its `initialize`).
    pub(super) fn tools_key(&self, origin: &Origin, req: &Request) -> (String, Box<RawValue>) {
        let config = || raw(&self.config.client_capabilities);
        let caps = match (self.child_era(), &req.envelope, origin) {
            (Some(Era::Legacy) | None, _, _) => return ("config".to_string(), config()),
            // Read from the message here, not kept by `classify`: only a tools list needs them,
            // and a raw value of them is one more check of their text on every call.
            (_, Some(_), _) => req
                .msg
                .meta_field(era::META_CAPABILITIES)
                .unwrap_or_else(|| raw(&json!({}))),
            (_, None, Origin::Session { id, .. }) => self
                .sessions
                .get(id)
                .and_then(|s| s.capabilities.as_ref())
                .map(raw)
                .unwrap_or_else(|| raw(&json!({}))),
            _ => config(),
        };
        (era::capabilities_key(Some(&caps)), caps)
    }

    /// Send a request to the child under a fresh id, and remember who asked.
    fn dispatch(&mut self, origin: Origin, req: Request) {
        self.dispatch_with(origin, req, None);
    }

    /// Send a call again, with the input the child asked for (see `mrtr`).
    pub(super) fn dispatch_retry(&mut self, origin: Origin, req: Request, retry: Retry) {
        self.dispatch_with(origin, req, Some(retry));
    }

    fn dispatch_with(&mut self, origin: Origin, mut req: Request, mut retry: Option<Retry>) {
        let uid = self.inflight.take_uid();
        let session = origin.session();
        let child_modern = self.child_era() == Some(Era::Modern);
        let tools_key = req
            .is_first_tools_page()
            .then(|| self.tools_key(&origin, &req));
        // What goes into the request's `_meta`: the envelope is borrowed from the session, not
        // copied for each request.
        let mut meta: Vec<(&'static str, Cow<RawValue>)> = Vec::with_capacity(5);
        let mut token = None;
        if session.is_some()
            && let Some(t) = req.progress_token.take()
        {
            meta.push(("progressToken", Cow::Owned(raw(&uid))));
            token = Some(t);
        }
        let mut log_level = None;
        let mut keep_for_retry = false;
        let handshake_view = child_modern && req.envelope.is_none();
        if child_modern {
            match &req.envelope {
                Some(e) => log_level = e.log_level.as_deref().and_then(log_level::rank),
                None => {
                    log_level = self.envelope_for(&origin, &mut meta);
                    keep_for_retry = session.is_some()
                        && retry.is_none()
                        && ASKS_FOR_INPUT.contains(&req.name.as_str());
                }
            }
        }
        let task = match req.method {
            _ if session.is_none() => TaskRole::None,
            // The tasks extension lets a 2026-07-28 child turn any call into a task.
            Method::ToolsCall if req.creates_task || (child_modern && req.envelope.is_some()) => {
                TaskRole::Creates
            }
            _ if req.creates_task => TaskRole::Creates,
            Method::TasksList => TaskRole::Lists,
            _ => TaskRole::None,
        };
        let is_call = req.method == Method::ToolsCall;
        let listen = (req.method == Method::Listen).then(|| ListenFilter::of(&req));
        let line = req.msg.child_line(&uid.to_string(), &meta);
        drop(meta);
        let account = if is_call {
            self.sign_ins.account(&req)
        } else {
            None
        };
        let first_tools_page = session.is_some() && req.is_first_tools_page();
        if keep_for_retry {
            // The child's line was written from the message, which is left as the session sent
            // it: kept as it is for the rounds, not copied.
            retry = Some(Retry {
                msg: req.msg,
                rounds: 0,
            });
        }
        let now = Instant::now();
        self.inflight.insert(
            uid,
            Pending {
                is_call,
                tool: is_call.then_some(req.tool),
                account,
                first_tools_page,
                deadline: listen.is_none().then(|| now + self.config.call_timeout),
                origin,
                started: now,
                token,
                task,
                tools_key,
                listen,
                log_level,
                handshake_view,
                retry,
            },
        );
        // Written last: the child may answer at once, on this CPU or another, and this
        // request's bookkeeping is then already done.
        self.to_child(line);
    }

    /// The envelope for a request that came without one, going to a 2026-07-28 child, added
    /// to `meta`: a handshake-era session's own (what its `initialize` said, the level it set,
    /// borrowed), or the daemon's (config capabilities). Returns the log level it asks for.
    fn envelope_for<'s>(
        &'s self,
        origin: &Origin,
        meta: &mut Vec<(&'static str, Cow<'s, RawValue>)>,
    ) -> Option<u8> {
        if let Some(s) = origin.session().and_then(|id| self.sessions.get(&id)) {
            // A handshake-era child logs everything to a session that never set a level, so a
            // session of that era gets the same from a 2026-07-28 child: it asks for debug.
            let rank = s.log_level.unwrap_or(0);
            let fields = era::envelope(&s.envelope_text, Some(rank));
            meta.extend(fields.into_iter().map(|(k, v)| (k, Cow::Borrowed(v))));
            return Some(rank);
        }
        let fields = era::daemon_envelope(&self.config.client_capabilities);
        meta.extend(fields.into_iter().map(|(k, v)| (k, Cow::Owned(v))));
        None
    }

    /// Start queued calls while there is room under `maxConcurrent`.
    pub(super) fn pump(&mut self) {
        while self.can_start_call() {
            let Some(q) = self.waiting.next_call() else {
                break;
            };
            self.start_call(q.origin, q.req, q.since);
        }
    }

    /// Whether a call may start now: the child is ready, not frozen for an upgrade in place,
    /// and below `maxConcurrent`.
    fn can_start_call(&self) -> bool {
        self.life.is_ready()
            && !self.life.shutting_down()
            && !self.is_frozen()
            && self.inflight.calls() < self.config.max_concurrent
    }

    /// Start a call that arrived at `since`.
    fn start_call(&mut self, origin: Origin, req: Request, since: Instant) {
        // A call that was already waiting when the upstream asked this account to sign in
        // gets that same sign-in: forwarding it would only start another flow.
        if let Some(url) = self.sign_ins.answer_for(&req, since) {
            let text = super::sign_in::call_text(&self.name, url);
            self.count_session_outcome(&origin, Outcome::Error, Duration::ZERO);
            self.reply_error_verbatim(origin, true, ErrorCode::UpstreamError, &text);
            return;
        }
        self.dispatch(origin, req);
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
            // A 2026-07-28 child takes no other notification from a client.
            _ if self.child_era() == Some(Era::Modern) => {}
            _ => {
                if self.life.is_ready() {
                    self.to_child(msg.to_line());
                }
            }
        }
    }

    /// Cancel one of a session's requests wherever it is: queued, held, waiting for input or
    /// in flight.
    fn cancel(&mut self, sid: SessionId, key: &str, reason: &str) {
        if let Some((what, w)) = self.waiting.cancel(sid, key) {
            if what == WaitsFor::Slot {
                self.count_session_outcome(&w.origin, Outcome::Cancelled, Duration::ZERO);
                self.stats.record(Outcome::Cancelled, Duration::ZERO);
            }
            return;
        }
        if self.cancel_round(sid, key) {
            return;
        }
        if let Some(uid) = self.inflight.find_client(sid, key) {
            self.abandon(uid, reason, Outcome::Cancelled);
        }
    }

    /// Forget an in-flight request and tell the child to stop working on it.
    pub(super) fn abandon(&mut self, uid: u64, reason: &str, outcome: Outcome) -> Option<Pending> {
        let p = self.inflight.remove(uid)?;
        self.inflight.abandoned(uid, &p);
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
        let internal = match self.inflight.get(uid).map(|p| &p.origin) {
            Some(Origin::Internal(i)) => Some(*i),
            _ => None,
        };
        match internal {
            Some(super::Internal::Initialize) => {
                self.inflight.remove(uid);
                self.on_initialize_timeout();
                return;
            }
            Some(super::Internal::Discover) => {
                self.on_probe_timeout();
                return;
            }
            _ => {}
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
    pub(super) fn on_control_request(&mut self, request: Message, reply: super::ControlReply) {
        let key = self.next_control_key;
        self.next_control_key += 1;
        self.forward(key, Origin::Control(reply), Request::classify(request));
    }

    /// The handshake-era version the child speaks (from its `initialize` answer).
    pub(super) fn child_version(&self) -> String {
        self.cache
            .init_result
            .as_deref()
            .and_then(version_of)
            .unwrap_or_else(|| super::lifecycle::DEFAULT_PROTOCOL_VERSION.to_string())
    }
}

/// `protocolVersion` of an `initialize` result.
fn version_of(result: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct V {
        #[serde(rename = "protocolVersion")]
        version: String,
    }
    serde_json::from_str::<V>(result.get())
        .ok()
        .map(|v| v.version)
}

/// An `initialize` result with `protocolVersion` replaced, every other byte kept.
fn with_version(result: &RawValue, version: &str) -> Box<RawValue> {
    if version_of(result).as_deref() == Some(version) {
        return result.to_owned();
    }
    let mut fields: crate::wire::Fields = match serde_json::from_str(result.get()) {
        Ok(f) => f,
        Err(_) => return result.to_owned(),
    };
    if fields.contains_key("protocolVersion") {
        fields.insert("protocolVersion".to_string(), raw(version));
    }
    raw(&fields)
}
