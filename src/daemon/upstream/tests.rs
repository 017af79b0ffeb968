//! The actor's routing rules, checked by feeding it events directly: a pipe stands in for the
//! child's stdin and socket pairs for the sessions, so every rule is tested without a process.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, watch};

use super::child_io::ChildHandle;
use super::era;
use super::*;
use crate::daemon::outbox::Outbox;

/// An actor with a fake child and sessions, driven one event at a time.
struct Harness {
    actor: Upstream,
    _events: mpsc::Receiver<Event>,
    child: BufReader<pipe::Receiver>,
    sessions: HashMap<SessionId, BufReader<UnixStream>>,
    /// The id of the daemon's own listen on a 2026-07-28 child.
    own_listen: Value,
}

fn config(extra: Value) -> ServerConfig {
    let mut server = json!({"command": "/bin/false", "credentials": {"source": "none"}});
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        server[k] = v;
    }
    let cfg = crate::config::Config::from_value(json!({"servers": {"t": server}}), None).unwrap();
    cfg.servers["t"].clone()
}

impl Harness {
    /// An upstream with a fake child that has not answered anything yet.
    fn spawned(extra: Value) -> Harness {
        let (tx, rx) = mpsc::channel(64);
        let mut actor = Upstream::new(config(extra), "/nonexistent/rec".into(), 1 << 20, tx);
        // Never read or write a real cache in unit tests.
        actor.cache = Cache::new("t", &format!("unit-test-{}", std::process::id()));
        let (writer, reader) = pipe::pipe().unwrap();
        let (_, exited) = watch::channel(false);
        actor.on_spawned(ChildHandle::for_test(Outbox::new(writer).0, exited));
        Harness {
            actor,
            _events: rx,
            child: BufReader::new(reader),
            sessions: HashMap::new(),
            own_listen: Value::Null,
        }
    }

