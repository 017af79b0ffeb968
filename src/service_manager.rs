//! The per-user service as its manager sees it: systemd's `coogle.service` on Linux, launchd's
//! `dev.coogle.daemon` LaunchAgent on macOS. Where the service file lives, loading and unloading
//! it, whether it runs, and restarting it (after an update). Writing the files is setup's; this
//! module only asks the manager, every call bounded by a time limit, and a manager that is not
//! there is an answer ([`ManagerState::Unavailable`], [`ServiceStatus::Unknown`]), never a hang
//! or a panic.
//!
//! Both managers are plain values built from a [`Platform`], with the program that talks to
//! them (`COOGLE_SYSTEMCTL` and `COOGLE_LAUNCHCTL` name stand-ins): the launchd path runs, and
//! is tested, on Linux as well.
//!
//! launchd, as `man launchctl` documents its modern verbs: the agent is `gui/<uid>/<label>` in
//! the user's GUI (Aqua) domain. `bootstrap gui/<uid> <plist>` loads it (and, with `RunAtLoad`,
//! starts it), `bootout gui/<uid>/<label>` stops and unloads it, `kickstart -k` restarts it,
//! `enable` clears a persistent `disable` that would make `bootstrap` fail, and `print` says
//! whether it is loaded and its `state`. launchd reads the plist only at `bootstrap`, so a
//! changed plist is booted out and bootstrapped again. Without a GUI login (over SSH, at the
//! login window) the `gui/<uid>` domain does not exist or refuses: the plist in
//! `~/Library/LaunchAgents` is then loaded by launchd itself at the next desktop login.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::paths::{Os, Platform};
use crate::process::{RunError, run_bounded};

/// The launchd label and the systemd unit name.
pub const LABEL: &str = "dev.coogle.daemon";
pub const UNIT_NAME: &str = "coogle.service";

const MANAGER_LIMIT: Duration = Duration::from_secs(20);

/// How long to keep retrying `bootstrap` right after a `bootout`: launchd tears the old job
/// down asynchronously, and a `bootstrap` that comes too soon fails ("Bootstrap failed: 5:
/// Input/output error" or "37: Operation already in progress").
const REBOOTSTRAP_WINDOW: Duration = Duration::from_secs(5);

/// The service manager's answer, for the user.
#[derive(Debug, Clone, PartialEq)]
pub enum ManagerState {
    /// Enabled and started (or reloaded, or stopped and removed for uninstall).
    Started,
    /// No usable service manager here (none installed, no systemd user instance, no GUI login
    /// session for launchd): the file is written, nothing is running from it. Not a failure.
    Unavailable(String),
    /// The manager answered with an error.
    Failed(String),
}

impl From<Result<String, RunError>> for ManagerState {
    fn from(r: Result<String, RunError>) -> Self {
        match r {
            Ok(_) => ManagerState::Started,
            Err(e) => ManagerState::Failed(e.to_string()),
        }
    }
}

/// Whether the service runs, as its manager says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceStatus {
    Running,
    /// Loaded (launchd) but not running right now: it exited (a daemon started on demand
    /// already holds the socket, so it exited 0 and `KeepAlive` leaves it), or it is waiting
    /// out its `ThrottleInterval`.
    Loaded,
    /// Installed but not loaded (launchd) or not active (systemd).
    Stopped,
    /// The manager cannot be asked here; why.
    Unknown(String),
}

/// The per-user service manager of a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manager {
    Systemd(Systemd),
    Launchd(Launchd),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Systemd {
    /// systemctl, or what `COOGLE_SYSTEMCTL` names.
    pub systemctl: PathBuf,
    /// `$XDG_CONFIG_HOME/systemd/user/coogle.service` (default `~/.config/systemd/user`).
    pub unit: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launchd {
    /// `/bin/launchctl`, or what `COOGLE_LAUNCHCTL` names.
    pub launchctl: PathBuf,
    pub uid: u32,
    /// `~/Library/LaunchAgents/dev.coogle.daemon.plist`.
    pub plist: PathBuf,
}

fn program(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(default), PathBuf::from)
}

impl Manager {
    /// The manager of `platform`, talking through the real programs or the stand-ins the
    /// environment names.
    pub fn for_platform(platform: &Platform) -> Manager {
        match platform.os {
            Os::MacOs => Manager::Launchd(Launchd {
                launchctl: program("COOGLE_LAUNCHCTL", "/bin/launchctl"),
                uid: platform.uid,
                plist: platform
                    .home
                    .join("Library/LaunchAgents")
                    .join(format!("{LABEL}.plist")),
            }),
            Os::Linux => Manager::Systemd(Systemd {
                systemctl: program("COOGLE_SYSTEMCTL", "systemctl"),
                unit: platform.config_home().join("systemd/user").join(UNIT_NAME),
            }),
        }
    }

