//! A small fake MCP server over stdio, started by the integration tests and benchmarks as a
//! real child process so faults can be injected exactly: slow calls, crashes, stderr spam,
//! large results, progress, cancellation, list changes and startup failures.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout with plain std threads (no rmcp,
//! no tokio), so its behaviour is deterministic and it starts at once. Every `tools/call` runs
//! on its own thread, so several calls can be in flight and be answered out of order. It must
//! never write anything but whole JSON lines to stdout: diagnostics go to stderr.
//!
//! It speaks both protocol eras, and locks each connection to one of them as the official
//! Python SDK does: the first *request* decides, once. A request whose `params._meta` has
//! `io.modelcontextprotocol/protocolVersion` (other than `initialize`) makes the connection
//! modern (2026-07-28: no handshake, a `_meta` envelope on every request, `server/discover`,
//! `subscriptions/listen`, input_required results instead of server→client requests); anything
//! else makes it legacy (the `initialize` handshake, 2025-11-25 and earlier). Notifications
//! before that are just handled. A legacy connection behaves exactly as this server always did.
//! On a modern one the tools that need the client keep their names but not their mechanics:
//! `ask` and `sample` answer `input_required` and finish on the retry, `notify` reaches only
//! the `subscriptions/listen` streams that asked (tagged with their ids), and log messages only
//! requests whose envelope carries a `logLevel` at or below the message's level.
//!
//! Fault injection through the environment (read at startup):
//! - `FAKE_MCP_ERA`: `dual` (the default: the first request decides), `modern` (2026-07-28
//!   only: `initialize` gets -32022), `legacy` (handshake only, as the legacy TS SDK: an
//!   enveloped request is served with legacy shapes, `server/discover` gets -32601) or
//!   `unlocked` (both eras on one connection, each request served in the era its own envelope
//!   says, as a server that never locks does).
//! - `FAKE_MCP_TTL_MS`: the `ttlMs` cache hint of modern discover, list and read results
//!   (default 0, what both SDKs send).
//! - `FAKE_MCP_CACHE_SCOPE`: the `cacheScope` of modern list and read results (default
//!   `private`, what both SDKs send; `public` for a server whose lists are the same for all).
//! - `FAKE_MCP_DISCOVER_DELAY_MS`: answer `server/discover` this late (other requests are not
//!   held up), to play a server whose start is slower than a client's probe timeout.
//! - `FAKE_MCP_EXIT_ON_DISCOVER`: exit at once with code 1 when the first message is
//!   `server/discover`, as rmcp < 3 servers do on any first message but `initialize`.
//! - `FAKE_MCP_START_DELAY_MS`: sleep this long before reading stdin.
//! - `FAKE_MCP_EXIT_AT_START`: exit at once with this code.
//! - `FAKE_MCP_PID_FILE`: append `<pid>\n` to this file (one write), to count spawns.
//! - `FAKE_MCP_EVENT_LOG`: append `<method> <id|-> <progressToken|->` per received message
//!   (`notifications/cancelled <requestId>` for cancels), to check what the child received. On
//!   a modern connection each request's line goes on with ` era=modern` and, when its envelope
//!   names the client, ` client=<clientInfo.name>`: extra trailing fields, so readers that take
//!   the first three fields see the same lines in both eras.
//! - `FAKE_MCP_IGNORE_SIGTERM`: ignore SIGTERM, so escalation to SIGKILL can be checked.
//! - `FAKE_MCP_TICK_MS`: send a `notifications/message` (level info, logger `tick`, data
//!   `{"seq": n}`, n counting from 0) every this many ms, from the start, for the log to lose.
//! - `FAKE_MCP_EXTRA_TOOL`: list one more tool with this name (a different list after respawn).
//! - `FAKE_MCP_INSTRUCTIONS_CWD`: end the instructions with ` cwd=<working directory>`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";
/// The one modern protocol version this server speaks.
const MODERN_VERSION: &str = "2026-07-28";
/// argv[1] that turns this binary into a do-nothing grandchild (see the `spawn_grandchild` tool).
const GRANDCHILD_ARG: &str = "--fake-mcp-grandchild";

/// The `_meta` keys of the 2026-07-28 per-request envelope, and of its answers.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
const META_SERVER: &str = "io.modelcontextprotocol/serverInfo";

/// Log levels from least to most severe (RFC 5424, as MCP names them).
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Modern results that carry the `ttlMs`/`cacheScope` cache hints.
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The one resource, whose updates the `notify` tool announces.
const HELLO_URI: &str = "fake://hello";

/// The Python SDK's words for an enveloped request on a connection locked to the handshake.
const LEGACY_LOCKED: &str = "this connection serves the handshake protocol era; requests carrying the 2026-07-28 envelope are not accepted on it";

/// Which eras this server will speak (`FAKE_MCP_ERA`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum EraMode {
    Dual,
    Modern,
    Legacy,
    Unlocked,
}

/// The era a connection is locked to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Era {
    Legacy,
    Modern,
}

/// State shared by the reader loop and the call threads.
struct Shared {
    /// Held while writing one line, so concurrent threads never interleave on stdout.
    stdout: Mutex<io::Stdout>,
    /// In-flight `tools/call` requests, keyed by their id as compact JSON; the value says
    /// whether a `notifications/cancelled` arrived for it.
    calls: Mutex<HashMap<String, bool>>,
    /// Signalled whenever a call is marked cancelled, to wake interruptible sleeps.
    cancelled: Condvar,
    event_log: Option<Mutex<File>>,
    extra_tool: Option<String>,
    /// Requests this server sent to its client (the `ask` tool), by id, with their answers.
    asks: Mutex<HashMap<String, Option<Value>>>,
    answered: Condvar,
    next_ask: AtomicU64,
    mode: EraMode,
    /// Set once, by the first request (or at start when `FAKE_MCP_ERA` allows only one era).
    era: OnceLock<Era>,
    /// Whether any message was read yet (`FAKE_MCP_EXIT_ON_DISCOVER` looks at the first).
    seen_message: AtomicBool,
    exit_on_discover: bool,
    discover_delay: Duration,
    ttl_ms: u64,
    /// `FAKE_MCP_CACHE_SCOPE`.
    cache_scope: String,
    /// The capabilities of the last legacy `initialize`: the legacy era remembers them for the
    /// connection, where a modern request carries its own.
    legacy_capabilities: Mutex<Value>,
    /// Open `subscriptions/listen` streams, in the order they were opened.
    subscriptions: Mutex<Vec<Subscription>>,
}

