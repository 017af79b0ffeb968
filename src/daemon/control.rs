//! Control mode: request/response lines for the CLI and `nc -U` (`status`, `call`, `shutdown`,
//! ...). The methods are a closed set and never tool names: a tool called `status` is reached
//! through `call`, so no tool can collide with the daemon's own methods.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};

use std::collections::BTreeMap;

use super::Shared;
use super::registry::Asker;
use crate::config::Config;

/// How long a control connection may sit without sending a request.
const CONTROL_IDLE: std::time::Duration = std::time::Duration::from_secs(10);
use super::connection::too_long;
use super::upstream::UpstreamHandle;
use crate::wire::{
    self, ControlMethod, ControlRequest, ControlResponse, ErrorCode, Info, Line, Status, WireError,
};

pub(super) async fn control_connection(
    shared: Arc<Shared>,
    first: Result<ControlRequest, WireError>,
    mut r: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut w: tokio::net::unix::OwnedWriteHalf,
) {
    let cap = shared.config.max_line_bytes;
    let mut next = Some(first);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let req = match next.take() {
            Some(req) => req,
            // A control connection that sends nothing for a while is closed: idle ones must not
            // pile up and hold the daemon's descriptors.
            None => match tokio::time::timeout(
                CONTROL_IDLE,
                wire::read_line_capped(&mut r, &mut buf, cap),
            )
            .await
            {
                Err(_idle) => return,
                Ok(Ok(Line::Complete)) if wire::is_blank(&buf) => continue,
                Ok(Ok(Line::Complete)) => wire::parse_control(&buf),
                Ok(Ok(Line::Eof)) if !wire::is_blank(&buf) => wire::parse_control(&buf),
                Ok(Ok(Line::TooLong)) => {
                    let resp = ControlResponse::err(Value::Null, too_long(cap));
                    let _ = w.write_all(&wire::to_line(&resp)).await;
                    return;
                }
                Ok(Ok(Line::Eof) | Err(_)) => return,
            },
        };
        let resp = match req {
            Ok(req) => {
                let id = req.id.clone();
                match control(&shared, req).await {
                    Ok(result) => ControlResponse::ok(id, result),
                    Err(e) => ControlResponse::err(id, e),
                }
            }
            Err(e) => ControlResponse::err(Value::Null, e),
        };
        if w.write_all(&wire::to_line(&resp)).await.is_err() {
            return;
        }
    }
}

/// The server a request names (`params.server`; none: the only one, or `google`), among
/// those served now (the start's, and any a `reload` added).
pub(super) fn server_name(shared: &Shared, params: &Value) -> Result<String, WireError> {
    let name = params.get("server").and_then(|s| s.as_str());
    shared
        .upstreams
        .resolve(name)
        .map_err(|e| WireError::new(ErrorCode::NotFound, e.to_string()))
}

/// Read the config file again, as the daemon did at start (the same path; none: the default
/// one), and serve the servers new in it. A file that does not load changes nothing.
async fn reload(shared: &Shared) -> Result<Value, WireError> {
    let file = shared.config.file.clone();
    let fresh = tokio::task::spawn_blocking(move || Config::load(file.as_deref()))
        .await
        .map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))?
        .map_err(|e| {
            WireError::new(
                ErrorCode::InvalidConfig,
                format!("the config did not reload, nothing changed: {e}"),
            )
        })?;
    crate::redact::add_known(super::secret_values(&fresh));
    let done = shared.upstreams.reload(&fresh);
    tracing::info!(
        added = ?done.added,
        changed = ?done.changed,
        removed = ?done.removed,
        "reloaded the config"
    );
    to_value(&done)
}