    /// A ready upstream whose fake child speaks only the handshake era: it refused the probe,
    /// answered `initialize` and the first `tools/list`.
    async fn ready(extra: Value) -> Harness {
        let mut h = Harness::spawned(extra);
        let probe = h.child_reads().await;
        assert_eq!(probe["method"], "server/discover");
        h.child_says(json!({"jsonrpc": "2.0", "id": probe["id"],
            "error": {"code": -32601, "message": "Method not found"}}));
        let init = h.child_reads().await;
        assert_eq!(init["method"], "initialize");
        h.child_says(json!({"jsonrpc": "2.0", "id": init["id"], "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake", "version": "1"}}}));
        assert_eq!(h.child_reads().await["method"], "notifications/initialized");
        let list = h.child_reads().await;
        assert_eq!(list["method"], "tools/list");
        h.child_says(
            json!({"jsonrpc": "2.0", "id": list["id"], "result": {"tools": [{"name": "echo"}]}}),
        );
        assert!(h.actor.life.is_ready());
        h
    }

    /// A ready upstream whose fake child speaks 2026-07-28: it answered the probe, the daemon
    /// opened its own subscription, and the child answered the daemon's first `tools/list`.
    async fn modern(extra: Value) -> Harness {
        let mut h = Harness::spawned(extra);
        let probe = h.child_reads().await;
        assert_eq!(probe["method"], "server/discover");
        assert_eq!(probe["params"]["_meta"][era::META_VERSION], "2026-07-28");
        h.child_says(json!({"jsonrpc": "2.0", "id": probe["id"], "result": {
            "resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}}, "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake", "version": "1"}}}}));
        let listen = h.child_reads().await;
        assert_eq!(listen["method"], "subscriptions/listen");
        let list = h.child_reads().await;
        assert_eq!(list["method"], "tools/list");
        assert_eq!(list["params"]["_meta"][era::META_VERSION], "2026-07-28");
        h.child_says(json!({"jsonrpc": "2.0", "id": list["id"], "result": {
            "resultType": "complete", "tools": [{"name": "echo"}], "ttlMs": 60000, "cacheScope": "private"}}));
        assert!(h.actor.life.is_ready());
        h.own_listen = listen["id"].clone();
        h
    }

    /// Connect a session that declares `capabilities` and has initialized.
    async fn session(&mut self, id: SessionId, capabilities: Value) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (r, w) = ours.into_split();
        let (_, w) = crate::daemon::session_socket::split(BufReader::new(r), w).unwrap();
        let hello = Box::new(crate::wire::Hello::mcp(Some("t".into())));
        self.actor.handle(Event::SessionOpen {
            id,
            hello,
            out: Outbox::new(w).0,
        });
        self.sessions.insert(id, BufReader::new(theirs));
        self.says(
            id,
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": format!("client{id}"), "version": "1"}}}),
        );
        assert_eq!(self.reads(id).await["id"], "init");
        self.says(
            id,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
    }

    fn says(&mut self, id: SessionId, msg: Value) {
        let line = serde_json::to_vec(&msg).unwrap();
        self.actor.handle(Event::SessionLine { id, line });
    }

    fn child_says(&mut self, msg: Value) {
        let line = serde_json::to_vec(&msg).unwrap();
        let generation = self.actor.life.generation;
        self.actor.handle(Event::Child {
            generation,
            event: ChildEvent::Line(line),
        });
    }

    async fn reads(&mut self, id: SessionId) -> Value {
        read_line(self.sessions.get_mut(&id).unwrap()).await
    }

    async fn child_reads(&mut self) -> Value {
        read_line(&mut self.child).await
    }

    /// Nothing more arrives for session `id` within a short while.
    async fn reads_nothing(&mut self, id: SessionId) {
        let r = self.sessions.get_mut(&id).unwrap();
        let mut line = String::new();
        let got = tokio::time::timeout(Duration::from_millis(50), r.read_line(&mut line)).await;
        assert!(got.is_err(), "session {id} unexpectedly read {line}");
    }

    async fn child_reads_nothing(&mut self) {
        let mut line = String::new();
        let got =
            tokio::time::timeout(Duration::from_millis(50), self.child.read_line(&mut line)).await;
        assert!(got.is_err(), "the child unexpectedly read {line}");
    }
}

async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Value {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(5), r.read_line(&mut line))
        .await
        .expect("a line within 5 s")
        .unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn call(id: Value, tool: &str, extra_params: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": {}});
    for (k, v) in extra_params.as_object().cloned().unwrap_or_default() {
        params[k] = v;
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

#[tokio::test]
async fn the_same_id_from_two_sessions_comes_back_to_each() {
    let mut h = Harness::ready(json!({"maxConcurrent": 2})).await;
    h.session(1, json!({})).await;
    h.session(2, json!({})).await;
    h.says(1, call(json!(7), "echo", json!({})));
    h.says(2, call(json!(7), "echo", json!({})));
    let (a, b) = (h.child_reads().await, h.child_reads().await);
    assert_ne!(a["id"], b["id"], "the child sees distinct ids");
    // Answer out of order, each with a result naming who asked.
    h.child_says(json!({"jsonrpc": "2.0", "id": b["id"], "result": {"who": 2}}));
    h.child_says(json!({"jsonrpc": "2.0", "id": a["id"], "result": {"who": 1}}));
    let (r1, r2) = (h.reads(1).await, h.reads(2).await);
    assert_eq!(
        (r1["id"].clone(), r1["result"]["who"].clone()),
        (json!(7), json!(1))
    );
    assert_eq!(
        (r2["id"].clone(), r2["result"]["who"].clone()),
        (json!(7), json!(2))
    );
    assert_eq!(h.actor.inflight.calls(), 0);
}

#[tokio::test]
async fn progress_reaches_only_the_tokens_owner_under_its_own_token() {
    let mut h = Harness::ready(json!({"maxConcurrent": 2})).await;
    h.session(1, json!({})).await;
    h.session(2, json!({})).await;
    let meta = json!({"_meta": {"progressToken": "p"}});
    h.says(1, call(json!(1), "echo", meta.clone()));
    h.says(2, call(json!(1), "echo", meta));
    let (a, b) = (h.child_reads().await, h.child_reads().await);
    let token_b = b["params"]["_meta"]["progressToken"].clone();
    assert_ne!(a["params"]["_meta"]["progressToken"], token_b);
    h.child_says(json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": token_b, "progress": 1}}));
    let p = h.reads(2).await;
    assert_eq!(p["params"]["progressToken"], "p");
    h.reads_nothing(1).await;
}

#[tokio::test]
async fn a_cancel_reaches_the_child_and_the_late_answer_is_dropped() {
    let mut h = Harness::ready(json!({})).await;
    h.session(1, json!({})).await;
    h.says(1, call(json!("c"), "echo", json!({})));
    let sent = h.child_reads().await;
    h.says(
        1,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "c", "reason": "changed my mind"}}),
    );
    let cancel = h.child_reads().await;
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], sent["id"]);
    h.child_says(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {}}));
    h.reads_nothing(1).await;
    assert_eq!(h.actor.stats.cancelled, 1);
}

