//! `coogle tools` and `coogle call`: an rmcp client session over the socket in mcp mode, the
//! path an agent takes, so what they show is what an agent sees.

use rmcp::model::{CallToolRequestParams, ContentBlock};
use serde_json::Value;

use super::context::Context;
use crate::client::{self, ClientError};
use crate::output::{self, ExitCode};

pub(super) async fn tools(
    ctx: &Context,
    server: Option<String>,
    as_json: bool,
) -> Result<ExitCode, ClientError> {
    let (session, started) =
        client::rmcp_session(&ctx.socket, Some(&ctx.starter()), server, "coogle-cli").await?;
    let tools = session.list_all_tools().await.map_err(client::mcp_error);
    let _ = session.cancel().await;
    // Listing reads: a daemon started for it is stopped again (one that was running stays).
    if let Some(started) = started {
        stop_started(ctx, &started).await;
    }
    let tools = tools?;
    if as_json {
        output::json(&serde_json::to_value(&tools).unwrap_or(Value::Null));
    } else {
        let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
        let mut text = String::new();
        for t in &tools {
            let desc = t
                .description
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                .unwrap_or("")
                .trim();
            text.push_str(&format!("{:width$}  {desc}\n", t.name));
        }
        let n = tools.len();
        text.push_str(&format!("{n} tool{}", if n == 1 { "" } else { "s" }));
        output::out(&text);
    }
    Ok(ExitCode::Success)
}

/// Stop the daemon `tools` started, if it is still the one answering (another client may have
/// started its own at the same moment, and that one keeps running).
async fn stop_started(ctx: &Context, started: &client::Started) {
    let Ok(info) = client::info(&ctx.socket).await else {
        return;
    };
    if Some(info.pid) == started.pid() {
        let limit = std::time::Duration::from_millis(ctx.config.shutdown_grace_ms)
            + std::time::Duration::from_secs(30);
        if let Err(e) = client::shutdown(&ctx.socket, limit).await {
            tracing::warn!(
                "could not stop the daemon started for this command: {}",
                crate::causes::one_line(&e)
            );
        }
    }
}

/// Why `coogle call`'s arguments cannot be used (a usage error).
#[derive(Debug, thiserror::Error)]
enum ArgumentsError {
    #[error("could not read the arguments from stdin: {0}")]
    Stdin(std::io::Error),
    #[error("the arguments must be a JSON object, like '{{\"query\":\"x\"}}'")]
    NotAnObject,
    #[error("the arguments are not valid JSON: {0}")]
    Json(serde_json::Error),
}

fn parse_arguments(
    arguments: Option<&str>,
) -> Result<serde_json::Map<String, Value>, ArgumentsError> {
    let text = match arguments {
        None => return Ok(serde_json::Map::new()),
        Some("-") => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(ArgumentsError::Stdin)?;
            s
        }
        Some(s) => s.to_string(),
    };
    match serde_json::from_str::<Value>(&text).map_err(ArgumentsError::Json)? {
        Value::Object(m) => Ok(m),
        _ => Err(ArgumentsError::NotAnObject),
    }
}

pub(super) async fn call(
    ctx: &Context,
    server: Option<String>,
    tool: &str,
    arguments: Option<&str>,
    as_json: bool,
) -> Result<ExitCode, ClientError> {
    let args = match parse_arguments(arguments) {
        Ok(a) => a,
        Err(e) => {
            output::error(&e, None);
            return Ok(ExitCode::Usage);
        }
    };
    // A call may leave work behind in the child (a sign-in waiting for its browser, say): the
    // daemon it started keeps running, as it would for an agent.
    let (session, _started) =
        client::rmcp_session(&ctx.socket, Some(&ctx.starter()), server, "coogle-cli").await?;
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
    let result = session.call_tool(params).await;
    let _ = session.cancel().await;
    let result = result.map_err(client::mcp_error)?;
    let is_error = result.is_error == Some(true);
    if as_json {
        output::json(&serde_json::to_value(&result).unwrap_or(Value::Null));
    } else {
        let mut text = String::new();
        for c in &result.content {
            match c {
                ContentBlock::Text(t) => text.push_str(&t.text),
                other => text
                    .push_str(&serde_json::to_string(other).unwrap_or_else(|_| "<content>".into())),
            }
            text.push('\n');
        }
        if result.content.is_empty()
            && let Some(s) = &result.structured_content
        {
            text.push_str(&serde_json::to_string_pretty(s).unwrap_or_default());
        }
        output::out(text.trim_end_matches('\n'));
    }
    Ok(if is_error {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}
