//! The command line: clap's definitions, and the one dispatch from a parsed command to the
//! function that runs it, in or outside the async runtime as that command needs.
//!
//! Commands that talk to a running daemon use control mode (`status`, `restart`, `reload`, `stop`) or an
//! rmcp client in mcp mode (`tools`, `call`), so the CLI exercises the same path an agent does.
//! Commands below this module get the global `--config`/`--socket` as a
//! [`GlobalPaths`], never the parsed command line. Exit codes are [`ExitCode`]: 0 success, 1
//! the operation failed, 2 usage or environment.

mod completions;
mod context;
mod control;
mod fast_mcp;
mod logs;
mod serve;
mod shim_exe;
mod status;
mod tools;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::GlobalPaths;
use crate::output::ExitCode;
use crate::{paths, search_server, setup, update};
use context::{block_on, control_command, daemon_command, reload_command};

pub use completions::CompletionsArgs;
pub use fast_mcp::fast_mcp;
pub use shim_exe::{become_small_shim, hand_back_if_mismatched, statically_linked};

/// `coogle --version`: the package version, then the git revision and commit date when built
/// from a git checkout, and `pgo` for a build made with profile-guided optimization
/// (`0.1.0 (abc1234 2026-11-22, pgo)`; build.rs writes what follows the version).
pub const VERSION_LINE: &str = concat!(env!("CARGO_PKG_VERSION"), env!("COOGLE_VERSION_DETAIL"));

