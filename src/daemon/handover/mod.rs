//! Handing over to a newer coogle: after `brew upgrade` or `self-update`, the first shim of the
//! new version says so in its hello, and the daemon makes the new binary prove that it can
//! serve before it lets go. It never leaves a session without a daemon.
//!
//! A hello is only a claim, and any local client can make one. The daemon acts on it only when
//! the binary it was started from, as it is on disk now, reports a newer coogle (`--version`).
//! Then that binary is started as a *candidate*, `coogle serve --standby <path>`
//! ([`standby`]): it loads the config as a daemon would, listens on a private socket beside the
//! daemon's, and answers a hello with its version. The daemon connects there and checks the
//! listener's uid, that it is the very process it started, that this process runs the
//! installed file (not something the file points elsewhere), and that it answers with the
//! version it printed and can take the socket over ([`candidate`]). Only then, once no call is
//! queued or in flight, does the daemon step down: it stops its children and *execs* the new
//! binary in its own process with the listening socket and the lock inherited ([`takeover`]).
//! The socket never stops listening (connections made meanwhile wait in its backlog), the lock
//! is never free, and the pid stays the one a service manager (systemd, launchd) tracks.
//!
//! A binary that fails any of it (not coogle, a broken build, a config the new version cannot
//! read) is never handed anything: the daemon keeps serving, the log says why, and that file is
//! not tried again until it changes (its device, inode, size or modification time).
//!
//! Upgrade in place (children kept across the hand-over) builds on the same exec: their pipes
//! can be inherited like the listener, and they stay children of the same pid.

mod candidate;
pub(crate) mod carried;
mod standby;
mod takeover;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) use standby::standby;
pub(crate) use takeover::{Carry, InheritError, Inherited, Replacement};

/// Write down the children to carry over (`detached`), for `--carry`: the state file, and the
/// descriptors it names, which stay open across the exec.
pub(crate) fn carry(
    dir: &Path,
    detached: Vec<crate::daemon::upstream::Detached>,
) -> std::io::Result<Carry> {
    let mut fds = Vec::new();
    let mut instances = Vec::new();
    for d in detached {
        let mut instance = d.instance;
        let pipes = d.pipes;
        instance.child.stdin = carried::raw(&pipes.stdin);
        instance.child.stdout = carried::raw(&pipes.stdout);
        instance.child.stderr = carried::raw(&pipes.stderr);
        instance.child.stdout_pending = pipes.stdout_pending;
        instance.child.stderr_pending = pipes.stderr_pending;
        fds.extend([pipes.stdin, pipes.stdout, pipes.stderr]);
        instances.push(instance);
    }
    let file = carried::write(dir, instances)?;
    Ok(Carry { file, fds })
}

use crate::wire;

/// Refused binaries remembered at the most (each a different file on disk).
const MAX_REFUSED: usize = 16;

/// What the hand-over messages carry (both ends are this module, in two versions of coogle:
/// fields are only ever added).
#[derive(serde::Serialize, serde::Deserialize)]
struct StandbyHello {
    coogle: u32,
    /// Always `standby`.
    mode: String,
    version: String,
    pid: u32,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StandbyReply {
    coogle: u32,
    ok: bool,
    version: String,
    /// The ways of taking over this candidate supports ([`TAKEOVER`]).
    #[serde(default)]
    takeover: Vec<String>,
}

/// Taking over by exec with `serve --inherit <listener>,<lock>`: a contract between versions,
/// so a later coogle that changes it names the new way differently.
const TAKEOVER: &str = "inherit-1";

/// Taking the running children over too, with `--carry <fd>` (see [`carried`]): an upgrade in
/// place that restarts no child.
const CARRY: &str = "carry-1";

/// A file on disk as it is now: a changed binary is a new candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl FileId {
    pub fn of(path: &Path) -> std::io::Result<FileId> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
        })
    }

    fn same_file(&self, dev_ino: (u64, u64)) -> bool {
        (self.dev, self.ino) == dev_ino
    }
}

/// A newer binary that proved it can serve.
pub(crate) struct Verified {
    pub exe: PathBuf,
    pub id: FileId,
    pub version: String,
    /// It takes the running children over (else they are stopped first).
    pub carries: bool,
}