    /// This machine's manager.
    pub fn current() -> Manager {
        Manager::for_platform(&Platform::current())
    }

    /// The service file this manager reads.
    pub fn installed_path(&self) -> &Path {
        match self {
            Manager::Systemd(s) => &s.unit,
            Manager::Launchd(l) => &l.plist,
        }
    }

    /// How the user names it in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Manager::Systemd(_) => "a systemd user manager",
            Manager::Launchd(_) => "launchd",
        }
    }

    /// The command that loads the written service by hand, for a hint.
    pub fn enable_command(&self) -> String {
        match self {
            Manager::Systemd(_) => format!("systemctl --user enable --now {UNIT_NAME}"),
            Manager::Launchd(_) => {
                format!("launchctl bootstrap gui/$UID ~/Library/LaunchAgents/{LABEL}.plist")
            }
        }
    }

    /// The command that restarts it, for a hint.
    pub fn restart_command(&self) -> String {
        match self {
            Manager::Systemd(_) => format!("systemctl --user restart {UNIT_NAME}"),
            Manager::Launchd(_) => format!("launchctl kickstart -k gui/$UID/{LABEL}"),
        }
    }

    /// Load the service file just written (`changed`: its content is new, so a loaded
    /// service must pick it up) and start it.
    pub fn load(&self, changed: bool) -> ManagerState {
        match self {
            Manager::Systemd(s) => s.load(changed),
            Manager::Launchd(l) => l.load(changed),
        }
    }

    /// Stop the service and unload it, before its file is removed.
    pub fn unload(&self) -> ManagerState {
        match self {
            Manager::Systemd(s) => s.unload(),
            Manager::Launchd(l) => l.unload(),
        }
    }

    /// After the file is removed: what the manager needs to forget it.
    pub fn forget(&self) {
        if let Manager::Systemd(s) = self {
            let _ = s.run(&["daemon-reload"]);
        }
    }

    pub fn status(&self) -> ServiceStatus {
        match self {
            Manager::Systemd(s) => s.status(),
            Manager::Launchd(l) => l.status(),
        }
    }

    /// Restart the installed and loaded service (after an update, so the new binary serves).
    /// `None` when no service is installed or it is not under a manager here; otherwise what
    /// restarted it, or why that failed.
    pub fn restart_installed(&self) -> Option<Result<String, RunError>> {
        if !self.installed_path().exists() {
            return None;
        }
        match self {
            Manager::Systemd(s) => (s.status() == ServiceStatus::Running).then(|| {
                s.run(&["restart", UNIT_NAME])
                    .map(|_| format!("systemctl --user restart {UNIT_NAME}"))
            }),
            // Loaded is enough: `kickstart -k` kills a running instance and starts a new one,
            // or starts one that had exited.
            Manager::Launchd(l) => {
                matches!(l.status(), ServiceStatus::Running | ServiceStatus::Loaded).then(|| {
                    let target = l.target();
                    l.run(&["kickstart", "-k", &target])
                        .map(|_| format!("launchctl kickstart -k {target}"))
                })
            }
        }
    }
}

impl Systemd {
    /// `systemctl --user <args>`, bounded.
    fn run(&self, args: &[&str]) -> Result<String, RunError> {
        let mut all = vec!["--user"];
        all.extend_from_slice(args);
        run_bounded(&self.systemctl, &all, MANAGER_LIMIT)
    }

    /// Is a systemd user manager there to talk to?
    fn available(&self) -> Result<(), RunError> {
        self.run(&["show-environment"]).map(|_| ())
    }

    fn load(&self, changed: bool) -> ManagerState {
        if let Err(why) = self.available() {
            return ManagerState::Unavailable(why.to_string());
        }
        let enabled = self
            .run(&["daemon-reload"])
            .and_then(|_| self.run(&["enable", "--now", UNIT_NAME]));
        match enabled {
            // A changed unit must run the new binary/arguments.
            Ok(_) if changed => self.run(&["try-restart", UNIT_NAME]).into(),
            other => other.into(),
        }
    }

    fn unload(&self) -> ManagerState {
        match self.available() {
            Err(why) => ManagerState::Unavailable(why.to_string()),
            Ok(()) => self.run(&["disable", "--now", UNIT_NAME]).into(),
        }
    }

