//! What the commands that talk to a daemon share: the config and socket they use, how they
//! start a daemon when none answers, the async runtime they run in, and how their errors are
//! shown (uv's shape, with a hint) and exit.

use std::future::Future;
use std::path::PathBuf;

use crate::client::{ClientError, Starter};
use crate::config::{Config, ConfigError, GlobalPaths};
use crate::output::{self, ExitCode};
use crate::{causes, logging, paths};

/// Everything a command needs that comes from flags and config.
pub(super) struct Context {
    config_flag: Option<PathBuf>,
    pub config: Config,
    pub socket: PathBuf,
    /// Why the config file did not load, when [`Context::load_lenient`] went on without it.
    pub config_problem: Option<ConfigError>,
}

impl Context {
    pub fn load(paths: &GlobalPaths) -> Result<Context, ConfigError> {
        let config = Config::load(paths.config.as_deref())?;
        let socket = paths.socket(Some(&config));
        Ok(Context {
            config_flag: paths.config.clone(),
            config,
            socket,
            config_problem: None,
        })
    }

    /// For commands that only need the socket (`coogle mcp`, `status`, `restart`, `stop`): a
    /// config that does not load is returned beside a context built from the defaults, with
    /// the socket from the flags, else the file's `socketPath` read leniently, else the
    /// default. A typo in config.json must not cut anyone off a daemon that is running fine.
    pub fn load_lenient(
        paths: &GlobalPaths,
    ) -> Result<(Context, Option<ConfigError>), ConfigError> {
        let e = match Context::load(paths) {
            Ok(ctx) => return Ok((ctx, None)),
            Err(e) => e,
        };
        // The defaults load unless the environment itself is broken; then the first error says more.
        let Ok(config) = Config::from_value(serde_json::json!({}), None) else {
            return Err(e);
        };
        let ctx = Context {
            config_flag: paths.config.clone(),
            config,
            socket: paths.socket_without_config(),
            config_problem: None,
        };
        Ok((ctx, Some(e)))
    }

    /// How `coogle mcp`, `tools` and `call` start a daemon when none answers: this binary,
    /// with this invocation's config and socket.
    pub fn starter(&self) -> Starter {
        Starter {
            exe: super::shim_exe::main_exe(),
            config: self.config_flag.clone(),
            socket: self.socket.clone(),
            log_file: paths::log_file(),
        }
    }
}

/// Run `work` to completion in the async runtime (two worker threads: the CLI needs no more).
pub(super) fn block_on(work: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(work),
        Err(e) => {
            output::error_text(&format!("could not start the async runtime: {e}"), None);
            ExitCode::Usage
        }
    }
}

/// A command that talks to a running daemon: warnings on stderr, the config, then `command`
/// in the runtime; its error is shown with its hint.
pub(super) fn daemon_command<F, Fut>(paths: &GlobalPaths, command: F) -> ExitCode
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = Result<ExitCode, ClientError>>,
{
    logging::init_stderr("coogle=warn,rmcp=warn");
    let ctx = match Context::load(paths) {
        Ok(c) => c,
        Err(e) => return config_error(&e),
    };
    run_command(ctx, command)
}

/// A control command that never starts a daemon (`status`, `restart`, `stop`): a config that
/// does not load is a warning naming the file and what is wrong, and the command goes on with
/// the socket alone ([`Context::load_lenient`]).
pub(super) fn control_command<F, Fut>(paths: &GlobalPaths, command: F) -> ExitCode
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = Result<ExitCode, ClientError>>,
{
    logging::init_stderr("coogle=warn,rmcp=warn");
    let ctx = match Context::load_lenient(paths) {
        Ok((ctx, None)) => ctx,
        Ok((ctx, Some(e))) => {
            output::warn(&format!(
                "{}; using the socket {} ({})",
                causes::one_line(&e),
                ctx.socket.display(),
                e.fix()
            ));
            ctx
        }
        Err(e) => return config_error(&e),
    };
    run_command(ctx, command)
}

/// `coogle reload`: a control command whose subject is the config itself, so a config that
/// does not load is not a warning beforehand: the daemon's answer says it (once), or, with no
/// daemon, the command does ([`Context::config_problem`]).
pub(super) fn reload_command<F, Fut>(paths: &GlobalPaths, command: F) -> ExitCode
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = Result<ExitCode, ClientError>>,
{
    logging::init_stderr("coogle=warn,rmcp=warn");
    let ctx = match Context::load_lenient(paths) {
        Ok((ctx, problem)) => Context {
            config_problem: problem,
            ..ctx
        },
        Err(e) => return config_error(&e),
    };
    run_command(ctx, command)
}

fn run_command<F, Fut>(ctx: Context, command: F) -> ExitCode
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = Result<ExitCode, ClientError>>,
{
    block_on(async move {
        match command(ctx).await {
            Ok(code) => code,
            Err(e) => client_error(&e),
        }
    })
}

pub(super) fn config_error(e: &ConfigError) -> ExitCode {
    output::error(e, Some(e.fix()));
    ExitCode::Usage
}

fn client_error(e: &ClientError) -> ExitCode {
    output::error(e, e.hint().as_deref());
    match e {
        // An upstream name the daemon does not have is a bad argument.
        ClientError::Remote(w) if w.code == crate::wire::ErrorCode::NotFound => ExitCode::Usage,
        ClientError::Remote(_)
        | ClientError::Mcp(_)
        | ClientError::StopTimeout { .. }
        | ClientError::HandOverPending { .. }
        | ClientError::HandOverFailed(_) => ExitCode::Failure,
        _ => ExitCode::Usage,
    }
}