#[tokio::test]
async fn calls_queue_fairly_under_max_concurrent() {
    let mut h = Harness::ready(json!({"maxConcurrent": 1})).await;
    h.session(1, json!({})).await;
    h.session(2, json!({})).await;
    for i in 0..3 {
        h.says(1, call(json!(format!("a{i}")), "echo", json!({})));
    }
    h.says(2, call(json!("b0"), "echo", json!({})));
    let first = h.child_reads().await;
    h.child_reads_nothing().await;
    assert_eq!(h.actor.waiting.calls(), 3);
    h.child_says(json!({"jsonrpc": "2.0", "id": first["id"], "result": {}}));
    assert_eq!(h.reads(1).await["id"], "a0");
    // Session 1's turn came first (a1 was queued before b0), then session 2's, then 1's again.
    for (session, id) in [(1, "a1"), (2, "b0"), (1, "a2")] {
        let next = h.child_reads().await;
        h.child_says(json!({"jsonrpc": "2.0", "id": next["id"], "result": {}}));
        assert_eq!(h.reads(session).await["id"], id);
    }
}

#[tokio::test]
async fn a_child_request_goes_to_the_one_busy_session_and_is_refused_when_ambiguous() {
    let mut h = Harness::ready(json!({"maxConcurrent": 2})).await;
    let roots = json!({"roots": {}});
    h.session(1, roots.clone()).await;
    h.session(2, roots).await;
    h.says(1, call(json!(1), "ask", json!({})));
    h.child_reads().await;
    h.child_says(json!({"jsonrpc": "2.0", "id": 900, "method": "roots/list"}));
    let asked = h.reads(1).await;
    assert_eq!(asked["method"], "roots/list");
    assert_ne!(asked["id"], 900, "the session sees the daemon's id");
    h.reads_nothing(2).await;
    // Another session may not answer it.
    h.says(
        2,
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": ["evil"]}}),
    );
    h.child_reads_nothing().await;
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": []}}),
    );
    let answer = h.child_reads().await;
    assert_eq!(
        (answer["id"].clone(), answer["result"].clone()),
        (json!(900), json!({"roots": []}))
    );

    // With both sessions busy, nobody is asked.
    h.says(2, call(json!(2), "ask", json!({})));
    h.child_reads().await;
    h.child_says(json!({"jsonrpc": "2.0", "id": 901, "method": "roots/list"}));
    let refused = h.child_reads().await;
    assert_eq!(refused["id"], 901);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ambiguous")
    );
    h.reads_nothing(1).await;
    h.reads_nothing(2).await;
}

/// Regression (hardening review): B's call timed out, the child went on with it and asked for
/// an elicitation, and the request went to A, the one session still busy.
#[tokio::test]
async fn a_request_of_a_call_the_child_may_still_run_never_goes_to_another_session() {
    let mut h = Harness::ready(json!({"maxConcurrent": 2})).await;
    let caps = json!({"elicitation": {}});
    h.session(1, caps.clone()).await;
    h.session(2, caps).await;
    h.says(2, call(json!("b"), "ask", json!({})));
    let b = h.child_reads().await;
    h.says(2, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "b"}}));
    assert_eq!(h.child_reads().await["method"], "notifications/cancelled");
    h.says(1, call(json!("a"), "echo", json!({})));
    h.child_reads().await;
    h.child_says(
        json!({"jsonrpc": "2.0", "id": 77, "method": "elicitation/create",
        "params": {"message": "secret of caller B"}}),
    );
    let refused = h.child_reads().await;
    assert_eq!(refused["id"], 77);
    assert!(refused.get("error").is_some(), "{refused}");
    h.reads_nothing(1).await;
    h.reads_nothing(2).await;
    // The child answers B's call after all: from then on A is the only one it works for.
    h.child_says(json!({"jsonrpc": "2.0", "id": b["id"], "result": {}}));
    h.child_says(json!({"jsonrpc": "2.0", "id": 78, "method": "elicitation/create", "params": {"message": "for A"}}));
    assert_eq!(h.reads(1).await["params"]["message"], "for A");
    // A session that left stays a candidate for its calls the child may still run.
    let mut h = Harness::ready(json!({"maxConcurrent": 2})).await;
    h.session(1, json!({"elicitation": {}})).await;
    h.session(2, json!({"elicitation": {}})).await;
    h.says(2, call(json!("b"), "ask", json!({})));
    h.child_reads().await;
    h.actor.handle(Event::SessionClosed { id: 2 });
    assert_eq!(h.child_reads().await["method"], "notifications/cancelled");
    h.says(1, call(json!("a"), "echo", json!({})));
    h.child_reads().await;
    h.child_says(json!({"jsonrpc": "2.0", "id": 79, "method": "elicitation/create", "params": {"message": "B's"}}));
    assert!(h.child_reads().await.get("error").is_some());
    h.reads_nothing(1).await;
}

