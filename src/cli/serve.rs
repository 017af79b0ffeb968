//! The two long-running modes: `coogle serve` (the daemon, in the async runtime) and `coogle
//! mcp` (the shim: a pump on plain threads, outside any runtime, which must never print to
//! stdout, its MCP channel).

use std::path::PathBuf;
use std::time::Duration;

use super::context::{Context, config_error};
use crate::config::GlobalPaths;
use crate::output::{self, ExitCode};
use crate::{causes, client, daemon, logging, paths, shim};

/// `coogle mcp`: the pump runs on plain threads, outside any async runtime.
pub(super) fn mcp(paths: &GlobalPaths, server: Option<String>) -> ExitCode {
    logging::init_stderr("coogle=warn,rmcp=warn");
    shim::hint_on_terminal();
    if let Some(why) = super::shim_exe::sibling_warning() {
        tracing::warn!("{why}");
    }
    // The shim needs only the socket: a broken config.json must not cut new sessions off a
    // daemon that runs fine (one started before the file broke).
    let ctx = match Context::load_lenient(paths) {
        Ok((ctx, None)) => ctx,
        Ok((ctx, Some(e))) => {
            tracing::warn!("{e}; using the socket {}", ctx.socket.display());
            ctx
        }
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::Usage;
        }
    };
    let opts = shim::Options {
        socket: ctx.socket.clone(),
        server,
        starter: ctx.starter(),
        max_line_bytes: ctx.config.max_line_bytes,
    };
    match shim::run(opts) {
        Ok(()) => ExitCode::Success,
        // The shim said why, on stderr and to the client, before it returned.
        Err(_) => ExitCode::Usage,
    }
}

/// `coogle serve`: the daemon in the foreground, until a signal or `coogle stop`. It may also
/// end by becoming a newer coogle in place (see `daemon::handover`); `standby` and `inherit`
/// are the two sides of that hand-over.
pub(super) fn serve(
    paths: &GlobalPaths,
    log_stderr: bool,
    standby: Option<PathBuf>,
    inherit: Option<String>,
    carry: Option<String>,
) -> ExitCode {
    // The daemon's own working directory is fixed, never its starter's: nothing it does may
    // depend on which client happened to start it (a project's `.env`, relative paths;
    // children run in their own `cwd`, else the home directory), and it must not keep a
    // project's directory busy. The paths it was given are absolute already (`GlobalPaths`).
    if let Err(e) = std::env::set_current_dir("/") {
        tracing::warn!("could not change to /: {e}");
    }
    let ctx = match Context::load(paths) {
        Ok(c) => c,
        Err(e) => return config_error(&e),
    };
    if let Some(path) = standby {
        logging::init_stderr("coogle=info");
        return match daemon::standby(&ctx.socket, &path) {
            Ok(()) => ExitCode::Success,
            Err(e) => {
                output::error(&e, None);
                ExitCode::Usage
            }
        };
    }
    let inherited = inherit.as_deref().map(|arg| {
        let i = daemon::Inherited::from_arg(arg)?;
        match carry.as_deref() {
            Some(fd) => i.with_carry(fd),
            None => Ok(i),
        }
    });
    let mut inherited = match inherited {
        None => None,
        Some(Ok(i)) => Some(i),
        Some(Err(e)) => {
            output::error(&e, None);
            return ExitCode::Usage;
        }
    };
    // Nothing the daemon was started with reaches a child: a child runs with what its own
    // client would have given it. The hand-over's descriptors are marked too (adopted already,
    // or later, as its carried children's pipes are); they are unmarked again only for the
    // exec of a next version (see `handover::takeover`).
    crate::os::close_inherited_on_exec();
    loop {
        // One thread runs the whole daemon (blocking work goes to tokio's blocking pool). Every
        // child is spawned from it, which is what keeps children alive across an upgrade in
        // place: Linux's parent-death signal fires when the *thread* that spawned a child ends,
        // and the exec below ends every thread but this one. It is no slower: the router's
        // work per line is a few microseconds, and no cross-thread wake-ups are paid.
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                output::error_text(&format!("could not start the async runtime: {e}"), None);
                return ExitCode::Usage;
            }
        };
        let ended = runtime.block_on(run_daemon(&ctx, log_stderr, inherited.take()));
        // Nothing of this runtime may run on into the exec below.
        runtime.shutdown_timeout(Duration::from_secs(2));
        let replacement = match ended {
            Ended::Exit(code) => return code,
            Ended::Replace(r) => r,
        };
        let (exe, version) = (replacement.exe.clone(), replacement.version.clone());
        // Only comes back when the exec failed: serve on with this version, as before.
        let (e, back) = replacement.exec();
        tracing::error!(
            "could not become coogle {version} ({}): {e}; this daemon ({}) serves on",
            exe.display(),
            crate::wire::VERSION
        );
        inherited = Some(back);
    }
}

enum Ended {
    Exit(ExitCode),
    Replace(daemon::Replacement),
}

async fn run_daemon(
    ctx: &Context,
    log_stderr: bool,
    inherited: Option<daemon::Inherited>,
) -> Ended {
    let log_file = paths::log_file();
    if let Err(e) = logging::init_daemon(&log_file, &ctx.config.log_level, log_stderr) {
        output::error_text(
            &format!("could not open the log file {}: {e}", log_file.display()),
            None,
        );
        return Ended::Exit(ExitCode::Usage);
    }
    // Keys nobody reads, typos most often: the log says so once per start (doctor and
    // `coogle reload` name them too), never every command.
    if let Some(file) = &ctx.config.file {
        for k in &ctx.config.unknown_keys {
            tracing::warn!("{}: {k}; it is ignored", file.display());
        }
    }
    let options = daemon::Options {
        socket: ctx.socket.clone(),
        log_file: Some(log_file),
    };
    match daemon::run(ctx.config.clone(), options, inherited).await {
        Ok(daemon::Outcome::Stopped) => Ended::Exit(ExitCode::Success),
        Ok(daemon::Outcome::AlreadyRunning) => {
            output::note(&format!(
                "coogle daemon already running on {}",
                ctx.socket.display()
            ));
            Ended::Exit(ExitCode::Success)
        }
        Ok(daemon::Outcome::Replace(r)) => Ended::Replace(r),
        Err(e) => {
            // The log keeps it; the person (or the client that started this daemon and reads
            // its `error:` lines) gets it once, in uv's shape, with its fix.
            tracing::error!(target: logging::FILE_ONLY, "{}", causes::one_line(&e));
            let hint = match &e {
                daemon::DaemonError::Path(paths::PathError::TooLong { .. }) => {
                    Some(client::SHORTER_SOCKET)
                }
                _ => None,
            };
            output::error(&e, hint);
            Ended::Exit(ExitCode::Usage)
        }
    }
}
