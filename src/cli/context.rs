//! What the commands that talk to a daemon share: the config and socket they use, how they
//! start a daemon when none answers, the async runtime they run in, and how their errors are
//! shown (uv's shape, with a hint) and exit.

use std::future::Future;
use std::path::PathBuf;

use crate::client::{ClientError, Starter};
use crate::config::{Config, ConfigError, GlobalPaths};
use crate::output::{self, ExitCode};
use crate::{logging, paths};

/// Everything a command needs that comes from flags and config.
pub(super) struct Context {
    config_flag: Option<PathBuf>,
    pub config: Config,
    pub socket: PathBuf,
}

impl Context {
    pub fn load(paths: &GlobalPaths) -> Result<Context, ConfigError> {
        let config = Config::load(paths.config.as_deref())?;
        let socket = paths.socket(Some(&config));
        Ok(Context {
            config_flag: paths.config.clone(),
            config,
            socket,
        })
    }

    /// How `coogle mcp`, `tools` and `call` start a daemon when none answers: this binary,
    /// with this invocation's config and socket.
    pub fn starter(&self) -> Starter {
        Starter {
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("coogle")),
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
    block_on(async move {
        match command(ctx).await {
            Ok(code) => code,
            Err(e) => client_error(&e),
        }
    })
}

pub(super) fn config_error(e: &ConfigError) -> ExitCode {
    output::error(
        e,
        Some("fix the file, or move it aside to use the defaults"),
    );
    ExitCode::Usage
}

fn client_error(e: &ClientError) -> ExitCode {
    output::error(e, e.hint().as_deref());
    match e {
        ClientError::Remote(_) | ClientError::Mcp(_) | ClientError::StopTimeout { .. } => {
            ExitCode::Failure
        }
        _ => ExitCode::Usage,
    }
}
