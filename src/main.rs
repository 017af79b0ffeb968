//! Parse the command line and dispatch; everything else lives in the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = coogle::cli::Cli::parse();
    // The shim is a pump that must stay small: one thread. The daemon and the CLI get two.
    let builder = match cli.command {
        coogle::cli::Command::Mcp { .. } => tokio::runtime::Builder::new_current_thread(),
        _ => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
    };
    let runtime = match { builder }.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            coogle::output::error_text(&format!("could not start the async runtime: {e}"), None);
            return coogle::output::ExitCode::Usage.into();
        }
    };
    runtime.block_on(coogle::cli::run(cli)).into()
}
