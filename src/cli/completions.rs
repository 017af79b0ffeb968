//! `coogle completions`: shell completions and the man page, both generated from clap's
//! definition of the command line, so they can never disagree with it.

use clap::CommandFactory;

use super::Cli;
use crate::output::{self, ExitCode};

#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell
    #[arg(value_enum, required_unless_present = "man")]
    pub shell: Option<clap_complete::Shell>,
    /// Print the man page (roff) instead
    #[arg(long, conflicts_with = "shell")]
    pub man: bool,
}

pub(super) fn run(args: &CompletionsArgs) -> ExitCode {
    let mut cmd = Cli::command();
    let mut buf: Vec<u8> = Vec::new();
    if args.man {
        if let Err(e) = clap_mangen::Man::new(cmd).render(&mut buf) {
            output::error_text(&format!("could not render the man page: {e}"), None);
            return ExitCode::Failure;
        }
    } else if let Some(shell) = args.shell {
        clap_complete::generate(shell, &mut cmd, "coogle", &mut buf);
    }
    output::out_raw(&buf);
    ExitCode::Success
}