#[derive(Default)]
struct State {
    verified: Option<Verified>,
    refused: Vec<FileId>,
    /// The binary last found not newer than this daemon.
    not_newer: Option<FileId>,
    /// The last hand-over that did not happen, and why (for `status`).
    last_failure: Option<String>,
    /// The hand-over under way now (taken from `verified`, being carried out).
    under_way: Option<wire::HandingOver>,
}

pub(crate) struct Handover {
    /// The daemon's socket: the candidate listens beside it, and is told which one to take.
    socket: PathBuf,
    /// Told of the candidate, so it is not taken for an orphan (or reaped) while checked.
    reaper: Arc<super::reaper::Reaper>,
    /// A check of a claim is running.
    busy: AtomicBool,
    /// A verified newer binary waits for the daemon to be idle.
    ready: AtomicBool,
    state: Mutex<State>,
    /// `restart --daemon` requests, one at a time: a second one made meanwhile gets the
    /// answer the first one got.
    restarting: tokio::sync::Mutex<()>,
}

impl Handover {
    /// `refused`: a binary this process already failed to become (its exec failed), and why.
    pub fn new(
        socket: &Path,
        refused: Option<FileId>,
        failure: Option<String>,
        reaper: Arc<super::reaper::Reaper>,
    ) -> Handover {
        Handover {
            socket: socket.to_path_buf(),
            reaper,
            busy: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            state: Mutex::new(State {
                refused: refused.into_iter().collect(),
                last_failure: failure,
                ..State::default()
            }),
            restarting: tokio::sync::Mutex::new(()),
        }
    }

    /// The last hand-over that did not happen, and why.
    pub fn last_failure(&self) -> Option<String> {
        self.state().last_failure.clone()
    }

    /// `coogle restart --daemon`: make the binary on disk (this version or a newer one; never
    /// an older one) prove it can serve, as a newer client's claim would, and hand over to it
    /// at the next quiet moment, keeping every child. What it becomes, or why not. A binary
    /// refused before is tried again: the user asked.
    pub async fn restart(self: &Arc<Self>) -> Result<wire::HandingOver, String> {
        let _one_at_a_time = self.restarting.lock().await;
        if let Some(v) = self.pending_verified() {
            return Ok(v);
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.prove_installed())
            .await
            .map_err(|e| format!("the check of the binary on disk failed: {e}"))?
    }

    /// What a verified binary waiting for a quiet moment is, as `restart_daemon` says it.
    fn pending_verified(&self) -> Option<wire::HandingOver> {
        let st = self.state();
        st.verified
            .as_ref()
            .map(answer)
            .or_else(|| st.under_way.clone())
    }

    fn prove_installed(&self) -> Result<wire::HandingOver, String> {
        let fail = |why: String| {
            tracing::warn!("restart --daemon: {why}");
            self.state().last_failure = Some(why.clone());
            Err(why)
        };
        let Some(exe) = installed_exe() else {
            return fail("this daemon cannot tell which file it was started from".into());
        };
        let id = match FileId::of(&exe) {
            Ok(id) => id,
            Err(e) => return fail(format!("{} cannot be read: {e}", exe.display())),
        };
        let version = match version_of(&exe, &self.reaper) {
            Ok(v) => v,
            Err(why) => {
                return fail(format!(
                    "{} is not a coogle this daemon can become: {why}; this daemon ({}) serves on",
                    exe.display(),
                    wire::VERSION
                ));
            }
        };
        if wire::version_newer(wire::VERSION, &version) {
            return fail(format!(
                "{} is coogle {version}, older than this daemon ({}), which serves on: an upgrade in place never goes back (`coogle stop` starts the one on disk at the next session, restarting every server)",
                exe.display(),
                wire::VERSION
            ));
        }
        tracing::info!(exe = %exe.display(), "restart --daemon: starting coogle {version} on the side to check that it can serve before handing over");
        if let Err(why) = self.busy_wait() {
            return fail(why);
        }
        let proved = candidate::prove(&self.socket, &self.reaper, &exe, id, &version);
        self.busy.store(false, Ordering::Release);
        match proved {
            Ok(carries) => {
                tracing::info!(exe = %exe.display(), carries, "coogle {version} proved it can serve; this daemon hands over to it once no call is in flight");
                let mut st = self.state();
                st.refused.retain(|r| *r != id);
                st.verified = Some(Verified {
                    exe: exe.clone(),
                    id,
                    version: version.clone(),
                    carries,
                });
                drop(st);
                self.ready.store(true, Ordering::Release);
                Ok(wire::HandingOver {
                    handing_over: true,
                    version,
                    exe,
                    carries,
                })
            }
            Err(why) => fail(format!(
                "{} (coogle {version}) did not prove it can serve: {why}; this daemon ({}) serves on",
                exe.display(),
                wire::VERSION
            )),
        }
    }

