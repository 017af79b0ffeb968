//! The per-user service as its manager sees it: systemd's `coogle.service` on Linux, launchd's
//! `dev.coogle.daemon` on macOS. Where the service file lives, whether the service runs, and
//! restarting it (after an update). Writing the files is setup's; this module only asks the
//! manager, every call bounded by a time limit, and a manager that is not there is an answer
//! (`None`, [`ManagerState::Unavailable`]), never a hang or a panic.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::paths;
use crate::process::{RunError, run_bounded};

/// The launchd label and the systemd unit name.
pub const LABEL: &str = "dev.coogle.daemon";
pub const UNIT_NAME: &str = "coogle.service";
/// `$XDG_CONFIG_HOME/systemd/user/coogle.service` (default `~/.config/systemd/user`).
pub(crate) fn unit_path() -> PathBuf {
    paths::config_home().join("systemd/user").join(UNIT_NAME)
}

/// `~/Library/LaunchAgents/dev.coogle.daemon.plist`.
pub(crate) fn plist_path() -> PathBuf {
    paths::home()
        .join("Library/LaunchAgents")
        .join(format!("{LABEL}.plist"))
}

/// The service file this OS uses.
pub fn installed_path() -> PathBuf {
    if cfg!(target_os = "macos") {
        plist_path()
    } else {
        unit_path()
    }
}

/// The service manager's answer, for the user.
#[derive(Debug, Clone, PartialEq)]
pub enum ManagerState {
    /// Enabled and started (or reloaded).
    Started,
    /// No usable service manager: the file is written, nothing is running from it.
    Unavailable(String),
    /// The manager answered with an error.
    Failed(String),
}

/// systemctl, or what `COOGLE_SYSTEMCTL` names (tests point it at a stand-in).
fn systemctl() -> PathBuf {
    std::env::var_os("COOGLE_SYSTEMCTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("systemctl"))
}

const MANAGER_LIMIT: Duration = Duration::from_secs(20);

/// `systemctl --user <args>`, bounded.
pub(crate) fn systemctl_user(args: &[&str]) -> Result<String, RunError> {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    run_bounded(&systemctl(), &all, MANAGER_LIMIT)
}

/// `launchctl <args>`, bounded.
pub(crate) fn launchctl(args: &[&str]) -> Result<String, RunError> {
    run_bounded(Path::new("/bin/launchctl"), args, MANAGER_LIMIT)
}

/// `gui/<uid>/dev.coogle.daemon`: the LaunchAgent as launchctl names it.
pub(crate) fn launchd_target() -> String {
    format!("gui/{}/{LABEL}", paths::uid())
}

impl From<Result<String, RunError>> for ManagerState {
    fn from(r: Result<String, RunError>) -> Self {
        match r {
            Ok(_) => ManagerState::Started,
            Err(e) => ManagerState::Failed(e.to_string()),
        }
    }
}

/// Is a systemd user manager there to talk to?
pub fn systemd_available() -> Result<(), RunError> {
    systemctl_user(&["show-environment"]).map(|_| ())
}

/// Restart the installed and running service (after an update, so the new binary serves).
/// `None` when no service is installed or it is not running under a manager here; otherwise
/// what restarted it, or why that failed.
pub fn restart_installed() -> Option<Result<String, RunError>> {
    if !installed_path().exists() || is_active() != Some(true) {
        return None;
    }
    Some(if cfg!(target_os = "macos") {
        let target = launchd_target();
        launchctl(&["kickstart", "-k", &target]).map(|_| format!("launchctl kickstart -k {target}"))
    } else {
        systemctl_user(&["restart", UNIT_NAME])
            .map(|_| format!("systemctl --user restart {UNIT_NAME}"))
    })
}

/// Is the service running? `None` when that cannot be known here.
pub fn is_active() -> Option<bool> {
    if cfg!(target_os = "macos") {
        Some(launchctl(&["print", &launchd_target()]).is_ok())
    } else {
        systemd_available().ok()?;
        Some(systemctl_user(&["is-active", "--quiet", UNIT_NAME]).is_ok())
    }
}
