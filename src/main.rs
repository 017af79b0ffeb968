//! Parse the command line and dispatch; everything else lives in the library.

use clap::Parser;
use coogle::cli::{self, Command};
use coogle::output::{self, ExitCode};

fn main() -> std::process::ExitCode {
    // The shim starts once per agent session: its plain forms skip clap (see `fast_mcp`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(cli) = cli::fast_mcp(&args, &|k| std::env::var_os(k))
        && let Command::Mcp { server } = &cli.command
    {
        return cli::mcp(&cli, server.clone()).into();
    }
    let cli = cli::Cli::parse();
    // The shim is a pump that must stay small and add no hand-offs: plain threads, no runtime.
    match &cli.command {
        Command::Mcp { server } => return cli::mcp(&cli, server.clone()).into(),
        // Interactive and installer commands run outside the runtime (prompts block).
        Command::Setup(_)
        | Command::Doctor(_)
        | Command::Uninstall(_)
        | Command::GeneratePlist
        | Command::GenerateUnit => return coogle::setup::main(&cli).into(),
        // The updater blocks (HTTP, file swaps) and must run outside the async runtime.
        Command::SelfUpdate(_) | Command::Completions(_) => {
            return coogle::update::main(&cli).into();
        }
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::error_text(&format!("could not start the async runtime: {e}"), None);
            return ExitCode::Usage.into();
        }
    };
    runtime.block_on(cli::run(cli)).into()
}
