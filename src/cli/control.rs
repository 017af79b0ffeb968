//! `coogle status`, `restart`, `reload` and `stop`: one control-mode request each to the
//! running daemon.
//! They never start a daemon: asking a daemon that is not there is an error with a hint.

use std::time::Duration;

use serde_json::{Value, json};

use super::context::Context;
use super::status::render_status;
use crate::client::{self, ClientError};
use crate::output::{self, ExitCode};

/// How long `coogle stop` waits for the daemon to exit, beyond its configured grace period.
const STOP_WAIT: Duration = Duration::from_secs(30);

pub(super) async fn status(ctx: &Context, as_json: bool) -> Result<ExitCode, ClientError> {
    let status = client::status(&ctx.socket).await?;
    if as_json {
        output::json(&serde_json::to_value(&status).unwrap_or(Value::Null));
    } else {
        output::out(&render_status(&status));
    }
    Ok(if status.healthy() {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

pub(super) async fn restart(
    ctx: &Context,
    server: Option<String>,
) -> Result<ExitCode, ClientError> {
    // This shell's project and environment pick the instance, as they would for a session
    // started here (a per-project server's child of this project, say).
    let mut params = json!({
        "project": crate::wire::own_project_dir(),
        "env": crate::wire::own_env(),
    });
    if let Some(s) = server {
        params["server"] = json!(s);
    }
    let r = client::control(&ctx.socket, "restart_child", params).await?;
    output::out(&format!(
        "restarted {} (pid {})",
        r["server"].as_str().unwrap_or("upstream"),
        r["pid"]
    ));
    Ok(ExitCode::Success)
}

/// `coogle reload`: the daemon reads its config file again and serves the servers new in it,
/// without stopping anything.
pub(super) async fn reload(ctx: &Context) -> Result<ExitCode, ClientError> {
    let Some(r) = client::reload(&ctx.socket).await? else {
        output::error_text(
            "the running daemon is older than `coogle reload`",
            Some(
                "restart it to read the config: `coogle stop` (sessions reconnect by themselves), or restart the service",
            ),
        );
        return Ok(ExitCode::Failure);
    };
    let file = match &r.file {
        Some(f) => f.display().to_string(),
        None => "the defaults (no config file)".to_string(),
    };
    output::out(&format!("reloaded {file}"));
    for line in client::reload_lines(&r) {
        output::out(&line);
    }
    Ok(ExitCode::Success)
}

pub(super) async fn stop(ctx: &Context) -> Result<ExitCode, ClientError> {
    // Return only once the process is gone, so `coogle stop && coogle serve` finds no daemon
    // still draining its calls (and holding its lock). The daemon may use its whole grace
    // period for calls in flight, then stops its children.
    let limit = STOP_WAIT + Duration::from_millis(ctx.config.shutdown_grace_ms);
    let pid = client::shutdown(&ctx.socket, limit).await?;
    output::out(&format!("stopped the coogle daemon (pid {pid})"));
    Ok(ExitCode::Success)
}