    fn status(&self) -> ServiceStatus {
        if let Err(why) = self.available() {
            return ServiceStatus::Unknown(why.to_string());
        }
        if self.run(&["is-active", "--quiet", UNIT_NAME]).is_ok() {
            ServiceStatus::Running
        } else {
            ServiceStatus::Stopped
        }
    }
}

impl Launchd {
    /// `launchctl <args>`, bounded.
    fn run(&self, args: &[&str]) -> Result<String, RunError> {
        run_bounded(&self.launchctl, args, MANAGER_LIMIT)
    }

    /// `gui/<uid>`: the user's GUI login session, where LaunchAgents live.
    fn domain(&self) -> String {
        format!("gui/{}", self.uid)
    }

    /// `gui/<uid>/dev.coogle.daemon`: the LaunchAgent as launchctl names it.
    pub fn target(&self) -> String {
        format!("gui/{}/{LABEL}", self.uid)
    }

    /// The GUI domain is there to load into; else why not, for the user.
    fn session(&self) -> Result<(), String> {
        match self.run(&["print", &self.domain()]) {
            Ok(_) => Ok(()),
            Err(e @ RunError::Start { .. }) => Err(e.to_string()),
            Err(e) => Err(no_gui_session(self.uid, &e.to_string())),
        }
    }

    fn load(&self, changed: bool) -> ManagerState {
        if let Err(why) = self.session() {
            return ManagerState::Unavailable(why);
        }
        let target = self.target();
        // A `launchctl disable` (by the user, or an old uninstall) outlives the plist and makes
        // `bootstrap` fail; setup installing the agent is the user asking for it again.
        if let Err(e) = self.run(&["enable", &target]) {
            return ManagerState::Failed(e.to_string());
        }
        let loaded = self.run(&["print", &target]).is_ok();
        if loaded && !changed {
            return ManagerState::Started;
        }
        if loaded {
            // launchd read the old plist at its bootstrap: unload it so the new one is read.
            if let Err(e) = self.run(&["bootout", &target]) {
                return ManagerState::Failed(e.to_string());
            }
        }
        let plist = self.plist.to_string_lossy();
        let deadline = Instant::now() + REBOOTSTRAP_WINDOW;
        loop {
            match self.run(&["bootstrap", &self.domain(), &plist]) {
                Ok(_) => return ManagerState::Started,
                Err(e) if loaded && Instant::now() < deadline => {
                    tracing::debug!(error = %e, "bootstrap right after bootout; retrying");
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(e) => return refused(self.uid, e),
            }
        }
    }

    fn unload(&self) -> ManagerState {
        if let Err(why) = self.session() {
            return ManagerState::Unavailable(why);
        }
        let target = self.target();
        if self.run(&["print", &target]).is_err() {
            // Not loaded: nothing to stop.
            return ManagerState::Started;
        }
        self.run(&["bootout", &target]).into()
    }

    fn status(&self) -> ServiceStatus {
        if let Err(why) = self.session() {
            return ServiceStatus::Unknown(why);
        }
        match self.run(&["print", &self.target()]) {
            Ok(text) if print_state(&text) == Some("running") => ServiceStatus::Running,
            Ok(_) => ServiceStatus::Loaded,
            Err(_) => ServiceStatus::Stopped,
        }
    }
}

/// The service's own `state = …` in `launchctl print gui/<uid>/<label>`: the first one, at
/// the top level of the service's description (nested sections come after it).
fn print_state(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("state = "))
        .map(str::trim)
}

fn no_gui_session(uid: u32, said: &str) -> String {
    let ssh = if std::env::var_os("SSH_CONNECTION").is_some() {
        " (this is an SSH session)"
    } else {
        ""
    };
    format!(
        "no GUI login session for uid {uid} to load a LaunchAgent into{ssh}: `launchctl print gui/{uid}` said: {said}"
    )
}

/// A failed `bootstrap`. Error 125 ("Domain does not support specified action") is launchd
/// refusing the GUI domain to a session that is not part of it, as over SSH: not a broken
/// install, so it is reported as unavailable, like a missing session.
fn refused(uid: u32, e: RunError) -> ManagerState {
    let said = e.to_string();
    if said.contains("125:") || said.contains("Domain does not support") {
        ManagerState::Unavailable(no_gui_session(uid, &said))
    } else {
        ManagerState::Failed(said)
    }
}

