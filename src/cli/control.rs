//! `coogle status`, `restart`, `reload` and `stop`: one control-mode request each to the
//! running daemon.
//! They never start a daemon. With none running, `stop` has nothing to do (said, exit 0),
//! `reload` nothing to tell (the next daemon reads the file), `status --json` prints
//! `"running": false`; the rest say so with a hint.

use std::time::Duration;

use serde::Serialize;

use super::context::{Context, config_error};
use super::status::render_status;
use crate::client::{self, ClientError};
use crate::config::Config;
use crate::output::{self, ExitCode};
use crate::wire::{Status, Target};

/// How long `coogle stop` waits for the daemon to exit, beyond its configured grace period.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Nothing listens on the socket: the answer to "is a daemon running?" is no.
fn none_running(result: &Result<impl Sized, ClientError>) -> bool {
    matches!(result, Err(ClientError::NotRunning { .. }))
}

/// `coogle status --json`: whether a daemon runs, then its status (or, with none, the socket
/// nothing answered on). Scripts read these names.
#[derive(Serialize)]
struct StatusJson<'a> {
    running: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    socket: Option<&'a std::path::Path>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    status: Option<&'a Status>,
}

pub(super) async fn status(ctx: &Context, as_json: bool) -> Result<ExitCode, ClientError> {
    let status = client::status(&ctx.socket).await;
    if as_json && none_running(&status) {
        // Scripts always get JSON; the exit code still says the daemon is unreachable.
        output::json(&StatusJson {
            running: false,
            socket: Some(&ctx.socket),
            status: None,
        });
        return Ok(ExitCode::Usage);
    }
    let status = status?;
    if as_json {
        output::json(&StatusJson {
            running: true,
            socket: None,
            status: Some(&status),
        });
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
    let ready = client::restart_child(&ctx.socket, Target::here(server.as_deref())).await?;
    let pid = ready
        .pid
        .map_or_else(|| "null".to_string(), |p| p.to_string());
    output::out(&format!("restarted {} (pid {pid})", ready.server));
    Ok(ExitCode::Success)
}

/// How long `coogle restart --daemon` waits for the hand-over: it happens once no call is in
/// flight, which a long call can postpone (the daemon tries again at each quiet moment).
const HAND_OVER_WAIT: Duration = Duration::from_secs(120);

/// `coogle restart --daemon`: the daemon becomes the binary on disk in place (same pid, the
/// socket never closed), keeping every child; this waits until it has, and says what was kept.
pub(super) async fn restart_daemon(ctx: &Context) -> Result<ExitCode, ClientError> {
    let restarted = client::restart_daemon_in_place(&ctx.socket, HAND_OVER_WAIT, |answer| {
        output::note(&format!(
            "coogle {} ({}) proved it can serve; the daemon becomes it once no call is in flight",
            answer.version,
            answer.exe.display()
        ));
    })
    .await?;
    match restarted {
        Some(r) => output::out(&r.summary()),
        None => output::out(&format!(
            "no coogle daemon is running on {}; the next session starts the binary on disk",
            ctx.socket.display()
        )),
    }
    Ok(ExitCode::Success)
}

/// `coogle reload`: the daemon reads its config file again and serves the servers new in it,
/// without stopping anything.
pub(super) async fn reload(ctx: &Context) -> Result<ExitCode, ClientError> {
    let reloaded = client::reload(&ctx.socket).await;
    if none_running(&reloaded) {
        // Nothing to tell, but a config the next daemon cannot start with is worth saying now.
        if let Some(e) = &ctx.config_problem {
            return Ok(config_error(e));
        }
        output::out(&format!(
            "no coogle daemon is running on {}; the next one reads the config when it starts",
            ctx.socket.display()
        ));
        return Ok(ExitCode::Success);
    }
    let r = match reloaded {
        // The daemon read the file and refused it: its answer names the file and the problem.
        Err(ClientError::Remote(e)) => {
            output::error_text(
                &e.message,
                Some(
                    "fix the file and run `coogle reload` again; the daemon goes on serving what it had",
                ),
            );
            return Ok(ExitCode::Failure);
        }
        other => other?,
    };
    let Some(r) = r else {
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
    // Keys the daemon ignored, typos most often: named here, where the person just edited.
    if let Some(f) = &r.file
        && let Ok(config) = Config::load(Some(f))
    {
        for k in &config.unknown_keys {
            output::warn(&format!("{}: {k}; it is ignored", f.display()));
        }
    }
    Ok(ExitCode::Success)
}

pub(super) async fn stop(ctx: &Context) -> Result<ExitCode, ClientError> {
    // Return only once the process is gone, so `coogle stop && coogle serve` finds no daemon
    // still draining its calls (and holding its lock). The daemon may use its whole grace
    // period for calls in flight, then stops its children.
    let limit = STOP_WAIT + Duration::from_millis(ctx.config.shutdown_grace_ms);
    let stopped = client::shutdown(&ctx.socket, limit).await;
    if none_running(&stopped) {
        // Stopping what is stopped is done, as `brew services stop` says.
        output::out(&format!(
            "no coogle daemon is running on {}; nothing to stop",
            ctx.socket.display()
        ));
        return Ok(ExitCode::Success);
    }
    let pid = stopped?;
    output::out(&format!("stopped the coogle daemon (pid {pid})"));
    Ok(ExitCode::Success)
}