/// What a request handler decided to send back.
enum Reply {
    Result(Value),
    Error(i64, String),
    /// An error with `data` (the 2026-07-28 errors -32021 and -32022 carry some).
    ErrorData(i64, String, Value),
    /// The request was cancelled: send nothing.
    Nothing,
}

/// What one request's handler may know of its client. A legacy request gets what the
/// connection's `initialize` declared; a modern one only what its own envelope says, since a
/// 2026-07-28 server must not infer capabilities from earlier requests.
struct Ctx {
    era: Era,
    capabilities: Value,
    /// The envelope's `logLevel` as an index into `LOG_LEVELS`; None in the modern era means
    /// no log messages at all for this request.
    log_level: Option<usize>,
}

impl Ctx {
    fn declares(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|c| !c.is_null())
    }
}

/// One open `subscriptions/listen` stream: the listen request's id and what it asked for.
struct Subscription {
    /// The listen request's id, kept as sent: tags carry it with the same JSON type.
    id: Value,
    key: String,
    tools: bool,
    prompts: bool,
    resources: bool,
    resource_uris: Option<Vec<String>>,
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some(GRANDCHILD_ARG) {
        // A process that just lingers, for the daemon's process-group cleanup to reap. An
        // ignored SIGTERM survives exec; the grandchild should die of it like any helper.
        // SAFETY: restoring the default disposition before any other thread exists.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
        }
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }

    let pid = std::process::id();
    if let Some(path) = std::env::var_os("FAKE_MCP_PID_FILE") {
        let line = format!("{pid}\n");
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "fake-mcp: could not append to {}: {e}",
                path.to_string_lossy()
            );
        }
    }
    if std::env::var_os("FAKE_MCP_IGNORE_SIGTERM").is_some() {
        // SAFETY: installing SIG_IGN for SIGTERM before any other thread exists.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    eprintln!("fake-mcp started pid={pid}");

    if let Ok(code) = std::env::var("FAKE_MCP_EXIT_AT_START") {
        let code = code.trim().parse::<i32>().unwrap_or(1);
        eprintln!("fake-mcp: exiting at start with code {code}");
        std::process::exit(code);
    }

    let mode = match std::env::var("FAKE_MCP_ERA").as_deref().map(str::trim) {
        Err(_) | Ok("" | "dual") => EraMode::Dual,
        Ok("modern") => EraMode::Modern,
        Ok("legacy") => EraMode::Legacy,
        Ok("unlocked") => EraMode::Unlocked,
        Ok(other) => {
            // A typo must not quietly test the wrong era.
            eprintln!(
                "fake-mcp: FAKE_MCP_ERA must be dual, modern, legacy or unlocked, not {other:?}"
            );
            std::process::exit(2);
        }
    };
    let era = OnceLock::new();
    match mode {
        EraMode::Dual | EraMode::Unlocked => {}
        EraMode::Modern => {
            let _ = era.set(Era::Modern);
        }
        EraMode::Legacy => {
            let _ = era.set(Era::Legacy);
        }
    }
    let millis = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };

    let event_log =
        std::env::var_os("FAKE_MCP_EVENT_LOG").and_then(|path| {
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => Some(Mutex::new(f)),
                Err(e) => {
                    eprintln!("fake-mcp: could not open {}: {e}", path.to_string_lossy());
                    None
                }
            }
        });
    let shared = Arc::new(Shared {
        stdout: Mutex::new(io::stdout()),
        calls: Mutex::new(HashMap::new()),
        cancelled: Condvar::new(),
        event_log,
        extra_tool: std::env::var("FAKE_MCP_EXTRA_TOOL")
            .ok()
            .filter(|s| !s.is_empty()),
        asks: Mutex::new(HashMap::new()),
        answered: Condvar::new(),
        next_ask: AtomicU64::new(1),
        mode,
        era,
        seen_message: AtomicBool::new(false),
        exit_on_discover: std::env::var_os("FAKE_MCP_EXIT_ON_DISCOVER").is_some(),
        discover_delay: Duration::from_millis(millis("FAKE_MCP_DISCOVER_DELAY_MS").unwrap_or(0)),
        ttl_ms: millis("FAKE_MCP_TTL_MS").unwrap_or(0),
        cache_scope: std::env::var("FAKE_MCP_CACHE_SCOPE").unwrap_or_else(|_| "private".into()),
        legacy_capabilities: Mutex::new(json!({})),
        subscriptions: Mutex::new(Vec::new()),
    });

    if let Some(ms) = millis("FAKE_MCP_START_DELAY_MS") {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(ms) = millis("FAKE_MCP_TICK_MS") {
        let shared = shared.clone();
        std::thread::spawn(move || {
            for seq in 0u64.. {
                std::thread::sleep(Duration::from_millis(ms));
                shared.notify(
                    "notifications/message",
                    Some(json!({"level": "info", "logger": "tick", "data": {"seq": seq}})),
                );
            }
        });
    }

    let mut stdin = io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => handle_line(&shared, &line),
            Err(e) => {
                eprintln!("fake-mcp: reading stdin failed: {e}");
                std::process::exit(1);
            }
        }
    }
    // Stdin EOF: exit at once, holding the stdout lock so no call thread's line is cut. Open
    // subscriptions end with the process, as the spec says they do.
    let _out = lock(&shared.stdout);
    std::process::exit(0);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking call thread must not take the whole server down with a poisoned lock.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Write one JSON message as one line and flush it.
    fn send(&self, msg: &Value) {
        let mut buf = serde_json::to_vec(msg).expect("a Value always serializes");
        buf.push(b'\n');
        let out = lock(&self.stdout);
        let mut out = out.lock();
        // The reader may be gone; there is nobody left to tell, and stdin EOF ends us.
        let _ = out.write_all(&buf).and_then(|()| out.flush());
    }

    fn send_result(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn send_error(&self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    fn reply(&self, id: &Value, reply: Reply) {
        match reply {
            Reply::Result(r) => self.send_result(id, r),
            Reply::Error(code, message) => self.send_error(id, code, &message),
            Reply::ErrorData(code, message, data) => self.send(&json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": code, "message": message, "data": data},
            })),
            Reply::Nothing => {}
        }
    }

    /// Answer `server/discover`, `FAKE_MCP_DISCOVER_DELAY_MS` late. The era was locked when the
    /// request was read, as a real server locks it before its slow answer goes out; requests
    /// read meanwhile are served at once under that era.
    fn answer_discover(self: &Arc<Self>, id: Value, reply: Reply) {
        if self.discover_delay.is_zero() {
            self.reply(&id, reply);
            return;
        }
        let shared = Arc::clone(self);
        std::thread::spawn(move || {
            std::thread::sleep(shared.discover_delay);
            shared.reply(&id, reply);
        });
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        self.send(&msg);
    }

    /// Send `method` to every open subscription that `wants` it, tagged with its listen id.
    fn notify_subscribers(
        &self,
        method: &str,
        wants: impl Fn(&Subscription) -> bool,
        params: &Map<String, Value>,
    ) {
        let subscriptions = lock(&self.subscriptions);
        for s in subscriptions.iter().filter(|s| wants(s)) {
            let mut params = params.clone();
            params.insert("_meta".into(), json!({META_SUBSCRIPTION: s.id}));
            self.notify(method, Some(Value::Object(params)));
        }
    }

    fn log_event(&self, line: String) {
        if let Some(log) = &self.event_log {
            let mut f = lock(log);
            let _ = f.write_all(format!("{line}\n").as_bytes());
            let _ = f.flush();
        }
    }

    fn cancel(&self, key: &str) {
        let mut calls = lock(&self.calls);
        // Only calls still in flight: a late cancel must not poison a future reuse of the id.
        if let Some(cancelled) = calls.get_mut(key) {
            *cancelled = true;
            self.cancelled.notify_all();
        }
    }

    /// Sleep for `dur` unless the call is cancelled first; true if it was cancelled.
    fn sleep_unless_cancelled(&self, key: &str, dur: Duration) -> bool {
        let deadline = Instant::now() + dur;
        let mut calls = lock(&self.calls);
        loop {
            if calls.get(key).copied().unwrap_or(false) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            calls = self
                .cancelled
                .wait_timeout(calls, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The connection's era for this request: the first request decides it, once, as the
    /// Python SDK's `serve_dual_era_loop` does. An enveloped `initialize` still means legacy.
    fn era_for(&self, method: &str, enveloped: bool) -> Era {
        let own = || {
            if enveloped && method != "initialize" {
                Era::Modern
            } else {
                Era::Legacy
            }
        };
        if self.mode == EraMode::Unlocked {
            return own();
        }
        *self.era.get_or_init(own)
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).expect("a Value always serializes")
}

fn handle_line(shared: &Arc<Shared>, raw: &[u8]) {
    if raw.trim_ascii().is_empty() {
        return;
    }
    let msg: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            shared.send_error(&Value::Null, -32700, &format!("parse error: {e}"));
            return;
        }
    };
    let Value::Object(msg) = msg else {
        shared.send_error(
            &Value::Null,
            -32600,
            "invalid request: expected a JSON object",
        );
        return;
    };
    let first = !shared.seen_message.swap(true, Ordering::Relaxed);
    let id = msg.get("id").cloned();
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        if let Some(id) = &id
            && (msg.contains_key("result") || msg.contains_key("error"))
        {
            // The answer to an `ask`: hand it to the waiting call thread.
            let mut asks = lock(&shared.asks);
            if let Some(slot) = asks.get_mut(&compact(id)) {
                *slot = Some(Value::Object(msg.clone()));
                shared.answered.notify_all();
            }
            return;
        }
        let id = id.unwrap_or(Value::Null);
        shared.send_error(&id, -32600, "invalid request: no method");
        return;
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);

    if method == "notifications/cancelled" {
        let request_id = params
            .get("requestId")
            .map_or_else(|| "-".to_string(), compact);
        shared.log_event(format!("notifications/cancelled {request_id}"));
        eprintln!("cancelled {request_id}");
        shared.cancel(&request_id);
        // Cancelling a listen ends its subscription, with no answer.
        lock(&shared.subscriptions).retain(|s| s.key != request_id);
        return;
    }
    let meta = params.get("_meta").and_then(Value::as_object);
    let enveloped = meta.is_some_and(|m| m.contains_key(META_VERSION));
    // Only requests decide the era; notifications before the first one are just handled.
    let era = id.as_ref().map(|_| shared.era_for(method, enveloped));

    let token = meta
        .and_then(|m| m.get("progressToken"))
        .map_or_else(|| "-".to_string(), compact);
    let id_text = id.as_ref().map_or_else(|| "-".to_string(), compact);
    let mut event = format!("{method} {id_text} {token}");
    if era == Some(Era::Modern) {
        event.push_str(" era=modern");
        if let Some(name) = meta
            .and_then(|m| m.get(META_CLIENT))
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
        {
            // One field, whatever the name holds: readers split lines on whitespace.
            let name: String = name
                .chars()
                .map(|c| if c.is_whitespace() { '_' } else { c })
                .collect();
            event.push_str(&format!(" client={name}"));
        }
    }
    shared.log_event(event);

    if first && method == "server/discover" && shared.exit_on_discover {
        eprintln!("Error: ExpectedInitializeRequest(server/discover)");
        std::process::exit(1);
    }
    let (Some(id), Some(era)) = (id, era) else {
        // notifications/initialized and every other notification: nothing to answer.
        return;
    };
    match era {
        Era::Legacy => legacy_request(shared, id, method, params, enveloped),
        Era::Modern => modern_request(shared, id, method, params),
    }
}