    /// Take the one check slot (a newer client's claim may be checking the same binary right
    /// now): wait for it, bounded.
    fn busy_wait(&self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.busy.swap(true, Ordering::AcqRel) {
            if std::time::Instant::now() >= deadline {
                return Err("another check of a new binary did not end within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// A newer binary proved it can serve and waits for the daemon to be idle (`info`'s
    /// `replacePending`).
    pub fn pending(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A client of `claimed` version said hello: check the claim in the background (one check
    /// at a time; a claim made meanwhile is covered by the one running).
    pub fn claim(self: &Arc<Self>, claimed: &str) {
        if !wire::version_newer(claimed, wire::VERSION) || self.pending() {
            return;
        }
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        let claimed = claimed.to_string();
        tokio::task::spawn_blocking(move || {
            this.check(&claimed);
            this.busy.store(false, Ordering::Release);
        });
    }

    fn check(&self, claimed: &str) {
        let Some(exe) = installed_exe() else {
            tracing::warn!(
                "a client of coogle {claimed} connected, but this daemon cannot tell which file it was started from; staying"
            );
            return;
        };
        let id = match FileId::of(&exe) {
            Ok(id) => id,
            Err(e) => {
                tracing::info!(client_version = %claimed, "a client of a newer coogle connected, but {} cannot be read ({e}); staying", exe.display());
                return;
            }
        };
        {
            let st = self.state();
            if st.refused.contains(&id) {
                tracing::debug!(client_version = %claimed, exe = %exe.display(), "this binary was refused before and has not changed");
                return;
            }
            if st.not_newer == Some(id) {
                return;
            }
        }
        let version = match version_of(&exe, &self.reaper) {
            Ok(v) => v,
            Err(why) => return self.refuse(id, &exe, None, &why),
        };
        if !wire::version_newer(&version, wire::VERSION) {
            tracing::info!(client_version = %claimed, on_disk = %version, "a client claims a newer coogle, but the binary on disk is not newer; staying");
            self.state().not_newer = Some(id);
            return;
        }
        tracing::info!(exe = %exe.display(), "coogle {version} is installed; starting it on the side to check that it can serve before handing over");
        match candidate::prove(&self.socket, &self.reaper, &exe, id, &version) {
            Ok(carries) => {
                tracing::info!(exe = %exe.display(), carries, "coogle {version} proved it can serve; this daemon ({}) hands over to it once no call is queued or in flight", wire::VERSION);
                self.state().verified = Some(Verified {
                    exe,
                    id,
                    version,
                    carries,
                });
                self.ready.store(true, Ordering::Release);
            }
            Err(why) => self.refuse(id, &exe, Some(&version), &why),
        }
    }

    fn refuse(&self, id: FileId, exe: &Path, version: Option<&str>, why: &str) {
        let what = version.map_or_else(String::new, |v| format!(" (coogle {v})"));
        tracing::warn!(
            "not handing over to {}{what}: {why}; this daemon ({}) keeps serving, and does not try that file again until it changes",
            exe.display(),
            wire::VERSION
        );
        let mut st = self.state();
        st.last_failure = Some(format!(
            "not handing over to {}{what}: {why}",
            exe.display()
        ));
        if st.refused.len() >= MAX_REFUSED {
            st.refused.remove(0);
        }
        st.refused.push(id);
    }

    /// The hand-over did not happen now (something was busy): keep it for the next quiet
    /// moment.
    pub fn put_back(&self, v: Verified) {
        let mut st = self.state();
        st.under_way = None;
        st.verified = Some(v);
        self.ready.store(true, Ordering::Release);
    }

    /// At the moment of handing over: the verified binary, if the file is still the one that
    /// proved itself. A file changed since is looked at again on the next newer client.
    pub fn take_verified(&self) -> Option<Verified> {
        let mut st = self.state();
        let v = st.verified.take()?;
        self.ready.store(false, Ordering::Release);
        match FileId::of(&v.exe) {
            Ok(now) if now == v.id => {
                st.under_way = Some(answer(&v));
                Some(v)
            }
            _ => {
                tracing::info!(exe = %v.exe.display(), "the newer coogle changed on disk after it was checked; staying until the next newer client says hello");
                None
            }
        }
    }
}

/// What `restart_daemon` answers about a verified binary.
fn answer(v: &Verified) -> wire::HandingOver {
    wire::HandingOver {
        handing_over: true,
        version: v.version.clone(),
        exe: v.exe.clone(),
        carries: v.carries,
    }
}

/// The file this daemon was started from, as it is on disk now (a replaced one included).
///
/// The path it was started by comes first when it is absolute: a service runs Homebrew's
/// `opt/coogle/bin/coogle`, a link that an upgrade points at the new version, where the
/// executable itself (`current_exe`, links resolved on Linux) is the old version's file.
pub(crate) fn installed_exe() -> Option<PathBuf> {
    let invoked = std::env::args_os().next().map(PathBuf::from);
    if let Some(p) = invoked.filter(|p| p.is_absolute() && p.is_file()) {
        return Some(p);
    }
    Some(crate::process::live_exe(&std::env::current_exe().ok()?))
}

/// The version `exe --version` reports; an error unless it says it is coogle
/// (`coogle 0.1.0 (abc1234 2026-11-22)`).
///
/// The probe is the daemon's own child while it runs: registered with the reaper as it is
/// spawned, so another child's exit meanwhile never takes it for an orphan.
fn version_of(exe: &Path, reaper: &super::reaper::Reaper) -> Result<String, String> {
    let mut probe = None;
    let out = crate::process::run_bounded_spawned_by(
        exe,
        &["--version"],
        Duration::from_secs(5),
        |cmd| {
            let spawning = reaper.spawning();
            let child = cmd.spawn()?;
            spawning.started("coogle --version", child.id());
            probe = Some(child.id());
            Ok(child)
        },
    );
    if let Some(pid) = probe {
        reaper.release(pid);
    }
    let out = out.map_err(|e| format!("its --version failed: {e}"))?;
    let first = out.lines().next().unwrap_or_default();
    let mut words = first.split_whitespace();
    match (words.next(), words.next()) {
        (Some("coogle"), Some(v)) if is_version(v) => Ok(v.to_string()),
        _ => Err(format!(
            "its --version does not say it is coogle: {:?}",
            first.chars().take(80).collect::<String>()
        )),
    }
}

fn is_version(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The daemon's own command line for another run of it: its arguments as it was started,
/// without a previous hand-over's and with the socket it serves named explicitly (a config
/// edited since must not move the next one elsewhere), then `extra`.
fn own_args(socket: &Path, extra: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut out = without_ours(std::env::args_os().skip(1));
    out.push("--socket".into());
    out.push(socket.as_os_str().to_owned());
    out.extend_from_slice(extra);
    out
}

/// `args` without `--standby`, `--inherit` and `--socket` (in either form, with their values).
fn without_ours(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const OURS: [&str; 4] = ["--standby", "--inherit", "--carry", "--socket"];
    let mut out = Vec::new();
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        let text = a.to_str().unwrap_or_default();
        if OURS.contains(&text) {
            args.next();
            continue;
        }
        if OURS.iter().any(|o| text.starts_with(&format!("{o}="))) {
            continue;
        }
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_run_gets_the_old_arguments_without_a_hand_overs() {
        let args = [
            "serve",
            "--socket",
            "/a",
            "--log-stderr",
            "--inherit",
            "3,4",
            "--standby=/x",
            "--config",
            "c.json",
        ];
        let kept = without_ours(args.iter().map(std::ffi::OsString::from));
        assert_eq!(kept, ["serve", "--log-stderr", "--config", "c.json"]);
    }

    #[test]
    fn only_a_coogle_version_line_counts() {
        assert!(is_version("0.1.0"));
        assert!(is_version("10.20.30-rc1"));
        assert!(!is_version("9.9"));
        assert!(!is_version("v1.2.3"));
        assert!(!is_version("1.2.x"));
    }
}
