//! `coogle self-update` and `coogle completions` (issue 6; being written).

use crate::cli::Cli;
use crate::output::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct SelfUpdateArgs {}

#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {}

pub fn main(_cli: &Cli) -> ExitCode {
    crate::output::error_text("this command is not available in this build yet", None);
    ExitCode::Usage
}