/// Regression (hardening review): a request with `"id": null` was taken for a notification and
/// forwarded, so its sender waited for an answer that never came.
#[tokio::test]
async fn a_null_id_is_an_invalid_request() {
    let mut h = Harness::ready(json!({})).await;
    h.session(1, json!({})).await;
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "echo"}}),
    );
    let e = h.reads(1).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    h.child_reads_nothing().await;
}

#[tokio::test]
async fn a_task_is_visible_only_to_its_creator() {
    let mut h = Harness::ready(json!({})).await;
    h.session(1, json!({})).await;
    h.session(2, json!({})).await;
    h.says(1, call(json!(1), "echo", json!({"task": {"ttl": 1000}})));
    let sent = h.child_reads().await;
    h.child_says(json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"task": {"taskId": "T"}}}));
    h.reads(1).await;
    h.says(
        2,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/result", "params": {"taskId": "T"}}),
    );
    let refused = h.reads(2).await;
    assert_eq!(refused["error"]["code"], -32602);
    h.child_reads_nothing().await;
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"taskId": "T"}}),
    );
    assert_eq!(h.child_reads().await["method"], "tasks/get");
}

#[tokio::test]
async fn each_session_gets_only_the_logs_its_level_admits() {
    let mut h = Harness::ready(json!({})).await;
    h.session(1, json!({})).await;
    h.session(2, json!({})).await;
    h.says(1, json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}}));
    h.reads(1).await;
    h.says(2, json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}));
    h.reads(2).await;
    // The child is asked for the most verbose level any session wants.
    let asked: Vec<Value> = vec![h.child_reads().await, h.child_reads().await];
    assert_eq!(asked[1]["params"]["level"], "debug");
    h.child_says(json!({"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "data": "x"}}));
    assert_eq!(h.reads(2).await["params"]["data"], "x");
    h.reads_nothing(1).await;
}

#[tokio::test]
async fn a_first_tools_page_comes_from_the_cache_with_the_coogle_tool() {
    let mut h = Harness::ready(json!({})).await;
    h.actor.coogle_tool = true;
    h.session(1, json!({})).await;
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    let listed = h.reads(1).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["echo", "coogle"]);
    h.child_reads_nothing().await;
    // A later page goes to the child.
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "c"}}),
    );
    assert_eq!(h.child_reads().await["params"]["cursor"], "c");
}

#[tokio::test]
async fn a_closed_session_cancels_its_calls_upstream() {
    let mut h = Harness::ready(json!({"maxConcurrent": 1})).await;
    h.session(1, json!({})).await;
    h.says(1, call(json!(1), "echo", json!({})));
    h.says(1, call(json!(2), "echo", json!({})));
    let sent = h.child_reads().await;
    h.actor.handle(Event::SessionClosed { id: 1 });
    let cancel = h.child_reads().await;
    assert_eq!(cancel["params"]["requestId"], sent["id"]);
    assert_eq!((h.actor.waiting.calls(), h.actor.inflight.calls()), (0, 0));
    h.child_reads_nothing().await;
}

// ---------------------------------------------------------------------------------------------
// Protocol eras.

/// A 2026-07-28 envelope for a request's `_meta`.
fn envelope(client: &str, caps: Value) -> Value {
    json!({
        era::META_VERSION: "2026-07-28",
        era::META_CAPABILITIES: caps,
        era::META_CLIENT_INFO: {"name": client, "version": "1"},
    })
}

