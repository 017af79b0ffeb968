//! A `coogle serve` that a test starts with a command of its own (another socket, more
//! environment), where [`super::Env::daemon`] does not fit. Stopped when dropped (SIGTERM, then
//! SIGKILL after 10 s), so no daemon outlives its test. Its stderr is kept, and when the test
//! fails both it and the log file the command's HOME gives the daemon are shown.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::report::{self, Capture};

pub struct Serve {
    child: Child,
    /// What the daemon printed before (or instead of) logging: a refused config, "already
    /// running". Its log goes to [`Serve::log`].
    stderr: Capture,
    /// Where the daemon logs, from the HOME / XDG_STATE_HOME the command sets; `None` when it
    /// sets neither (the log is then the real user's, which a test must not print).
    log: Option<PathBuf>,
    what: String,
}

impl Serve {
    /// Run `cmd serve` (`cmd` as [`super::Env::cmd`] made it, adjusted).
    pub fn spawn(mut cmd: Command) -> Serve {
        let log = log_file_of(&cmd);
        let mut child = cmd
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn coogle serve");
        let stderr = Capture::spawn(child.stderr.take().unwrap());
        let what = format!("coogle serve (pid {})", child.id());
        Serve {
            child,
            stderr,
            log,
            what,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True once the process has exited.
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }
}

/// The daemon's log file for the environment `cmd` sets, as `paths::log_dir` resolves it.
fn log_file_of(cmd: &Command) -> Option<PathBuf> {
    let var = |name: &str| {
        cmd.get_envs()
            .find(|(k, _)| *k == OsStr::new(name))
            .and_then(|(_, v)| v)
            .map(PathBuf::from)
    };
    let dir = if cfg!(target_os = "macos") {
        var("HOME")?.join("Library/Logs")
    } else {
        var("XDG_STATE_HOME").or_else(|| Some(var("HOME")?.join(".local/state")))?
    };
    Some(dir.join("coogle/coogle.log"))
}

impl Drop for Serve {
    fn drop(&mut self) {
        super::stop(&mut self.child);
        if std::thread::panicking() {
            let said = self.stderr.settle(Duration::from_secs(2));
            if !said.trim().is_empty() {
                report::show_tail(&format!("{}, its stderr", self.what), &said);
            }
            if let Some(log) = &self.log {
                report::show_log_file(&format!("{}, its log", self.what), log);
            }
        }
    }
}