/// A request on a connection serving the handshake era: exactly what this server always did.
fn legacy_request(shared: &Arc<Shared>, id: Value, method: &str, params: Value, enveloped: bool) {
    if shared.mode == EraMode::Dual && enveloped && method != "initialize" {
        // A dual-era server locked to the handshake refuses the other era, as the Python SDK
        // does; a legacy-only server knows no envelope and just serves the request.
        shared.send_error(&id, -32600, LEGACY_LOCKED);
        return;
    }
    if method == "server/discover" {
        // The legacy TypeScript SDK's answer to a method it does not know.
        shared.answer_discover(id, Reply::Error(-32601, "Method not found".into()));
        return;
    }
    let ctx = Ctx {
        era: Era::Legacy,
        capabilities: lock(&shared.legacy_capabilities).clone(),
        log_level: None,
    };
    if method == "tools/call" {
        start_call(shared, id, params, ctx);
        return;
    }
    let reply = handle_request(shared, method, &params, &ctx);
    shared.reply(&id, reply);
}

/// A request on a connection serving 2026-07-28: checked against its own envelope, removed
/// methods refused, results marked complete and given cache hints.
fn modern_request(shared: &Arc<Shared>, id: Value, method: &str, params: Value) {
    if method == "initialize" {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        shared.reply(
            &id,
            unsupported_version(
                requested,
                format!(
                    "this connection serves protocol version {MODERN_VERSION} (supported: {MODERN_VERSION}); the initialize handshake is not accepted"
                ),
            ),
        );
        return;
    }
    let ctx = match modern_ctx(&params) {
        Ok(ctx) => ctx,
        Err(reply) => {
            shared.reply(&id, reply);
            return;
        }
    };
    match method {
        "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
            shared.send_error(&id, -32601, "Method not found");
        }
        "server/discover" => shared.answer_discover(id, Reply::Result(discover_result(shared))),
        "subscriptions/listen" => listen(shared, id, &params),
        "tools/call" => start_call(shared, id, params, ctx),
        _ => {
            let reply = handle_request(shared, method, &params, &ctx);
            shared.reply(&id, modern_result(method, reply, shared));
        }
    }
}

