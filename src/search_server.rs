//! `coogle search-server`: the built-in ask_google MCP server (issue 5; being written).

use crate::output::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args) -> ExitCode {
    crate::output::error_text(
        "coogle search-server is not available in this build yet",
        None,
    );
    ExitCode::Usage
}