/// The instance a control request goes to: a shared server's unbound one; a per-project
/// server's for `params.project` (the CLI sends its own); `params.env` gives the values of a
/// server's `passEnv`, as a session's hello does.
fn upstream(shared: &Shared, params: &Value) -> Result<UpstreamHandle, WireError> {
    let name = server_name(shared, params)?;
    let project = params
        .get("project")
        .and_then(Value::as_str)
        .map(std::path::Path::new);
    let env: Option<BTreeMap<String, String>> = params
        .get("env")
        .and_then(|e| serde_json::from_value(e.clone()).ok());
    let asker = Asker {
        project,
        env: env.as_ref(),
    };
    shared.upstreams.for_control(&name, asker)
}

fn info(shared: &Shared) -> Info {
    Info {
        pid: std::process::id(),
        version: wire::VERSION.to_string(),
        uptime_ms: shared.started.elapsed().as_millis() as u64,
        socket: shared.options.socket.clone(),
        config_file: shared.config.file.clone(),
        log_file: shared.options.log_file.clone(),
        upstreams: shared.upstreams.server_names(),
        replace_pending: shared.handover.pending(),
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, WireError> {
    serde_json::to_value(v).map_err(|e| WireError::new(ErrorCode::Internal, e.to_string()))
}

async fn control(shared: &Shared, req: ControlRequest) -> Result<Value, WireError> {
    let Some(method) = ControlMethod::parse(&req.method) else {
        let known: Vec<&str> = ControlMethod::ALL.iter().map(|m| m.as_str()).collect();
        return Err(WireError::new(
            ErrorCode::InvalidRequest,
            format!(
                "unknown control method {:?}; the methods are {} (tool calls go through \"call\")",
                req.method,
                known.join(", ")
            ),
        ));
    };
    let params = &req.params;
    match method {
        ControlMethod::Ping => Ok(json!({"pong": true, "version": wire::VERSION})),
        ControlMethod::Info => to_value(&info(shared)),
        ControlMethod::Status => {
            let mut upstreams = Vec::new();
            for u in shared.upstreams.all() {
                upstreams.push(u.status().await);
            }
            upstreams.extend(shared.upstreams.without_instances());
            to_value(&Status {
                daemon: info(shared),
                upstreams,
            })
        }
        ControlMethod::ListTools => list_tools(&upstream(shared, params)?).await,
        ControlMethod::Call => call(&upstream(shared, params)?, params).await,
        ControlMethod::StartChild => upstream(shared, params)?.start().await,
        ControlMethod::RestartChild => upstream(shared, params)?.restart().await,
        ControlMethod::Reload => reload(shared).await,
        ControlMethod::Shutdown => {
            let _ = shared.stop.send(true);
            Ok(json!({"stopping": true, "pid": std::process::id()}))
        }
    }
}

/// Every page of the tool list, bounded so a server whose cursors loop cannot hold us forever.
async fn list_tools(u: &UpstreamHandle) -> Result<Value, WireError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let p = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page: Value = serde_json::from_str(u.request("tools/list", p).await?.get())
            .map_err(|e| WireError::new(ErrorCode::UpstreamError, e.to_string()))?;
        if let Some(t) = page.get("tools").and_then(|t| t.as_array()) {
            tools.extend(t.iter().cloned());
        }
        cursor = page
            .get("nextCursor")
            .and_then(|c| c.as_str())
            .map(String::from);
        if cursor.is_none() {
            break;
        }
    }
    Ok(json!({"server": u.name, "tools": tools}))
}

/// A one-shot tool call: `params: {server?, tool, arguments?}`.
async fn call(u: &UpstreamHandle, params: &Value) -> Result<Value, WireError> {
    let tool = params.get("tool").and_then(|t| t.as_str()).ok_or_else(|| {
        WireError::new(
            ErrorCode::InvalidRequest,
            "call needs params.tool (the tool's name) and optional params.arguments (an object)",
        )
    })?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => {
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                "params.arguments must be a JSON object",
            ));
        }
    };
    let result = u
        .request("tools/call", json!({"name": tool, "arguments": arguments}))
        .await?;
    serde_json::from_str(result.get())
        .map_err(|e| WireError::new(ErrorCode::UpstreamError, e.to_string()))
}