/// The request's envelope as a `Ctx`, or the error a 2026-07-28 server answers without one.
fn modern_ctx(params: &Value) -> Result<Ctx, Reply> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let version = meta.and_then(|m| m.get(META_VERSION));
    let capabilities = meta
        .and_then(|m| m.get(META_CAPABILITIES))
        .filter(|c| c.is_object());
    let (Some(meta), Some(version), Some(capabilities)) = (meta, version, capabilities) else {
        return Err(Reply::Error(
            -32602,
            format!(
                "params._meta must be an object carrying the required '{META_VERSION}' and '{META_CAPABILITIES}' envelope keys"
            ),
        ));
    };
    if version.as_str() != Some(MODERN_VERSION) {
        let requested = version
            .as_str()
            .map_or_else(|| compact(version), String::from);
        return Err(unsupported_version(
            &requested,
            "Unsupported protocol version".into(),
        ));
    }
    let log_level = match meta.get(META_LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(level) => Some(level.as_str().and_then(log_rank).ok_or_else(|| {
            Reply::Error(
                -32602,
                format!(
                    "invalid params: unknown {META_LOG_LEVEL} {}",
                    compact(level)
                ),
            )
        })?),
    };
    Ok(Ctx {
        era: Era::Modern,
        capabilities: capabilities.clone(),
        log_level,
    })
}

fn unsupported_version(requested: &str, message: String) -> Reply {
    Reply::ErrorData(
        -32022,
        message,
        json!({"supported": [MODERN_VERSION], "requested": requested}),
    )
}

fn log_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

/// A 2026-07-28 result: every one says it is complete (unless it asks for input), and the
/// cacheable ones carry the cache hints both SDKs default to.
fn modern_result(method: &str, reply: Reply, shared: &Shared) -> Reply {
    let Reply::Result(Value::Object(mut result)) = reply else {
        return reply;
    };
    let complete = !result.contains_key("resultType");
    if complete {
        result.insert("resultType".into(), json!("complete"));
    }
    if complete && CACHEABLE.contains(&method) {
        result.insert("ttlMs".into(), json!(shared.ttl_ms));
        result.insert("cacheScope".into(), json!(shared.cache_scope));
    }
    Reply::Result(Value::Object(result))
}

/// The server's capabilities: the same in `initialize` and `server/discover`.
fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "logging": {},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": true},
    })
}

fn server_info() -> Value {
    json!({"name": "fake-mcp", "version": "1.0.0", "title": "Fake MCP"})
}

const INSTRUCTIONS: &str = "A fake MCP server for coogle's tests.";

/// What the server tells clients about itself; with `FAKE_MCP_INSTRUCTIONS_CWD`, also where
/// it runs (to tell one instance's answers from another's).
fn instructions() -> String {
    match std::env::var_os("FAKE_MCP_INSTRUCTIONS_CWD") {
        Some(_) => format!(
            "{INSTRUCTIONS} cwd={}",
            std::env::current_dir().unwrap_or_default().display()
        ),
        None => INSTRUCTIONS.to_owned(),
    }
}

fn discover_result(shared: &Shared) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": [MODERN_VERSION],
        "capabilities": capabilities(),
        "instructions": instructions(),
        "ttlMs": shared.ttl_ms,
        "cacheScope": "private",
        "_meta": {META_SERVER: server_info()},
    })
}

/// `subscriptions/listen`: acknowledge what is honored (every kind this server declares), then
/// keep the stream open, unanswered, until the client cancels it or stdin closes.
fn listen(shared: &Shared, id: Value, params: &Value) {
    let Some(wanted) = params.get("notifications").and_then(Value::as_object) else {
        shared.send_error(
            &id,
            -32602,
            "invalid params: subscriptions/listen needs a notifications object",
        );
        return;
    };
    let flag = |key: &str| wanted.get(key) == Some(&Value::Bool(true));
    let resource_uris = match wanted.get("resourceSubscriptions") {
        None | Some(Value::Null) => None,
        Some(Value::Array(uris)) if uris.iter().all(Value::is_string) => Some(
            uris.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect::<Vec<_>>(),
        ),
        Some(_) => {
            shared.send_error(
                &id,
                -32602,
                "invalid params: resourceSubscriptions must be an array of URIs",
            );
            return;
        }
    };
    let sub = Subscription {
        key: compact(&id),
        id,
        tools: flag("toolsListChanged"),
        prompts: flag("promptsListChanged"),
        resources: flag("resourcesListChanged"),
        resource_uris,
    };
    // Only what was asked for and is served: unknown kinds (taskIds, say) are left out.
    let mut honored = Map::new();
    for (on, key) in [
        (sub.tools, "toolsListChanged"),
        (sub.prompts, "promptsListChanged"),
        (sub.resources, "resourcesListChanged"),
    ] {
        if on {
            honored.insert(key.into(), json!(true));
        }
    }
    if let Some(uris) = &sub.resource_uris {
        honored.insert("resourceSubscriptions".into(), json!(uris));
    }
    eprintln!("listen {}", sub.key);
    let mut subscriptions = lock(&shared.subscriptions);
    // Sent under the lock, so no tagged notification of this subscription can overtake it.
    shared.notify(
        "notifications/subscriptions/acknowledged",
        Some(json!({"_meta": {META_SUBSCRIPTION: sub.id}, "notifications": honored})),
    );
    // A listen id reused while still open replaces the old stream.
    subscriptions.retain(|s| s.key != sub.key);
    subscriptions.push(sub);
}