fn modern_call(id: Value, tool: &str, meta: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta}})
}

impl Harness {
    /// Connect a session without a handshake (a 2026-07-28 client).
    fn bare_session(&mut self, id: SessionId) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (r, w) = ours.into_split();
        let (_, w) = crate::daemon::session_socket::split(BufReader::new(r), w).unwrap();
        let hello = Box::new(crate::wire::Hello::mcp(Some("t".into())));
        self.actor.handle(Event::SessionOpen {
            id,
            hello,
            out: Outbox::new(w).0,
        });
        self.sessions.insert(id, BufReader::new(theirs));
    }
}

/// A slow 2026-07-28 child: the probe timed out, so `initialize` went out too, and then the
/// probe's answer came and the child became ready in 2026-07-28. An `initialize` it never answers
/// (it serves the other era now) timing out stops nothing.
#[tokio::test]
async fn an_unanswered_initialize_stops_no_child_the_late_probe_made_ready() {
    let mut h = Harness::spawned(json!({}));
    let probe = h.child_reads().await;
    assert_eq!(probe["method"], "server/discover");
    h.actor.on_probe_timeout();
    let init = h.child_reads().await;
    assert_eq!(init["method"], "initialize");
    h.child_says(json!({"jsonrpc": "2.0", "id": probe["id"], "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake", "version": "1"}}}}));
    assert!(h.actor.life.is_ready());
    h.actor.on_timeout(init["id"].as_u64().unwrap());
    assert!(h.actor.life.is_ready());
    assert_eq!(h.actor.life.last_error, None);
}

#[tokio::test]
async fn discover_is_answered_by_the_daemon_with_a_version_check() {
    let mut h = Harness::modern(json!({})).await;
    h.bare_session(1);
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover",
        "params": {"_meta": envelope("claude-code", json!({"roots": {"listChanged": true}}))}}),
    );
    let d = h.reads(1).await;
    assert_eq!(d["id"], "server-discover-probe-1");
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    h.child_reads_nothing().await;
    let mut old = envelope("x", json!({}));
    old[era::META_VERSION] = json!("2099-01-01");
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": old}}),
    );
    let e = h.reads(1).await;
    assert_eq!(e["error"]["code"], -32022);
    assert_eq!(
        e["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "2099-01-01"})
    );
}

#[tokio::test]
async fn a_modern_sessions_request_passes_with_its_own_envelope() {
    let mut h = Harness::modern(json!({"maxConcurrent": 2})).await;
    h.bare_session(1);
    h.bare_session(2);
    let meta_a = envelope("a", json!({"sampling": {}}));
    let mut meta_b = envelope("b", json!({}));
    meta_b["progressToken"] = json!(1);
    h.says(1, modern_call(json!(1), "echo", meta_a.clone()));
    h.says(2, modern_call(json!(1), "echo", meta_b));
    let (a, b) = (h.child_reads().await, h.child_reads().await);
    assert_eq!(a["params"]["_meta"], meta_a, "untouched");
    assert_eq!(b["params"]["_meta"][era::META_CLIENT_INFO]["name"], "b");
    assert_ne!(
        b["params"]["_meta"]["progressToken"], 1,
        "tokens are still rewritten"
    );
    h.child_says(json!({"jsonrpc": "2.0", "id": a["id"], "result": {"resultType": "complete", "content": []}}));
    assert_eq!(h.reads(1).await["id"], 1);
    h.reads_nothing(2).await;
}

#[tokio::test]
async fn a_handshake_session_on_a_modern_child_is_initialized_and_wrapped() {
    let mut h = Harness::modern(json!({})).await;
    h.session(1, json!({"elicitation": {}})).await;
    h.says(1, json!({"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": "warning"}}));
    h.reads(1).await;
    h.child_reads_nothing().await;
    h.says(1, call(json!(9), "echo", json!({})));
    let sent = h.child_reads().await;
    let meta = &sent["params"]["_meta"];
    assert_eq!(meta[era::META_VERSION], "2026-07-28");
    assert_eq!(meta[era::META_CAPABILITIES], json!({"elicitation": {}}));
    assert_eq!(meta[era::META_CLIENT_INFO]["name"], "client1");
    assert_eq!(meta[era::META_LOG_LEVEL], "warning");
}

