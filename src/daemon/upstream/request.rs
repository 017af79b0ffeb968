//! What the router needs to know of a request, read once when it arrives.
//!
//! A request is classified into a [`Request`]: its method, its id, and the handful of params the
//! router acts on (the tool of a call and its arguments, raw; a task id, a subscription URI, a
//! log level, the progress token). `params` is scanned once, as raw top-level fields. The
//! message itself is kept as it came, so whatever is forwarded is forwarded byte for byte.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::era;
use crate::wire::{Json, KeyLook, Message, raw};

/// The methods the router treats differently; everything else is forwarded as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Initialize,
    /// `server/discover` (2026-07-28): answered by the daemon from what it knows of the child.
    Discover,
    /// `subscriptions/listen` (2026-07-28): a long-lived request owned by its session.
    Listen,
    Ping,
    SetLevel,
    ToolsCall,
    ToolsList,
    TasksList,
    /// `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update`: they name a task, which
    /// has one owner.
    TaskOp,
    Subscribe,
    Unsubscribe,
    Other,
}

impl Method {
    fn of(name: &str) -> Method {
        match name {
            "initialize" => Method::Initialize,
            "server/discover" => Method::Discover,
            "subscriptions/listen" => Method::Listen,
            "ping" => Method::Ping,
            "logging/setLevel" => Method::SetLevel,
            "tools/call" => Method::ToolsCall,
            "tools/list" => Method::ToolsList,
            "tasks/list" => Method::TasksList,
            "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/update" => Method::TaskOp,
            "resources/subscribe" => Method::Subscribe,
            "resources/unsubscribe" => Method::Unsubscribe,
            _ => Method::Other,
        }
    }
}

/// One request, classified.
pub(super) struct Request {
    pub msg: Message,
    pub method: Method,
    /// The method's name as sent.
    pub name: String,
    /// The id as the sender wrote it (`null` when it had none).
    pub id: Box<RawValue>,
    /// `tools/call`: the tool (`params.name`), "" when missing.
    pub tool: String,
    /// `params.cursor` is present: a later page of a list.
    pub has_cursor: bool,
    /// `params.task` is present: a task-augmented request (its answer names a new task).
    pub creates_task: bool,
    /// `params.taskId`, for the requests that name a task.
    pub task_id: Option<String>,
    /// `params.uri`, for subscriptions.
    pub uri: Option<String>,
    /// `params.level`, for `logging/setLevel`.
    pub level: Option<String>,
    /// `params._meta.progressToken`, raw.
    pub progress_token: Option<Box<RawValue>>,
    /// The 2026-07-28 envelope in `params._meta`, when the request carries one.
    pub envelope: Option<Envelope>,
    /// The part of `params` the router could not read (see [`is_unreadable`]): the request is
    /// refused, not forwarded with what the router would have read or rewritten in it unread.
    pub unreadable: Option<&'static str>,
}

/// What a 2026-07-28 request says of its sender in `params._meta`.
#[derive(Clone)]
pub(super) struct Envelope {
    pub version: String,
    pub log_level: Option<String>,
}

impl Request {
    /// Classify a message that is a request (it has a method).
    pub fn classify(msg: Message) -> Request {
        Request::classify_with(msg, None)
    }

    /// Classify a session's request, reading its `params._meta` through the session's
    /// [`MetaMemo`].
    pub fn classify_in(msg: Message, memo: &mut MetaMemo) -> Request {
        Request::classify_with(msg, Some(memo))
    }

    fn classify_with(msg: Message, memo: Option<&mut MetaMemo>) -> Request {
        let name = msg.method().unwrap_or_default();
        let method = Method::of(&name);
        let id = msg
            .field_json("id")
            .map(Json::to_raw)
            .unwrap_or_else(|| raw(&()));
        // `params` and its `_meta` read in place, once each; only what is kept is copied.
        let params = msg.field_json("params");
        let read = params.and_then(Json::object);
        let mut unread = params
            .is_some_and(|p| read.is_none() && is_unreadable(p))
            .then_some("params");
        let params = read.unwrap_or_default();
        let meta_text = params.get("_meta");
        let read_meta = match (memo, meta_text) {
            (Some(memo), Some(text)) => memo.read(text),
            (_, text) => MetaRead::of(text),
        };
        if read_meta.unreadable {
            unread = Some("params._meta");
        }
        let MetaRead {
            progress_token,
            envelope,
            ..
        } = read_meta;
        let mut tool = String::new();
        if method == Method::ToolsCall {
            tool = params
                .string("name")
                .map(Cow::into_owned)
                .unwrap_or_default();
            // The sign-in account is read from the arguments. Only a backslash can spell what
            // cannot be read: most arguments have none, and are not walked again.
            if params
                .get("arguments")
                .is_some_and(|a| a.get().contains('\\') && is_unreadable(a))
            {
                unread = Some("params.arguments");
            }
        }
        let only = |m: &[Method], key: &str| {
            if m.contains(&method) {
                params.string(key).map(Cow::into_owned)
            } else {
                None
            }
        };
        let (task_id, uri, level) = (
            only(&[Method::TaskOp], "taskId"),
            only(&[Method::Subscribe, Method::Unsubscribe], "uri"),
            only(&[Method::SetLevel], "level"),
        );
        let (has_cursor, creates_task) =
            (params.contains_key("cursor"), params.contains_key("task"));
        drop(params);
        Request {
            task_id,
            uri,
            level,
            has_cursor,
            creates_task,
            method,
            name,
            id,
            tool,
            progress_token,
            envelope,
            unreadable: unread,
            msg,
        }
    }