/// A stand-in `launchctl` for tests of the launchd path on any OS.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A stand-in `launchctl`: logs each call's arguments to `calls`, and answers from
    /// `script` (shell `case` arms on "$*"); unmatched calls succeed silently.
    pub(crate) struct FakeLaunchctl {
        pub dir: tempfile::TempDir,
        pub launchd: Launchd,
    }

    impl FakeLaunchctl {
        pub fn new(script: &str) -> FakeLaunchctl {
            let dir = tempfile::tempdir().unwrap();
            let exe = dir.path().join("launchctl");
            let log = dir.path().join("calls");
            crate::fake_executable::write_executable(
                &exe,
                format!(
                    "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in\n{script}\nesac\nexit 0\n",
                    log.display()
                ),
            );
            let plist = dir
                .path()
                .join("LaunchAgents")
                .join(format!("{LABEL}.plist"));
            FakeLaunchctl {
                launchd: Launchd {
                    launchctl: exe,
                    uid: 501,
                    plist,
                },
                dir,
            }
        }

        pub fn calls(&self) -> Vec<String> {
            std::fs::read_to_string(self.dir.path().join("calls"))
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    /// `launchctl print` of a loaded, running agent, as a stand-in's `case` arm.
    pub(crate) const LOADED_RUNNING: &str = "'print gui/501/dev.coogle.daemon') printf 'gui/501/dev.coogle.daemon = {\\n\\tactive count = 1\\n\\tstate = running\\n\\tpid = 4242\\n\\tendpoints = {\\n\\t\\tstate = active\\n\\t}\\n}\\n' ;;";
}

#[cfg(test)]
mod tests {
    use super::testing::{FakeLaunchctl, LOADED_RUNNING};
    use super::*;

    #[test]
    fn first_load_enables_and_bootstraps_into_the_gui_domain() {
        let f = FakeLaunchctl::new("'print gui/501/dev.coogle.daemon') exit 113 ;;");
        let m = Manager::Launchd(f.launchd.clone());
        assert_eq!(m.load(true), ManagerState::Started);
        let plist = f.launchd.plist.display().to_string();
        assert_eq!(
            f.calls(),
            [
                "print gui/501".to_owned(),
                "enable gui/501/dev.coogle.daemon".to_owned(),
                "print gui/501/dev.coogle.daemon".to_owned(),
                format!("bootstrap gui/501 {plist}"),
            ]
        );
    }

    #[test]
    fn a_loaded_agent_with_an_unchanged_plist_is_left_alone() {
        let f = FakeLaunchctl::new(LOADED_RUNNING);
        let m = Manager::Launchd(f.launchd.clone());
        assert_eq!(m.load(false), ManagerState::Started);
        assert!(
            !f.calls().iter().any(|c| c.starts_with("boot")),
            "{:?}",
            f.calls()
        );
    }

    /// An older plist (another binary path, missing keys) was loaded: launchd only reads a
    /// plist at bootstrap, so the new one takes effect through bootout + bootstrap, and a
    /// bootstrap that races the asynchronous bootout is retried.
    #[test]
    fn a_changed_plist_is_booted_out_and_bootstrapped_again() {
        let f = FakeLaunchctl::new(&format!(
            "{LOADED_RUNNING}\n'bootstrap '*) if [ ! -e \"$(dirname \"$0\")/raced\" ]; then : > \"$(dirname \"$0\")/raced\"; echo 'Bootstrap failed: 5: Input/output error' >&2; exit 5; fi ;;"
        ));
        let m = Manager::Launchd(f.launchd.clone());
        assert_eq!(m.load(true), ManagerState::Started);
        let calls = f.calls();
        let plist = f.launchd.plist.display().to_string();
        let bootout = calls
            .iter()
            .position(|c| c == "bootout gui/501/dev.coogle.daemon")
            .expect("bootout");
        let bootstraps: Vec<usize> = calls
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == format!("bootstrap gui/501 {plist}"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(bootstraps.len(), 2, "{calls:?}");
        assert!(bootout < bootstraps[0], "{calls:?}");
    }

    /// Over SSH, or with nobody logged in at the Mac's screen, there is no `gui/<uid>` domain:
    /// a clear "unavailable", never a failure, and nothing else is tried.
    #[test]
    fn no_gui_session_is_unavailable_not_failed() {
        let f = FakeLaunchctl::new(
            "'print gui/501') echo 'Bad request.\nCould not find domain for port identifier: 0x0' >&2; exit 113 ;;",
        );
        let m = Manager::Launchd(f.launchd.clone());
        match m.load(true) {
            ManagerState::Unavailable(why) => {
                assert!(why.contains("no GUI login session for uid 501"), "{why}");
                assert!(why.contains("Could not find domain"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(f.calls(), ["print gui/501"]);
        assert!(matches!(m.status(), ServiceStatus::Unknown(_)));
        assert!(matches!(m.unload(), ManagerState::Unavailable(_)));
        // The domain is listed but refuses this session (launchd's error 125, seen over SSH).
        let f = FakeLaunchctl::new(
            "'bootstrap '*) echo 'Bootstrap failed: 125: Domain does not support specified action' >&2; exit 125 ;;\n'print gui/501/dev.coogle.daemon') exit 113 ;;",
        );
        match Manager::Launchd(f.launchd.clone()).load(true) {
            ManagerState::Unavailable(why) => assert!(why.contains("125"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Any other refusal is a failure, with what launchctl said.
        let f = FakeLaunchctl::new(
            "'bootstrap '*) echo 'Bootstrap failed: 122: Path had bad ownership/permissions' >&2; exit 122 ;;\n'print gui/501/dev.coogle.daemon') exit 113 ;;",
        );
        assert_eq!(
            Manager::Launchd(f.launchd.clone()).load(true),
            ManagerState::Failed(
                "Bootstrap failed: 122: Path had bad ownership/permissions".into()
            )
        );
    }

    #[test]
    fn launchctl_missing_is_unavailable() {
        let l = Launchd {
            launchctl: PathBuf::from("/nonexistent/launchctl"),
            uid: 501,
            plist: PathBuf::from("/nonexistent/p.plist"),
        };
        assert!(matches!(
            Manager::Launchd(l).load(true),
            ManagerState::Unavailable(_)
        ));
    }

    #[test]
    fn status_reads_the_state_launchctl_prints() {
        let f = FakeLaunchctl::new(LOADED_RUNNING);
        let m = Manager::Launchd(f.launchd.clone());
        assert_eq!(m.status(), ServiceStatus::Running);
        let f = FakeLaunchctl::new(
            "'print gui/501/dev.coogle.daemon') printf '{\\n\\tstate = not running\\n\\tlast exit code = 0\\n}\\n' ;;",
        );
        assert_eq!(
            Manager::Launchd(f.launchd.clone()).status(),
            ServiceStatus::Loaded
        );
        let f = FakeLaunchctl::new("'print gui/501/dev.coogle.daemon') exit 113 ;;");
        assert_eq!(
            Manager::Launchd(f.launchd.clone()).status(),
            ServiceStatus::Stopped
        );
    }

    #[test]
    fn unload_boots_out_only_what_is_loaded() {
        let f = FakeLaunchctl::new(LOADED_RUNNING);
        assert_eq!(
            Manager::Launchd(f.launchd.clone()).unload(),
            ManagerState::Started
        );
        assert!(
            f.calls()
                .contains(&"bootout gui/501/dev.coogle.daemon".to_owned())
        );
        let f = FakeLaunchctl::new("'print gui/501/dev.coogle.daemon') exit 113 ;;");
        assert_eq!(
            Manager::Launchd(f.launchd.clone()).unload(),
            ManagerState::Started
        );
        assert!(!f.calls().iter().any(|c| c.starts_with("bootout")));
    }

    #[test]
    fn restart_after_an_update_kickstarts_with_k() {
        let f = FakeLaunchctl::new(LOADED_RUNNING);
        let m = Manager::Launchd(f.launchd.clone());
        // Not installed: nothing to restart.
        assert!(m.restart_installed().is_none());
        std::fs::create_dir_all(f.launchd.plist.parent().unwrap()).unwrap();
        std::fs::write(&f.launchd.plist, b"<plist/>").unwrap();
        assert_eq!(
            m.restart_installed().unwrap().unwrap(),
            "launchctl kickstart -k gui/501/dev.coogle.daemon"
        );
        assert!(
            f.calls()
                .contains(&"kickstart -k gui/501/dev.coogle.daemon".to_owned())
        );
    }

    #[test]
    fn the_platform_picks_the_manager_and_its_file() {
        let mut p = Platform::current();
        p.home = PathBuf::from("/Users/ada");
        p.uid = 501;
        p.os = Os::MacOs;
        let m = Manager::for_platform(&p);
        assert_eq!(
            m.installed_path(),
            Path::new("/Users/ada/Library/LaunchAgents/dev.coogle.daemon.plist")
        );
        assert_eq!(m.name(), "launchd");
        p.os = Os::Linux;
        p.xdg_config_home = None;
        let m = Manager::for_platform(&p);
        assert_eq!(
            m.installed_path(),
            Path::new("/Users/ada/.config/systemd/user/coogle.service")
        );
    }
}
