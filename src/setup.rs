//! `coogle setup`, `doctor`, `uninstall`, `generate-plist`, `generate-unit` (issue 4; being written).

use crate::cli::Cli;
use crate::output::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct SetupArgs {}

#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {}

#[derive(Debug, Clone, clap::Args)]
pub struct UninstallArgs {}

pub fn main(_cli: &Cli) -> ExitCode {
    crate::output::error_text("this command is not available in this build yet", None);
    ExitCode::Usage
}