#[tokio::test]
async fn input_required_is_asked_of_the_calling_handshake_session_and_retried() {
    let mut h = Harness::modern(json!({"maxConcurrent": 2})).await;
    h.session(1, json!({"elicitation": {}})).await;
    h.session(2, json!({"elicitation": {}})).await;
    h.says(1, call(json!("c1"), "ask", json!({})));
    let first = h.child_reads().await;
    h.child_says(json!({"jsonrpc": "2.0", "id": first["id"], "result": {"resultType": "input_required",
        "inputRequests": {"q": {"method": "elicitation/create", "params": {"message": "secret of 1"}}},
        "requestState": "s1"}}));
    let asked = h.reads(1).await;
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "secret of 1");
    h.reads_nothing(2).await;
    // Another session cannot answer it.
    h.says(2, json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"x": "evil"}}}));
    h.child_reads_nothing().await;
    h.says(1, json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"x": 1}}}));
    let retry = h.child_reads().await;
    assert_ne!(retry["id"], first["id"], "a retry is a new request");
    assert_eq!(
        retry["params"]["inputResponses"],
        json!({"q": {"action": "accept", "content": {"x": 1}}})
    );
    assert_eq!(retry["params"]["requestState"], "s1");
    assert_eq!(retry["params"]["name"], "ask");
    h.child_says(json!({"jsonrpc": "2.0", "id": retry["id"], "result": {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}}));
    let done = h.reads(1).await;
    assert_eq!(
        (
            done["id"].clone(),
            done["result"]["content"][0]["text"].clone()
        ),
        (json!("c1"), json!("done"))
    );
}

#[tokio::test]
async fn a_modern_session_gets_input_required_as_it_is() {
    let mut h = Harness::modern(json!({})).await;
    h.bare_session(1);
    h.says(
        1,
        modern_call(json!(3), "ask", envelope("m", json!({"elicitation": {}}))),
    );
    let sent = h.child_reads().await;
    let ir = json!({"resultType": "input_required", "inputRequests": {"q": {"method": "elicitation/create", "params": {}}}});
    h.child_says(json!({"jsonrpc": "2.0", "id": sent["id"], "result": ir}));
    assert_eq!(h.reads(1).await["result"], ir);
}

#[tokio::test]
async fn a_listen_stream_reaches_only_its_session_under_its_own_id() {
    let mut h = Harness::modern(json!({})).await;
    h.bare_session(1);
    h.bare_session(2);
    h.says(1, json!({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
        "params": {"_meta": envelope("a", json!({})), "notifications": {"toolsListChanged": true}}}));
    let listen = h.child_reads().await;
    let tag = |id: &Value| json!({"_meta": {era::META_SUBSCRIPTION: id}});
    h.child_says(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": tag(&listen["id"])}));
    let got = h.reads(1).await;
    assert_eq!(got["params"]["_meta"][era::META_SUBSCRIPTION], "L");
    h.reads_nothing(2).await;
    // Streams never time out; a cancel ends one upstream.
    h.says(1, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}}));
    let cancel = h.child_reads().await;
    assert_eq!(cancel["params"]["requestId"], listen["id"]);
}

#[tokio::test]
async fn the_daemons_own_listen_serves_handshake_sessions() {
    let mut h = Harness::modern(json!({})).await;
    h.session(1, json!({})).await;
    h.bare_session(2);
    let own = h.own_listen.clone();
    h.child_says(
        json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed",
        "params": {"_meta": {era::META_SUBSCRIPTION: own}}}),
    );
    let got = h.reads(1).await;
    assert_eq!(got["method"], "notifications/prompts/list_changed");
    assert!(
        got.get("params").is_none() || got["params"].get("_meta").is_none(),
        "untagged: {got}"
    );
    h.reads_nothing(2).await;
    // A handshake session's subscribe replaces the daemon's listen with one for its URI.
    h.says(1, json!({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": {"uri": "u:1"}}));
    assert_eq!(h.reads(1).await["id"], 4);
    assert_eq!(h.child_reads().await["method"], "notifications/cancelled");
    let relisten = h.child_reads().await;
    assert_eq!(
        relisten["params"]["notifications"]["resourceSubscriptions"],
        json!(["u:1"])
    );
}

#[tokio::test]
async fn a_request_scoped_log_reaches_only_the_session_that_asked() {
    let mut h = Harness::modern(json!({"maxConcurrent": 3})).await;
    h.bare_session(1);
    h.bare_session(2);
    let mut asks = envelope("a", json!({}));
    asks[era::META_LOG_LEVEL] = json!("info");
    h.says(1, modern_call(json!(1), "echo", asks.clone()));
    h.says(2, modern_call(json!(1), "echo", envelope("b", json!({}))));
    h.child_reads().await;
    h.child_reads().await;
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "a's"}});
    h.child_says(log.clone());
    assert_eq!(h.reads(1).await["params"]["data"], "a's");
    h.reads_nothing(2).await;
    // When two sessions could have asked, neither gets it.
    h.says(2, modern_call(json!(2), "echo", asks));
    h.child_reads().await;
    h.child_says(log);
    h.reads_nothing(1).await;
    h.reads_nothing(2).await;
    assert_eq!(h.actor.unattributed_logs, 1);
}