#[derive(Debug, Parser)]
#[command(
    name = "coogle",
    version = crate::cli::VERSION_LINE,
    about = "Share one stdio MCP server among many AI-agent sessions",
    long_about = "coogle runs one daemon per user that owns the MCP server child process(es) \
                  (by default Google Workspace MCP) and multiplexes every agent session onto \
                  them. Point Claude Code at `coogle mcp` instead of the server itself."
)]
pub struct Cli {
    /// Config file (default: $XDG_CONFIG_HOME/coogle/config.json)
    #[arg(long, global = true, env = "COOGLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Daemon socket (default: config socketPath, else $XDG_RUNTIME_DIR/coogle/coogle.sock)
    #[arg(long, global = true, env = "COOGLE_SOCKET")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground
    Serve {
        /// Also log to stderr when it is not a terminal
        #[arg(long)]
        log_stderr: bool,
        /// Hand-over: prove this binary can serve, on this socket beside the daemon's (a
        /// running daemon of an older version starts it so)
        #[arg(long, hide = true, value_name = "PATH", conflicts_with = "inherit")]
        standby: Option<PathBuf>,
        /// Hand-over: serve on the listener and lock inherited from the daemon this one
        /// replaces (`<listener fd>,<lock fd>`)
        #[arg(long, hide = true, value_name = "FDS")]
        inherit: Option<String>,
        /// Upgrade in place: the running children the replaced daemon carried over (the
        /// descriptor of its state)
        #[arg(long, hide = true, value_name = "FD", requires = "inherit")]
        carry: Option<String>,
    },
    /// The stdio MCP server an agent starts: a pump to the daemon (starts one if needed)
    Mcp {
        /// Which upstream to serve (default: the only one, or `google`)
        #[arg(long)]
        server: Option<String>,
    },
    /// Show the daemon, its upstreams and sessions
    Status {
        /// Print JSON for scripts
        #[arg(long)]
        json: bool,
    },
    /// List the upstream's tools (through the daemon, as an agent sees them)
    Tools {
        /// Which upstream (default: the only one, or `google`)
        #[arg(long)]
        server: Option<String>,
        /// Print the full tool definitions as JSON
        #[arg(long)]
        json: bool,
    },
    /// Call a tool: `coogle call TOOL '{"arg":"value"}'`
    Call {
        /// The tool's name
        tool: String,
        /// Arguments as a JSON object (default `{}`); `-` reads them from stdin
        arguments: Option<String>,
        /// Which upstream (default: the only one, or `google`)
        #[arg(long)]
        server: Option<String>,
        /// Print the whole result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Restart an upstream's child process, or (--daemon) the daemon itself
    Restart {
        /// Which upstream's child (default: the only one, or `google`)
        #[arg(long, conflicts_with = "daemon")]
        server: Option<String>,
        /// Replace the daemon with the coogle binary on disk (this version or a newer one),
        /// in place: every session stays connected and every server's child keeps running
        #[arg(long)]
        daemon: bool,
    },
    /// Serve the upstreams new in config.json without stopping the daemon
    Reload,
    /// Stop the daemon
    Stop,
    /// The built-in ask_google MCP server (Gemini with Google Search grounding), on stdio
    SearchServer,
    /// Guided setup: credentials, config, service, client config
    Setup(crate::setup::SetupArgs),
    /// Check the installation and say how to fix what is wrong
    Doctor(crate::setup::DoctorArgs),
    /// Remove the service and restore the client configs coogle changed
    Uninstall(crate::setup::UninstallArgs),
    /// Move stdio MCP servers of Claude Code, Claude Desktop and Cursor behind the daemon
    Share(crate::setup::ShareArgs),
    /// Give shared entries back to their clients exactly as they were
    Unshare(crate::setup::UnshareArgs),
    /// Print the macOS LaunchAgent plist for this machine
    GeneratePlist,
    /// Print the systemd user unit for this machine
    GenerateUnit,
    /// Update a standalone install to the newest release (not for Homebrew installs)
    SelfUpdate(crate::update::SelfUpdateArgs),
    /// Print shell completions: `coogle completions bash|zsh|fish|elvish|powershell`
    Completions(CompletionsArgs),
    /// Show the daemon's log
    Logs {
        /// Keep printing as the log grows
        #[arg(short, long)]
        follow: bool,
        /// How many lines from the end
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
}

/// Run `coogle mcp` alone, for the `coogle-mcp` executable: unlike [`run`], this reaches no
/// other command's code, so the linker leaves it out of that small binary.
pub fn run_mcp(cli: Cli) -> ExitCode {
    let paths = GlobalPaths::new(cli.config, cli.socket);
    match cli.command {
        Command::Mcp { server } => serve::mcp(&paths, server),
        _ => ExitCode::Usage,
    }
}

/// Run a parsed command line: the one dispatch.
pub fn run(cli: Cli) -> ExitCode {
    let paths = GlobalPaths::new(cli.config, cli.socket);
    match cli.command {
        // The shim is a pump that must stay small and add no hand-offs: plain threads, no runtime.
        Command::Mcp { server } => serve::mcp(&paths, server),
        Command::Serve {
            log_stderr,
            standby,
            inherit,
            carry,
        } => serve::serve(&paths, log_stderr, standby, inherit, carry),
        Command::Status { json } => {
            control_command(
                &paths,
                |ctx| async move { control::status(&ctx, json).await },
            )
        }
        Command::Tools { server, json } => daemon_command(&paths, |ctx| async move {
            tools::tools(&ctx, server, json).await
        }),
        Command::Call {
            tool,
            arguments,
            server,
            json,
        } => daemon_command(&paths, |ctx| async move {
            tools::call(&ctx, server, &tool, arguments.as_deref(), json).await
        }),
        Command::Restart {
            daemon: true,
            server: _,
        } => control_command(
            &paths,
            |ctx| async move { control::restart_daemon(&ctx).await },
        ),
        Command::Restart {
            server,
            daemon: false,
        } => control_command(
            &paths,
            |ctx| async move { control::restart(&ctx, server).await },
        ),
        Command::Reload => reload_command(&paths, |ctx| async move { control::reload(&ctx).await }),
        Command::Stop => control_command(&paths, |ctx| async move { control::stop(&ctx).await }),
        Command::Logs { follow, lines } => block_on(logs::logs(&paths::log_file(), lines, follow)),
        Command::SearchServer => block_on(search_server::run(paths.config)),
        // Interactive and installer commands run outside the runtime (prompts block).
        Command::Setup(args) => setup::setup(&paths, &args),
        Command::Doctor(args) => setup::doctor::run(&paths, &args),
        Command::Uninstall(args) => setup::uninstall(&paths, &args),
        Command::Share(args) => setup::share(&paths, &args),
        Command::Unshare(args) => setup::unshare(&paths, &args),
        Command::GeneratePlist => setup::generate_plist(&paths),
        Command::GenerateUnit => setup::generate_unit(&paths),
        // The updater blocks (HTTP, file swaps) and must run outside the async runtime.
        Command::SelfUpdate(args) => update::self_update(&paths, &args),
        Command::Completions(args) => completions::run(&args),
    }
}