fn handle_request(shared: &Shared, method: &str, params: &Value, ctx: &Ctx) -> Reply {
    match method {
        "initialize" => {
            let version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_PROTOCOL_VERSION);
            // The legacy era remembers the client's capabilities for the whole connection.
            *lock(&shared.legacy_capabilities) =
                params.get("capabilities").cloned().unwrap_or(json!({}));
            Reply::Result(json!({
                "protocolVersion": version,
                "capabilities": capabilities(),
                "serverInfo": server_info(),
                "instructions": instructions(),
            }))
        }
        "ping" => Reply::Result(json!({})),
        "tools/list" => Reply::Result(json!({
            "tools": tools(shared.extra_tool.as_deref(), ctx.declares("sampling")),
        })),
        // Declared capabilities (logging, resource subscriptions) accept their requests.
        "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
            Reply::Result(json!({}))
        }
        "resources/list" => Reply::Result(json!({
            "resources": [{"uri": HELLO_URI, "name": "hello", "mimeType": "text/plain"}],
        })),
        "resources/templates/list" => Reply::Result(json!({"resourceTemplates": []})),
        "resources/read" => match params.get("uri").and_then(Value::as_str) {
            Some(HELLO_URI) => Reply::Result(json!({
                "contents": [{"uri": HELLO_URI, "mimeType": "text/plain", "text": "hello"}],
            })),
            // 2026-07-28 retired -32002 (servers must not emit it) for invalid params.
            Some(uri) if ctx.era == Era::Modern => {
                Reply::Error(-32602, format!("resource not found: {uri}"))
            }
            Some(uri) => Reply::Error(-32002, format!("resource not found: {uri}")),
            None => Reply::Error(-32602, "invalid params: resources/read needs a uri".into()),
        },
        "prompts/list" => Reply::Result(json!({
            "prompts": [{
                "name": "greet",
                "description": "Say hi",
                "arguments": [{"name": "who", "required": true}],
            }],
        })),
        "prompts/get" => match params.get("name").and_then(Value::as_str) {
            Some("greet") => {
                match params
                    .get("arguments")
                    .and_then(|a| a.get("who"))
                    .and_then(Value::as_str)
                {
                    Some(who) => Reply::Result(json!({
                        "description": "Say hi",
                        "messages": [{
                            "role": "user",
                            "content": {"type": "text", "text": format!("Hello, {who}!")},
                        }],
                    })),
                    None => Reply::Error(-32602, "missing required argument: who".into()),
                }
            }
            Some(name) => Reply::Error(-32602, format!("unknown prompt: {name}")),
            None => Reply::Error(-32602, "invalid params: prompts/get needs a name".into()),
        },
        _ => Reply::Error(-32601, format!("method not found: {method}")),
    }
}

/// The tool list; field-rich on purpose so passthrough can be checked field for field. `sample`
/// is listed only to a client that declared sampling (per connection in the legacy era, per
/// request in the modern one), so the list without it stays what it always was.
fn tools(extra: Option<&str>, sampling: bool) -> Vec<Value> {
    let int =
        |description: &str| json!({"type": "integer", "minimum": 0, "description": description});
    let string = |description: &str| json!({"type": "string", "description": description});
    let mut tools = vec![
        json!({
            "name": "echo",
            "title": "Echo",
            "description": "Return the given text, as text content and as structured content.",
            "inputSchema": {
                "type": "object",
                "properties": {"text": string("The text to echo")},
                "required": ["text"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"echo": {"type": "string"}},
                "required": ["echo"],
            },
            "annotations": {"readOnlyHint": true, "title": "Echo"},
            "_meta": {"x-fake/unicode": "snowman \u{2603} and \u{e9}"},
        }),
        json!({
            "name": "sleep",
            "title": "Sleep",
            "description": "Sleep for ms milliseconds, then answer; a cancel stops it with no answer.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "ms": int("How long to sleep, in milliseconds"),
                    "text": string("The answer's text (default \"slept <ms> ms\")"),
                },
                "required": ["ms"],
            },
            "annotations": {"idempotentHint": true},
        }),
        json!({
            "name": "crash",
            "title": "Crash",
            "description": "Exit the server at once with the given code (default 1), unanswered.",
            "inputSchema": {
                "type": "object",
                "properties": {"code": {"type": "integer", "description": "The exit code"}},
                "required": [],
            },
        }),
        json!({
            "name": "stderr",
            "title": "Stderr",
            "description": "Write lines to stderr, then answer.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "lines": int("How many lines to write"),
                    "text": string("The line prefix (default \"fake stderr line\")"),
                },
                "required": ["lines"],
            },
        }),
        json!({
            "name": "large",
            "title": "Large",
            "description": "Answer with one text content of exactly this many bytes.",
            "inputSchema": {
                "type": "object",
                "properties": {"bytes": int("The text's size in bytes")},
                "required": ["bytes"],
            },
        }),
        json!({
            "name": "fail",
            "title": "Fail",
            "description": "Answer with a tool result that has isError: true.",
            "inputSchema": {
                "type": "object",
                "properties": {"message": string("The error text")},
                "required": [],
            },
        }),
        json!({
            "name": "progress",
            "title": "Progress",
            "description": "Send steps progress notifications to the request's progressToken, then answer.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "steps": int("How many progress notifications"),
                    "delayMs": int("Milliseconds between steps (default 0)"),
                },
                "required": ["steps"],
            },
        }),
        json!({
            "name": "pid",
            "title": "Pid",
            "description": "Answer with the server's process id.",
            "inputSchema": {"type": "object", "properties": {}, "required": []},
        }),
        json!({
            "name": "env",
            "title": "Env",
            "description": "Answer with the value of an environment variable, or <unset>.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": string("The variable's name")},
                "required": ["name"],
            },
        }),
        json!({
            "name": "notify",
            "title": "Notify",
            "description": "Send notifications/tools/list_changed (tools) or a log message (log), then answer.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["tools", "log", "resource"], "description": "Which notification"},
                },
                "required": ["kind"],
            },
        }),
        json!({
            "name": "ask",
            "title": "Ask the client",
            "description": "Send a request to the client (e.g. roots/list) and answer with its response.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "method": string("The request's method"),
                    "params": {"type": "object", "description": "The request's params"},
                },
                "required": ["method"],
            },
        }),
        json!({
            "name": "spawn_grandchild",
            "title": "Spawn grandchild",
            "description": "Start a lingering child process in the server's process group; answer with its pid.",
            "inputSchema": {"type": "object", "properties": {}, "required": []},
        }),
    ];
    if sampling {
        tools.push(json!({
            "name": "sample",
            "title": "Sample",
            "description": "Ask the client's model (sampling/createMessage) and answer with the text it got.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "prompt": string("The user message (default \"Say hello\")"),
                    "maxTokens": int("The token budget (default 16)"),
                },
                "required": [],
            },
        }));
    }
    if let Some(name) = extra {
        tools.push(json!({
            "name": name,
            "title": "Extra",
            "description": "An extra tool named by FAKE_MCP_EXTRA_TOOL.",
            "inputSchema": {"type": "object", "properties": {}, "required": []},
        }));
    }
    tools
}