    /// `tools/call`: `params.arguments`, read in place when asked for (the `coogle` tool reads
    /// its own; a sign-in reads the account, see `sign_in`), not copied for every call.
    pub fn arguments(&self) -> Option<Json<'_>> {
        if self.method != Method::ToolsCall {
            return None;
        }
        self.msg.field_json("params")?.field("arguments")
    }

    /// `tools/call`: the argument `name`, read in place; none, without a walk, when the call's
    /// params cannot hold that key (see [`Json::may_hold`]; `look` looks for `name`).
    pub fn argument(&self, name: &str, look: &KeyLook) -> Option<Json<'_>> {
        if !self.msg.field_json("params")?.may_hold(look) {
            return None;
        }
        self.arguments()?.field(name)
    }

    /// A first page of `tools/list`: what a session believes the tools are.
    pub fn is_first_tools_page(&self) -> bool {
        self.method == Method::ToolsList && !self.has_cursor
    }
}

/// What the router reads of a request's `params._meta`: a pure function of its text.
#[derive(Clone, Default)]
struct MetaRead {
    progress_token: Option<Box<RawValue>>,
    envelope: Option<Envelope>,
    /// `_meta` is an object whose fields cannot be read (see [`is_unreadable`]).
    unreadable: bool,
}

impl MetaRead {
    fn of(text: Option<Json<'_>>) -> MetaRead {
        let meta = text.and_then(Json::object);
        let unreadable = meta.is_none() && text.is_some_and(is_unreadable);
        let meta = meta.unwrap_or_default();
        MetaRead {
            progress_token: meta.get("progressToken").map(Json::to_raw),
            envelope: meta.string(era::META_VERSION).map(|version| Envelope {
                version: version.into_owned(),
                log_level: meta.string(era::META_LOG_LEVEL).map(Cow::into_owned),
            }),
            unreadable,
        }
    }
}

/// A session's last `params._meta`, as text and as read. A 2026-07-28 client sends the same
/// envelope (its version, its info, its capabilities: about 300 bytes from Claude Code) in every
/// request, and walking it again was about 2,100 of the daemon's 36,000 instructions per call;
/// text equal to the last is read as the last was, after one comparison. What is read is a
/// function of the text alone, so equal text cannot be read differently.
#[derive(Default)]
pub(super) struct MetaMemo {
    text: String,
    read: MetaRead,
}

impl MetaMemo {
    /// A `_meta` longer than this is read afresh each time and not kept: a session's memo
    /// stays small whatever it sends.
    const KEEP_UP_TO: usize = 4096;

    fn read(&mut self, text: Json<'_>) -> MetaRead {
        let text_str = text.get();
        if !self.text.is_empty() && self.text == text_str {
            return self.read.clone();
        }
        let read = MetaRead::of(Some(text));
        if text_str.len() <= MetaMemo::KEEP_UP_TO {
            // A fresh string, not the old one grown: what is kept is what was read.
            self.text = text_str.to_owned();
            self.read = read.clone();
        }
        read
    }
}