#[tokio::test]
async fn a_modern_session_on_a_handshake_child_gets_the_childs_answers() {
    let mut h = Harness::ready(json!({})).await;
    h.bare_session(1);
    h.says(
        1,
        json!({"jsonrpc": "2.0", "id": "p", "method": "server/discover",
        "params": {"_meta": envelope("cc", json!({}))}}),
    );
    let d = h.reads(1).await;
    assert_eq!(
        d["error"],
        json!({"code": -32601, "message": "Method not found"}),
        "the child's own answer"
    );
    h.says(1, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": envelope("cc", json!({}))}}));
    let e = h.reads(1).await;
    assert_eq!(e["error"]["code"], -32022);
    assert_eq!(e["error"]["data"]["supported"], json!(["2025-11-25"]));
    h.child_reads_nothing().await;
}

#[tokio::test]
async fn tool_lists_follow_each_sessions_capabilities() {
    let mut h = Harness::modern(json!({})).await;
    h.bare_session(1);
    let list = |caps: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": envelope("x", caps)}})
    };
    // The daemon's own list (config capabilities, TTL 60 s) does not answer another set.
    h.says(1, list(json!({"sampling": {}})));
    let asked = h.child_reads().await;
    assert_eq!(
        asked["params"]["_meta"][era::META_CAPABILITIES],
        json!({"sampling": {}})
    );
    h.child_says(
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"resultType": "complete",
        "tools": [{"name": "echo"}, {"name": "sample"}], "ttlMs": 60000, "cacheScope": "public"}}),
    );
    assert_eq!(
        h.reads(1).await["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Within its TTL the same capabilities are answered from the cache.
    h.says(1, list(json!({"sampling": {}})));
    assert_eq!(
        h.reads(1).await["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    h.child_reads_nothing().await;
    // A list the child marks private is for the request that got it: never reused.
    h.says(1, list(json!({"elicitation": {}})));
    let asked = h.child_reads().await;
    h.child_says(
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"resultType": "complete",
        "tools": [{"name": "echo"}], "ttlMs": 60000, "cacheScope": "private"}}),
    );
    h.reads(1).await;
    h.says(1, list(json!({"elicitation": {}})));
    let again = h.child_reads().await;
    assert_eq!(again["method"], "tools/list", "{again}");
}

/// A frozen child is about to be carried to the next daemon: it is never parked, however long
/// it idles (parking it mid-hand-over carried a dying child, and the next daemon failed calls
/// with "exited (status unknown)"). Unfrozen, it parks as before.
#[tokio::test]
async fn a_frozen_child_is_not_parked() {
    let mut h = Harness::ready(json!({})).await;
    h.actor.life.idle_stop = Duration::from_millis(1);
    h.actor.note_idle();
    let (idle, _quiet) = tokio::sync::oneshot::channel();
    h.actor.freeze(idle);
    let later = std::time::Instant::now() + Duration::from_secs(5);
    h.actor.check_idle(later);
    assert!(h.actor.life.is_ready(), "a frozen child was parked");
    assert!(h.actor.life.child.is_some());
    h.actor.unfreeze();
    h.actor.note_idle();
    h.actor.check_idle(later);
    assert!(
        !h.actor.life.is_ready(),
        "an idle child past idleStopMs parks"
    );
}