fn start_call(shared: &Arc<Shared>, id: Value, params: Value, ctx: Ctx) {
    let Some(name) = params.get("name").and_then(Value::as_str).map(String::from) else {
        shared.send_error(&id, -32602, "invalid params: tools/call needs a tool name");
        return;
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => {
            shared.send_error(&id, -32602, "invalid params: arguments must be an object");
            return;
        }
    };
    if name == "crash" {
        // On the reader thread, so nothing read after the crash request is handled.
        let code = args
            .get("code")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(1);
        eprintln!("fake-mcp: crashing with code {code}");
        std::process::exit(code);
    }
    let token = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .cloned();
    let key = compact(&id);
    lock(&shared.calls).insert(key.clone(), false);
    let shared = Arc::clone(shared);
    std::thread::spawn(move || {
        let call = Call {
            shared: &shared,
            key: &key,
            args: &args,
            token: token.as_ref(),
            params: &params,
            ctx: &ctx,
        };
        let mut reply = call.run(&name);
        if ctx.era == Era::Modern {
            reply = modern_result("tools/call", reply, &shared);
        }
        // Remove the call first: from here on a cancel is too late and is ignored.
        let cancelled = lock(&shared.calls).remove(&key).unwrap_or(false);
        if !cancelled {
            shared.reply(&id, reply);
        }
    });
}

/// One `tools/call` in flight, on its own thread.
struct Call<'a> {
    shared: &'a Shared,
    key: &'a str,
    args: &'a Map<String, Value>,
    token: Option<&'a Value>,
    /// The whole params: a modern retry carries `inputResponses` and `requestState` there.
    params: &'a Value,
    ctx: &'a Ctx,
}

fn text_result(text: impl Into<String>) -> Reply {
    Reply::Result(json!({"content": [{"type": "text", "text": text.into()}]}))
}

fn text_error(text: impl Into<String>) -> Reply {
    Reply::Result(json!({"content": [{"type": "text", "text": text.into()}], "isError": true}))
}

