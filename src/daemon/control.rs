//! Control mode, the daemon's side: request/response lines for the CLI and `nc -U` (`status`,
//! `call`, `shutdown`, ...), read as a typed [`Request`] and answered with the method's typed
//! [`Response`] (both in [`crate::wire::control`], which clients share). The methods are a
//! closed set and never tool names: a tool called `status` is reached through `call`, so no tool
//! can collide with the daemon's own methods.

use std::sync::Arc;

use tokio::io::{AsyncWriteExt, BufReader};

use super::Shared;
use super::connection::too_long;
use super::registry::Asker;
use super::upstream::UpstreamHandle;
use crate::config::Config;
use crate::wire::{
    self, ControlRequest, ControlResponse, ErrorCode, Info, Line, Pong, Refusal, Reloaded, Request,
    Response, Status, Stopping, Target, ToolList, WireError,
};

/// How long a control connection may sit without sending a request.
const CONTROL_IDLE: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) async fn control_connection(
    shared: Arc<Shared>,
    first: Result<ControlRequest, Refusal>,
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
                    let resp = ControlResponse::err(serde_json::Value::Null, too_long(cap));
                    let _ = w.write_all(&wire::to_line(&resp)).await;
                    return;
                }
                Ok(Ok(Line::Eof) | Err(_)) => return,
            },
        };
        let resp = match req {
            Ok(ControlRequest { id, request }) => {
                tracing::debug!(method = request.method().as_str(), "control request");
                match control(&shared, request).await {
                    Ok(result) => ControlResponse::ok(id, result),
                    Err(e) => ControlResponse::err(id, e),
                }
            }
            Err(Refusal { id, error }) => ControlResponse::err(id, error),
        };
        if w.write_all(&wire::to_line(&resp)).await.is_err() {
            return;
        }
    }
}

/// The server named (none: the only one, or `google`), among those served now (the start's,
/// and any a `reload` added).
pub(super) fn server_name(shared: &Shared, name: Option<&str>) -> Result<String, WireError> {
    shared
        .upstreams
        .resolve(name)
        .map_err(|e| WireError::new(ErrorCode::NotFound, e.to_string()))
}

/// Read the config file again, as the daemon did at start (the same path; none: the default
/// one), and serve the servers new in it. A file that does not load changes nothing.
async fn reload(shared: &Shared) -> Result<Reloaded, WireError> {
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
    Ok(done)
}

/// The instance a control request goes to: a shared server's unbound one; a per-project
/// server's for the target's project (the CLI sends its own); the target's `env` gives the
/// values of a server's `passEnv`, as a session's hello does.
fn upstream(shared: &Shared, target: &Target) -> Result<UpstreamHandle, WireError> {
    let name = server_name(shared, target.server.as_deref())?;
    let asker = Asker {
        project: target.project.as_deref(),
        env: target.env.as_ref(),
        token: None,
    };
    shared.upstreams.for_control(&name, asker)
}

fn info(shared: &Shared) -> Info {
    Info {
        pid: std::process::id(),
        version: wire::VERSION.to_string(),
        uptime_ms: shared.started.elapsed().as_millis() as u64,
        started_at_ms: epoch_ms(shared.started_at),
        hand_over_failed: shared.handover.last_failure(),
        exe: super::handover::installed_exe(),
        socket: shared.options.socket.clone(),
        config_file: shared.config.file.clone(),
        log_file: shared.options.log_file.clone(),
        upstreams: shared.upstreams.server_names(),
        replace_pending: shared.handover.pending(),
    }
}

async fn control(shared: &Shared, request: Request) -> Result<Response, WireError> {
    Ok(match request {
        Request::Ping => Pong::of_this_daemon().into(),
        Request::Info => info(shared).into(),
        Request::Status => {
            let mut upstreams = Vec::new();
            for u in shared.upstreams.all() {
                upstreams.push(u.status().await);
            }
            upstreams.extend(shared.upstreams.without_instances());
            Status {
                daemon: info(shared),
                upstreams,
            }
            .into()
        }
        Request::ListTools(target) => list_tools(&upstream(shared, &target)?).await?.into(),
        Request::Call(call) => Response::Called(
            upstream(shared, &call.target)?
                .call_tool(&call.tool, &call.arguments)
                .await?,
        ),
        Request::StartChild(target) => upstream(shared, &target)?.start().await?.into(),
        Request::RestartChild(target) => upstream(shared, &target)?.restart().await?.into(),
        Request::Reload => reload(shared).await?.into(),
        Request::RestartDaemon => shared
            .handover
            .restart()
            .await
            .map_err(|why| WireError::new(ErrorCode::HandOverRefused, why))?
            .into(),
        Request::Shutdown => {
            let _ = shared.stop.send(true);
            Stopping {
                stopping: true,
                pid: std::process::id(),
            }
            .into()
        }
    })
}

fn epoch_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every page of the tool list, bounded so a server whose cursors loop cannot hold us forever.
async fn list_tools(u: &UpstreamHandle) -> Result<ToolList, WireError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let page = u.tools_page(cursor.as_deref()).await?;
        tools.extend(page.tools.unwrap_or_default());
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    Ok(ToolList {
        server: u.name.clone(),
        tools,
    })
}
