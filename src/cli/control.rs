//! `coogle status`, `restart` and `stop`: one control-mode request each to the running daemon.
//! They never start a daemon: asking a daemon that is not there is an error with a hint.

use std::time::Duration;

use serde_json::{Value, json};

use super::context::Context;
use super::status::render_status;
use crate::client::{self, ClientError};
use crate::output::{self, ExitCode};

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
    let params = match server {
        Some(s) => json!({"server": s}),
        None => json!({}),
    };
    let r = client::control(&ctx.socket, "restart_child", params).await?;
    output::out(&format!(
        "restarted {} (pid {})",
        r["server"].as_str().unwrap_or("upstream"),
        r["pid"]
    ));
    Ok(ExitCode::Success)
}

pub(super) async fn stop(ctx: &Context) -> Result<ExitCode, ClientError> {
    let r = client::control(&ctx.socket, "shutdown", Value::Null).await?;
    // Wait for the socket to go away so `coogle stop && coogle serve` works.
    for _ in 0..200 {
        if !ctx.socket.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    output::out(&format!("stopped the coogle daemon (pid {})", r["pid"]));
    Ok(ExitCode::Success)
}