impl Call<'_> {
    /// A non-negative integer argument; Err names the problem.
    fn uint(&self, name: &str, required: bool) -> Result<Option<u64>, String> {
        match self.args.get(name) {
            None | Some(Value::Null) if required => Err(format!("{name} is required")),
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("{name} must be a non-negative integer")),
        }
    }

    fn string(&self, name: &str, required: bool) -> Result<Option<&str>, String> {
        match self.args.get(name) {
            None | Some(Value::Null) if required => Err(format!("{name} is required")),
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| format!("{name} must be a string")),
        }
    }

    fn run(&self, name: &str) -> Reply {
        let reply = match name {
            "echo" => self.echo(),
            "sleep" => self.sleep(),
            "stderr" => self.stderr(),
            "large" => self.large(),
            "fail" => self.fail(),
            "progress" => self.progress(),
            "pid" => Ok(text_result(std::process::id().to_string())),
            "env" => self.env(),
            "notify" => self.notify(),
            "ask" => self.ask(),
            // Unlisted to a legacy client that did not declare sampling, so unknown to it; a
            // modern request without the capability gets -32021 from `input_round`.
            "sample" if self.ctx.era == Era::Modern || self.ctx.declares("sampling") => {
                self.sample()
            }
            // `detach` (not in the schema): the grandchild calls setsid(), leaving our process
            // group, as detached helpers and browsers do.
            // Unlisted (the tool list stays as it was): the working directory it runs in.
            "cwd" => Ok(text_result(
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            )),
            // Unlisted (the tool list stays as it was): close stdout and keep running, deaf and
            // mute, as a broken server can.
            "close_stdout" => {
                let _out = lock(&self.shared.stdout);
                // SAFETY: closing our own stdout while holding its lock, so no line is cut.
                unsafe {
                    libc::close(1);
                }
                return Reply::Nothing;
            }
            "spawn_grandchild" => Ok(spawn_grandchild(
                self.args.get("detach").and_then(Value::as_bool) == Some(true),
            )),
            _ if self.shared.extra_tool.as_deref() == Some(name) => {
                Ok(text_result(format!("extra tool {name}")))
            }
            _ => return Reply::Error(-32602, format!("unknown tool: {name}")),
        };
        // Bad arguments are a tool result the model can read, not a protocol error.
        reply.unwrap_or_else(|problem| {
            text_error(format!("invalid arguments for {name}: {problem}"))
        })
    }

    fn echo(&self) -> Result<Reply, String> {
        let text = self.string("text", true)?.unwrap_or_default();
        Ok(Reply::Result(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"echo": text},
        })))
    }

    fn sleep(&self) -> Result<Reply, String> {
        let ms = self.uint("ms", true)?.unwrap_or_default();
        let text = self.string("text", false)?;
        if self
            .shared
            .sleep_unless_cancelled(self.key, Duration::from_millis(ms))
        {
            return Ok(Reply::Nothing);
        }
        Ok(text_result(
            text.map_or_else(|| format!("slept {ms} ms"), String::from),
        ))
    }

    fn stderr(&self) -> Result<Reply, String> {
        let lines = self.uint("lines", true)?.unwrap_or_default();
        let text = self.string("text", false)?.unwrap_or("fake stderr line");
        let mut buf = String::new();
        for i in 1..=lines {
            buf.push_str(&format!("{text} {i}\n"));
        }
        let mut err = io::stderr().lock();
        let _ = err.write_all(buf.as_bytes()).and_then(|()| err.flush());
        Ok(text_result(format!("wrote {lines} lines")))
    }

    fn large(&self) -> Result<Reply, String> {
        let bytes = self.uint("bytes", true)?.unwrap_or_default();
        let bytes = usize::try_from(bytes).map_err(|_| "bytes is too large".to_string())?;
        Ok(text_result("x".repeat(bytes)))
    }

    fn fail(&self) -> Result<Reply, String> {
        let message = self
            .string("message", false)?
            .unwrap_or("failed on purpose");
        Ok(text_error(message))
    }

    fn progress(&self) -> Result<Reply, String> {
        let steps = self.uint("steps", true)?.unwrap_or_default();
        let delay = Duration::from_millis(self.uint("delayMs", false)?.unwrap_or(0));
        for i in 1..=steps {
            let wait = if i == 1 { Duration::ZERO } else { delay };
            if self.shared.sleep_unless_cancelled(self.key, wait) {
                return Ok(Reply::Nothing);
            }
            if let Some(token) = self.token {
                self.shared.notify(
                    "notifications/progress",
                    Some(json!({
                        "progressToken": token,
                        "progress": i,
                        "total": steps,
                        "message": format!("step {i}"),
                    })),
                );
            }
        }
        Ok(text_result(format!("done {steps} steps")))
    }

    fn env(&self) -> Result<Reply, String> {
        let name = self.string("name", true)?.unwrap_or_default();
        let value = match std::env::var_os(name) {
            Some(v) => v.to_string_lossy().into_owned(),
            None => "<unset>".to_string(),
        };
        Ok(text_result(value))
    }

    /// Put a request to the client (roots/list, sampling/createMessage, elicitation/create)
    /// and answer with what came back, as compact JSON text: in the legacy era the whole
    /// JSON-RPC response to a server→client request, in the modern one the client's
    /// `inputResponses.q` (the result alone: there is no request, so no id or error).
    fn ask(&self) -> Result<Reply, String> {
        let method = self.string("method", true)?.unwrap_or_default();
        let params = self.args.get("params").cloned().unwrap_or(json!({}));
        // `delayMs` (not in the schema, so the tool list stays as it was): work that long
        // first, deaf to cancels, like a server that goes on with a call its client gave up on.
        if let Some(ms) = self.uint("delayMs", false)? {
            std::thread::sleep(Duration::from_millis(ms));
        }
        match self.ctx.era {
            Era::Legacy => Ok(match self.ask_client(method, params) {
                Some(answer) => text_result(compact(&answer)),
                None => text_error(format!("no answer to {method} within 30 s")),
            }),
            Era::Modern => {
                self.input_round("ask", method, params, |answer| text_result(compact(answer)))
            }
        }
    }

    /// Ask the client's model for a message and answer with its text.
    fn sample(&self) -> Result<Reply, String> {
        let prompt = self.string("prompt", false)?.unwrap_or("Say hello");
        let max_tokens = self.uint("maxTokens", false)?.unwrap_or(16);
        let params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        });
        let method = "sampling/createMessage";
        match self.ctx.era {
            Era::Legacy => Ok(match self.ask_client(method, params) {
                Some(answer) => match answer.get("result") {
                    Some(result) => sampled_text(result),
                    None => text_error(compact(&answer)),
                },
                None => text_error(format!("no answer to {method} within 30 s")),
            }),
            Era::Modern => self.input_round("sample", method, params, sampled_text),
        }
    }

    /// Send a server→client request (legacy era only) and wait up to 30 s for its answer.
    fn ask_client(&self, method: &str, params: Value) -> Option<Value> {
        let n = self.shared.next_ask.fetch_add(1, Ordering::Relaxed);
        let id = json!(format!("fake-ask-{n}"));
        let key = compact(&id);
        lock(&self.shared.asks).insert(key.clone(), None);
        self.shared
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut asks = lock(&self.shared.asks);
        loop {
            if let Some(Some(answer)) = asks.get(&key) {
                let answer = answer.clone();
                asks.remove(&key);
                return Some(answer);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                asks.remove(&key);
                return None;
            }
            asks = self
                .shared
                .answered
                .wait_timeout(asks, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// One MRTR round of a modern tool that needs the client's input: a first call answers
    /// input_required with the request under key `q` and a signed `requestState`; the retry
    /// (same tool and arguments, plus `inputResponses` and the echoed state) is finished with
    /// the client's response. Nothing is kept between the two: the state carries it all.
    fn input_round(
        &self,
        tool: &str,
        method: &str,
        params: Value,
        finish: impl FnOnce(&Value) -> Reply,
    ) -> Result<Reply, String> {
        let responses = self.params.get("inputResponses");
        let state = self.params.get("requestState");
        if responses.is_none() && state.is_none() {
            let Some(capability) = input_capability(method) else {
                return Err(format!(
                    "method must be elicitation/create, sampling/createMessage or roots/list in the {MODERN_VERSION} era"
                ));
            };
            // A server must not ask for an input kind the request did not declare.
            if !self.ctx.declares(capability) {
                return Ok(Reply::ErrorData(
                    -32021,
                    format!("Server requires the {capability} capability for this request"),
                    json!({"requiredCapabilities": {capability: {}}}),
                ));
            }
            return Ok(Reply::Result(json!({
                "resultType": "input_required",
                "inputRequests": {"q": {"method": method, "params": params}},
                "requestState": request_state(tool, self.args),
            })));
        }
        if !state
            .and_then(Value::as_str)
            .is_some_and(|s| verify_request_state(s, tool, self.args))
        {
            return Ok(Reply::Error(
                -32602,
                format!("invalid params: requestState does not verify for this call of {tool}"),
            ));
        }
        Ok(match responses.and_then(|r| r.get("q")) {
            Some(answer) => finish(answer),
            None => Reply::Error(-32602, "invalid params: inputResponses.q is missing".into()),
        })
    }

    /// Send one notification, then answer. Besides the advertised kinds (`tools`, `log`,
    /// `resource`) it takes `prompts` and `resources` (list changes) and, for `log`, a `level`
    /// (default info): unadvertised, so the legacy tool list stays what it always was.
    fn notify(&self) -> Result<Reply, String> {
        let era = self.ctx.era;
        let kind = self.string("kind", true)?;
        // Modern list changes and resource updates go only to the listen streams that asked,
        // tagged with their ids; the legacy era broadcasts them untagged.
        let list_changed = |method: &str, wants: fn(&Subscription) -> bool| match era {
            Era::Legacy => self.shared.notify(method, None),
            Era::Modern => self.shared.notify_subscribers(method, wants, &Map::new()),
        };
        match kind {
            Some("tools") => list_changed("notifications/tools/list_changed", |s| s.tools),
            Some("prompts") => list_changed("notifications/prompts/list_changed", |s| s.prompts),
            Some("resources") => {
                list_changed("notifications/resources/list_changed", |s| s.resources);
            }
            Some("log") => {
                let level = self.string("level", false)?.unwrap_or("info");
                let rank = log_rank(level)
                    .ok_or_else(|| format!("level must be one of {}", LOG_LEVELS.join(", ")))?;
                // Modern: only for a request that opted in, at or above its level.
                let wanted = match era {
                    Era::Legacy => true,
                    Era::Modern => self.ctx.log_level.is_some_and(|min| rank >= min),
                };
                // `count` (not in the schema): a noisy server's burst of log lines; with
                // `everyMs`, spread out and deaf to cancels, as a server that goes on logging
                // for a call its client gave up on; `text` is what each line says.
                let count = self.uint("count", false)?.unwrap_or(1);
                let every = self.uint("everyMs", false)?.map(Duration::from_millis);
                let text = self.string("text", false)?.unwrap_or("hello from fake");
                for i in 0..count.max(1) {
                    if !wanted {
                        break;
                    }
                    if let (Some(every), true) = (every, i > 0) {
                        std::thread::sleep(every);
                    }
                    self.shared.notify(
                        "notifications/message",
                        Some(json!({"level": level, "logger": "fake", "data": text})),
                    );
                }
            }
            Some("resource") => {
                let params = json!({"uri": HELLO_URI});
                match era {
                    Era::Legacy => self
                        .shared
                        .notify("notifications/resources/updated", Some(params)),
                    Era::Modern => self.shared.notify_subscribers(
                        "notifications/resources/updated",
                        |s| {
                            s.resource_uris
                                .as_ref()
                                .is_some_and(|uris| uris.iter().any(|u| u == HELLO_URI))
                        },
                        params.as_object().expect("an object"),
                    ),
                }
            }
            _ => {
                return Err(
                    "kind must be \"tools\", \"prompts\", \"resources\", \"resource\" or \"log\""
                        .into(),
                );
            }
        }
        Ok(text_result("notified"))
    }
}

/// The client capability an input request needs, for the kinds MRTR allows.
fn input_capability(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// The text of a CreateMessageResult: its content is one block, or (with tools) a list.
fn sampled_text(result: &Value) -> Reply {
    let text = match result.get("content") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .find_map(|b| b.get("text").and_then(Value::as_str)),
        Some(block) => block.get("text").and_then(Value::as_str),
        None => None,
    };
    match text {
        Some(text) => text_result(text),
        None => text_error(format!(
            "the sampling answer has no text: {}",
            compact(result)
        )),
    }
}

/// A fixed key, so a respawned server accepts the state its predecessor issued, as a stateless
/// server must (the spec lets a client retry against a fresh process).
const STATE_KEY: &str = "fake-mcp requestState v1";

/// The `requestState` of a first round: standard padded base64 of the compact JSON
/// `{"tool":…,"round":1,"args":{…},"mac":"<16 hex>"}`, where `mac` is SHA-256 over the key and
/// the compact JSON of the other three fields.
fn request_state(tool: &str, args: &Map<String, Value>) -> String {
    let mut state = json!({"tool": tool, "round": 1, "args": args});
    state["mac"] = json!(state_mac(&state));
    base64_encode(compact(&state).as_bytes())
}

fn state_mac(body: &Value) -> String {
    let digest = Sha256::digest(format!("{STATE_KEY}\n{}", compact(body)).as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `state` is one this server issued for this tool and these arguments.
fn verify_request_state(state: &str, tool: &str, args: &Map<String, Value>) -> bool {
    let Some(bytes) = base64_decode(state) else {
        return false;
    };
    let Ok(state) = serde_json::from_slice::<Value>(&bytes) else {
        return false;
    };
    // Rebuilt in the order it was issued in, so the mac covers the same bytes.
    let body = json!({"tool": state["tool"], "round": state["round"], "args": state["args"]});
    state["mac"].as_str() == Some(state_mac(&body).as_str())
        && state["tool"] == tool
        && state["round"] == 1
        // Compared as JSON, so a client that reorders the arguments' keys still matches.
        && state["args"] == Value::Object(args.clone())
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(BASE64[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            let v = BASE64.iter().position(|&a| a == c)?;
            n = (n << 6) | v as u32;
        }
        n <<= 6 * pad;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

/// Start a copy of this binary that lingers in our process group with no stdio of ours held
/// open, as a server's helper process would; the daemon must reap it when the group goes.
fn spawn_grandchild(detach: bool) -> Reply {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return text_error(format!("could not find my own executable: {e}")),
    };
    let mut cmd = Command::new(exe);
    cmd.arg(GRANDCHILD_ARG)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if detach {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe and affects only the new process.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = cmd.spawn();
    match child {
        Ok(mut child) => {
            let pid = child.id();
            // Reap it if it dies while we live, so it never lingers as a zombie of ours.
            std::thread::spawn(move || child.wait());
            text_result(pid.to_string())
        }
        Err(e) => text_error(format!("could not spawn a grandchild: {e}")),
    }
}