/// An object whose fields cannot be read: serde_json checks a lone surrogate escape (`"\ud800"`)
/// as JSON but will not decode it, so a key written with one makes its object unreadable. A
/// child that decodes it anyway (Python's `json` does) would read fields the router did not:
/// a `progressToken` it never rewrote would name another session's call.
fn is_unreadable(value: Json<'_>) -> bool {
    value.get().trim_start().starts_with('{') && value.object().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(line: &str) -> Request {
        Request::classify(Message::parse(line.as_bytes()).unwrap())
    }

    #[test]
    fn a_call_is_read_once_for_tool_arguments_and_token() {
        let r = classify(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"send","arguments":{"body":{"x":[1,2]},"user_google_email":"me@x.org"},"_meta":{"progressToken":7}}}"#,
        );
        assert_eq!(r.method, Method::ToolsCall);
        assert_eq!(r.id.get(), "\"a\"");
        assert_eq!(r.tool, "send");
        assert_eq!(
            r.arguments().unwrap().get(),
            r#"{"body":{"x":[1,2]},"user_google_email":"me@x.org"}"#
        );
        assert_eq!(r.progress_token.unwrap().get(), "7");
        assert!(!r.creates_task);
    }

    /// A key serde_json checks but cannot decode (a lone surrogate) makes its object unreadable
    /// to the router, which then refuses the request rather than forward what it did not read
    /// (a `progressToken` in a `_meta` it could not read would reach the child unrewritten).
    /// Any other escape is read.
    #[test]
    fn a_key_the_router_cannot_read_is_named() {
        let unread = |params: &str| {
            classify(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#
            ))
            .unreadable
        };
        let cases = [
            (
                r#"{"name":"t","\ud800":0,"_meta":{"progressToken":17}}"#,
                Some("params"),
            ),
            (
                r#"{"name":"t","_meta":{"\udfff":1,"progressToken":17}}"#,
                Some("params._meta"),
            ),
            (
                r#"{"name":"t","arguments":{"user":"eve","\ud800":0}}"#,
                Some("params.arguments"),
            ),
            (
                r#"{"name":"t","arguments":{"us\u0065r":"eve","\ud83d\ude00":0}}"#,
                None,
            ),
            (
                r#"{"name":"t","arguments":["\ud800"],"_meta":{"k":"\ud800"}}"#,
                None,
            ),
            (r#"[1,"\ud800"]"#, None),
        ];
        for (params, part) in cases {
            assert_eq!(unread(params), part, "{params}");
        }
        let fine = classify(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressT\u006fken":17}}}"#,
        );
        assert_eq!(fine.progress_token.unwrap().get(), "17");
    }

    /// What the router reads of `params._meta` through a session's memo is what it reads of
    /// each request alone, whatever came before: the same envelope repeated, a token that
    /// changes, an escape that spells the same key, an unreadable `_meta` and a readable one
    /// after it, no `_meta`, a `_meta` past what the memo keeps, a `_meta` that is no object.
    #[test]
    fn a_sessions_memo_reads_each_meta_as_it_reads_alone() {
        let cc = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.328"}"#;
        let long = format!(r#"{{{cc},"pad":"{}","progressToken":9}}"#, "x".repeat(5000));
        let metas = [
            format!("{{{cc}}}"),
            format!("{{{cc}}}"),
            format!(r#"{{{cc},"progressToken":1}}"#),
            format!(r#"{{{cc},"progressToken":2}}"#),
            format!(r#"{{{cc},"progressToken":2}}"#),
            format!(r#"{{{cc},"progressT\u006fken":3}}"#),
            format!(r#"{{{cc},"io.modelcontextprotocol/logLevel":"error"}}"#),
            format!(r#"{{{cc},"\udfff":1,"progressToken":4}}"#),
            format!(r#"{{{cc},"\udfff":1,"progressToken":4}}"#),
            format!("{{{cc}}}"),
            String::new(),
            long.clone(),
            long.replace(":9}", ":10}"),
            "[1]".into(),
            r#"{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}"#.into(),
            format!("{{{cc}}}"),
        ];
        let line = |meta: &str| {
            let params = match meta {
                "" => r#"{"name":"t"}"#.to_string(),
                m => format!(r#"{{"name":"t","_meta":{m}}}"#),
            };
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#)
        };
        let read = |r: &Request| {
            (
                r.progress_token.as_ref().map(|t| t.get().to_string()),
                r.envelope
                    .as_ref()
                    .map(|e| (e.version.clone(), e.log_level.clone())),
                r.unreadable,
            )
        };
        let mut memo = MetaMemo::default();
        for meta in &metas {
            let text = line(meta);
            let alone = classify(&text);
            let through = Request::classify_in(Message::parse(text.as_bytes()).unwrap(), &mut memo);
            assert_eq!(read(&through), read(&alone), "{meta}");
            // A `_meta` past what the memo keeps is read, not kept.
            assert!(memo.text.len() <= MetaMemo::KEEP_UP_TO);
        }
        assert_eq!(memo.text, metas[metas.len() - 1]);
    }

    #[test]
    fn lists_tasks_subscriptions_and_levels() {
        assert!(
            classify(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_first_tools_page()
        );
        assert!(
            !classify(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":null}}"#)
                .is_first_tools_page()
        );
        let t = classify(
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t1"}}"#,
        );
        assert_eq!(
            (t.method, t.task_id.as_deref()),
            (Method::TaskOp, Some("t1"))
        );
        let s = classify(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"u"}}"#,
        );
        assert_eq!(s.uri.as_deref(), Some("u"));
        let l = classify(
            r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"info"}}"#,
        );
        assert_eq!(l.level.as_deref(), Some("info"));
        let c = classify(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"task":{}}}"#,
        );
        assert!(c.creates_task);
        let odd = classify(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#);
        assert_eq!((odd.tool.as_str(), odd.arguments().is_none()), ("", true));
    }
}
