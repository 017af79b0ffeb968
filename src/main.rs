//! Parse the command line and dispatch; everything else lives in the library.

use clap::Parser;
use coogle::cli;

fn main() -> std::process::ExitCode {
    // The shim starts once per agent session: its plain forms skip clap (see `fast_mcp`).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let cli = match cli::fast_mcp(&args, &|k| std::env::var_os(k)) {
        Some(cli) => {
            // Many shims run at once: each becomes the small `coogle-mcp` when it is there.
            cli::become_small_shim(&args);
            cli
        }
        None => cli::Cli::parse(),
    };
    cli::run(cli).into()
}
