//! `coogle self-update`: standalone installs update themselves from GitHub releases through the
//! self_update crate, in steps: `release` (which one), `download` (fetch and check its
//! SHA-256), `install` (unpack, run it, swap it in) and `restart` (the daemon).
//!
//! The updater is blocking and runs outside the async runtime. It refuses to touch a binary a
//! package manager owns (Homebrew: `brew upgrade coogle`). Nothing is replaced until the
//! archive's SHA-256 matches the release's `SHA256SUMS` and the new binary has run
//! `--version` and named the expected version; the swap is a rename in the binary's own
//! directory, so an interrupted update leaves the old binary whole. A daemon that was running
//! is restarted afterwards so the new version serves.

mod download;
mod install;
mod release;
mod restart;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use crate::config::GlobalPaths;
use crate::error::InstallError;
use crate::installed::managed_by;
use crate::output::{self, ExitCode};
use crate::wire;
use release::{Choice, Github};

/// The binary to replace (tests; normally this executable).
const EXE_VAR: &str = "COOGLE_SELF_UPDATE_EXE";

#[derive(Debug, Clone, clap::Args)]
pub struct SelfUpdateArgs {
    /// Only say whether a newer version exists
    #[arg(long)]
    pub check: bool,
    /// Do not ask for confirmation
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Download and verify the new version, run it once, but replace nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Install this version instead of the newest (also older ones)
    #[arg(long, value_name = "X.Y.Z")]
    pub version: Option<String>,
}

/// `coogle self-update`: outside the async runtime (the updater blocks).
pub fn self_update(paths: &GlobalPaths, args: &SelfUpdateArgs) -> ExitCode {
    update(paths, args).unwrap_or_else(|e| e.report())
}

fn update(paths: &GlobalPaths, args: &SelfUpdateArgs) -> Result<ExitCode, InstallError> {
    crate::tls::install();
    let exe = target_exe()?;
    if let Some((manager, how)) = managed_by(&exe) {
        return Err(InstallError::ManagedBy { exe, manager, how });
    }
    let current = wire::VERSION;
    let github = Github::from_env();
    let release = match release::choose(&github, args.version.as_deref())? {
        Choice::Install(release) => release,
        Choice::UpToDate(newest) => {
            output::out(&format!(
                "coogle {current} is up to date (newest release: {newest})"
            ));
            return Ok(ExitCode::Success);
        }
    };
    let version = &release.version;
    if args.check {
        output::out(&format!(
            "coogle {version} is available (this is {current}); `coogle self-update` installs it"
        ));
        return Ok(ExitCode::Success);
    }
    if version == current && args.version.is_some() {
        output::out(&format!("coogle {current} is already installed"));
        return Ok(ExitCode::Success);
    }
    if !args.yes && !args.dry_run && !confirmed(&exe, version)? {
        output::out("nothing changed");
        return Ok(ExitCode::Success);
    }
    let work = download::work_dir()?;
    let archive = download::verified_archive(&github, &release, &work.path)?;
    let new_bin = install::unpack_and_check(&archive, &work.path, &release)?;
    if args.dry_run {
        output::out(&format!(
            "dry run: would replace {} with coogle {version}",
            exe.display()
        ));
        return Ok(ExitCode::Success);
    }
    install::swap(&new_bin, &exe)?;
    // The shim's small executable travels with `coogle`. Without one in the archive the old
    // one stays, and hands its sessions back to `coogle` since its version differs.
    let new_shim = new_bin.with_file_name(crate::shim::SHIM_EXE);
    if new_shim.is_file() {
        install::swap(&new_shim, &exe.with_file_name(crate::shim::SHIM_EXE))?;
    }
    output::out(&format!(
        "updated {} from {current} to {version}",
        exe.display()
    ));
    restart::restart_daemon(paths, &exe);
    Ok(ExitCode::Success)
}

/// The binary to replace: `COOGLE_SELF_UPDATE_EXE`, else this executable, links resolved.
fn target_exe() -> Result<PathBuf, InstallError> {
    if let Some(p) = std::env::var_os(EXE_VAR).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(InstallError::CurrentExe)?;
    Ok(std::fs::canonicalize(&exe).unwrap_or(exe))
}

/// Ask before replacing; without a terminal that is an error (`--yes` skips the question).
fn confirmed(exe: &Path, version: &str) -> Result<bool, InstallError> {
    if !std::io::stdin().is_terminal() {
        return Err(InstallError::NeedsConfirmation {
            exe: exe.to_path_buf(),
        });
    }
    crate::terminal::guard();
    match dialoguer::Confirm::new()
        .with_prompt(format!(
            "Update coogle {} → {version} at {}? (esc cancels)",
            wire::VERSION,
            exe.display()
        ))
        .default(true)
        .interact_opt()
    {
        Ok(Some(yes)) => Ok(yes),
        // Esc: cancelled, as Ctrl-C is, with the terminal given back.
        Ok(None) | Err(_) => crate::terminal::cancel(),
    }
}
