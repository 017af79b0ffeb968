//! A small fake MCP server over stdio, started by the integration tests and benchmarks as a
//! real child process so faults can be injected exactly: slow calls, crashes, stderr spam,
//! large results, progress, cancellation, list changes and startup failures.
//!
//! It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout with plain std threads (no rmcp,
//! no tokio), so its behaviour is deterministic and it starts at once. Every `tools/call` runs
//! on its own thread, so several calls can be in flight and be answered out of order. It must
//! never write anything but whole JSON lines to stdout: diagnostics go to stderr.
//!
//! Fault injection through the environment (read at startup):
//! - `FAKE_MCP_START_DELAY_MS`: sleep this long before reading stdin.
//! - `FAKE_MCP_EXIT_AT_START`: exit at once with this code.
//! - `FAKE_MCP_PID_FILE`: append `<pid>\n` to this file (one write), to count spawns.
//! - `FAKE_MCP_EVENT_LOG`: append `<method> <id|-> <progressToken|->` per received message
//!   (`notifications/cancelled <requestId>` for cancels), to check what the child received.
//! - `FAKE_MCP_IGNORE_SIGTERM`: ignore SIGTERM, so escalation to SIGKILL can be checked.
//! - `FAKE_MCP_EXTRA_TOOL`: list one more tool with this name (a different list after respawn).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";
/// argv[1] that turns this binary into a do-nothing grandchild (see the `spawn_grandchild` tool).
const GRANDCHILD_ARG: &str = "--fake-mcp-grandchild";

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
    next_ask: std::sync::atomic::AtomicU64,
}

/// What a request handler decided to send back.
enum Reply {
    Result(Value),
    Error(i64, String),
    /// The request was cancelled: send nothing.
    Nothing,
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
        next_ask: std::sync::atomic::AtomicU64::new(1),
    });

    if let Some(ms) = std::env::var("FAKE_MCP_START_DELAY_MS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
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
    // Stdin EOF: exit at once, holding the stdout lock so no call thread's line is cut.
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

    fn notify(&self, method: &str, params: Option<Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        self.send(&msg);
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
        return;
    }
    let token = params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .map_or_else(|| "-".to_string(), compact);
    let id_text = id.as_ref().map_or_else(|| "-".to_string(), compact);
    shared.log_event(format!("{method} {id_text} {token}"));

    let Some(id) = id else {
        // notifications/initialized and every other notification: nothing to answer.
        return;
    };
    if method == "tools/call" {
        start_call(shared, id, params);
        return;
    }
    match handle_request(shared, method, &params) {
        Reply::Result(r) => shared.send_result(&id, r),
        Reply::Error(code, message) => shared.send_error(&id, code, &message),
        Reply::Nothing => {}
    }
}

fn handle_request(shared: &Shared, method: &str, params: &Value) -> Reply {
    match method {
        "initialize" => {
            let version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_PROTOCOL_VERSION);
            Reply::Result(json!({
                "protocolVersion": version,
                "capabilities": {
                    "tools": {"listChanged": true},
                    "logging": {},
                    "resources": {"subscribe": true, "listChanged": true},
                    "prompts": {"listChanged": true},
                },
                "serverInfo": {"name": "fake-mcp", "version": "1.0.0", "title": "Fake MCP"},
                "instructions": "A fake MCP server for coogle's tests.",
            }))
        }
        "ping" => Reply::Result(json!({})),
        "tools/list" => Reply::Result(json!({"tools": tools(shared.extra_tool.as_deref())})),
        // Declared capabilities (logging, resource subscriptions) accept their requests.
        "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
            Reply::Result(json!({}))
        }
        "resources/list" => Reply::Result(json!({
            "resources": [{"uri": "fake://hello", "name": "hello", "mimeType": "text/plain"}],
        })),
        "resources/templates/list" => Reply::Result(json!({"resourceTemplates": []})),
        "resources/read" => match params.get("uri").and_then(Value::as_str) {
            Some("fake://hello") => Reply::Result(json!({
                "contents": [{"uri": "fake://hello", "mimeType": "text/plain", "text": "hello"}],
            })),
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

/// The tool list; field-rich on purpose so passthrough can be checked field for field.
fn tools(extra: Option<&str>) -> Vec<Value> {
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

fn start_call(shared: &Arc<Shared>, id: Value, params: Value) {
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
        };
        let reply = call.run(&name);
        // Remove the call first: from here on a cancel is too late and is ignored.
        let cancelled = lock(&shared.calls).remove(&key).unwrap_or(false);
        match reply {
            _ if cancelled => {}
            Reply::Result(r) => shared.send_result(&id, r),
            Reply::Error(code, message) => shared.send_error(&id, code, &message),
            Reply::Nothing => {}
        }
    });
}

/// One `tools/call` in flight, on its own thread.
struct Call<'a> {
    shared: &'a Shared,
    key: &'a str,
    args: &'a Map<String, Value>,
    token: Option<&'a Value>,
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
            "spawn_grandchild" => Ok(spawn_grandchild()),
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

    /// Send a request to the client (roots/list, sampling/createMessage, elicitation/create)
    /// and answer with whatever came back, as compact JSON text.
    fn ask(&self) -> Result<Reply, String> {
        let method = self.string("method", true)?.unwrap_or_default().to_string();
        let n = self
            .shared
            .next_ask
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = json!(format!("fake-ask-{n}"));
        lock(&self.shared.asks).insert(compact(&id), None);
        let params = self.args.get("params").cloned().unwrap_or(json!({}));
        self.shared
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut asks = lock(&self.shared.asks);
        loop {
            if let Some(Some(answer)) = asks.get(&compact(&id)) {
                let answer = answer.clone();
                asks.remove(&compact(&id));
                return Ok(text_result(compact(&answer)));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                asks.remove(&compact(&id));
                return Ok(text_error(format!("no answer to {method} within 30 s")));
            }
            asks = self
                .shared
                .answered
                .wait_timeout(asks, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn notify(&self) -> Result<Reply, String> {
        match self.string("kind", true)? {
            Some("tools") => self.shared.notify("notifications/tools/list_changed", None),
            Some("log") => self.shared.notify(
                "notifications/message",
                Some(json!({"level": "info", "logger": "fake", "data": "hello from fake"})),
            ),
            Some("resource") => self.shared.notify(
                "notifications/resources/updated",
                Some(json!({"uri": "fake://hello"})),
            ),
            _ => return Err("kind must be \"tools\", \"log\" or \"resource\"".into()),
        }
        Ok(text_result("notified"))
    }
}

/// Start a copy of this binary that lingers in our process group with no stdio of ours held
/// open, as a server's helper process would; the daemon must reap it when the group goes.
fn spawn_grandchild() -> Reply {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return text_error(format!("could not find my own executable: {e}")),
    };
    let child = Command::new(exe)
        .arg(GRANDCHILD_ARG)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
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
