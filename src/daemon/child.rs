//! Upstream child processes: spawn, record, stop, and reap the leftovers of a daemon that died.
//!
//! A child runs in its own process group so that everything it starts (uvx starts python) is
//! stopped with it; on Linux it also gets `PR_SET_PDEATHSIG` so a SIGKILLed daemon takes its
//! direct child along (macOS has no such thing: there the child sees its stdin close, which ends
//! a stdio MCP server, and the record below catches one that lingers). Its pid, group and start
//! time are recorded beside the socket so the next daemon can reap a group that outlived a
//! daemon killed without warning. This module must never signal a process group it cannot tie
//! to a record it wrote.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::config::ServerConfig;
use crate::exec_path;
use crate::os;
use crate::paths::Platform;

mod environment;

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// One line (it lands in `status` and in agents' errors): the I/O error is in the message.
    #[error("could not start `{command}`: {error}")]
    Spawn {
        command: String,
        error: std::io::Error,
    },
    /// Said in full because it lands in `coogle status`: which PATH was searched, and where
    /// the fix is.
    #[error(
        "could not start `{command}`: `{program}` is not in any directory of the daemon's PATH ({path}); `coogle doctor` says how to fix it"
    )]
    NotFound {
        command: String,
        program: String,
        path: String,
    },
    #[error("could not start `{command}`: its working directory {} is not a directory", dir.display())]
    NoDirectory { command: String, dir: PathBuf },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    EnvFile(#[from] environment::EnvFileError),
}

/// How many descriptors a child's table has room for from its start: enough for a Node
/// server's start (it opens more than 64 at once), where Linux would otherwise grow it while
/// its threads run (see [`os::roomy_descriptor_table`]).
const CHILD_DESCRIPTOR_SLOTS: i32 = 256;

pub struct Spawned {
    pub child: Child,
    pub pid: u32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Start the upstream's command in a new process group, with the environment
/// [`environment::build`] gives it (`passed`: the values of its `passEnv` from the sessions it
/// serves) and in its working directory: its `cwd`, else the user's home. The command is looked
/// up, and the child runs, under [`child_path`]: the same whoever started the daemon.
pub fn spawn(
    server: &ServerConfig,
    passed: &BTreeMap<String, String>,
) -> Result<Spawned, SpawnError> {
    let configured = server.child_env()?;
    let path = child_path(server, &configured);
    // Without a `cwd` of its own: the user's home (a deleted test home: the root).
    let cwd = server.cwd.clone().unwrap_or_else(|| {
        Some(crate::paths::home())
            .filter(|h| h.is_dir())
            .unwrap_or_else(|| PathBuf::from("/"))
    });
    if !cwd.is_dir() {
        return Err(SpawnError::NoDirectory {
            command: display_command(server),
            dir: cwd,
        });
    }
    let env = environment::build(server, &cwd, std::env::vars_os(), passed, configured)?;
    let program = exec_path::resolve(&server.command, &path, Some(&cwd)).ok_or_else(|| {
        SpawnError::NotFound {
            command: display_command(server),
            program: server.command.clone(),
            path: path.to_string_lossy().into_owned(),
        }
    })?;
    let mut cmd = Command::new(program);
    cmd.args(&server.args)
        .env_clear()
        .envs(env)
        .env("PATH", &path)
        .current_dir(&cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false)
        .process_group(0);
    // Linux: a SIGKILLed daemon takes its direct child along (see the module's doc).
    os::die_with_parent(cmd.as_std_mut());
    // Linux: the child starts as fast as from a client with many descriptors open.
    os::roomy_descriptor_table(cmd.as_std_mut(), CHILD_DESCRIPTOR_SLOTS);
    let mut child = cmd.spawn().map_err(|error| SpawnError::Spawn {
        command: display_command(server),
        error,
    })?;
    let pid = child.id().unwrap_or(0);
    let stdin = child.stdin.take().expect("stdin was piped");
    let stdout = child.stdout.take().expect("stdout was piped");
    let stderr = child.stderr.take().expect("stderr was piped");
    Ok(Spawned {
        child,
        pid,
        stdin,
        stdout,
        stderr,
    })
}

/// The PATH an upstream is found in and runs under: its own `env.PATH` when its config sets
/// one (taken as written), else the recorded `path`, the daemon's PATH and the usual places
/// ([`exec_path::daemon_path`]).
fn child_path(server: &ServerConfig, env: &[(String, String)]) -> OsString {
    match env.iter().find(|(k, _)| k == "PATH") {
        Some((_, v)) => OsString::from(v),
        None => exec_path::daemon_path(
            &server.search_path,
            std::env::var_os("PATH").as_deref(),
            &Platform::current(),
        ),
    }
}

pub fn display_command(server: &ServerConfig) -> String {
    std::iter::once(server.command.as_str())
        .chain(server.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Send `signal` to the process group led by `pgid`. Errors (the group is gone) are ignored.
pub fn signal_group(pgid: u32, signal: i32) {
    // No group (0) is refused by the OS layer; a stale one gives ESRCH: nothing to stop.
    let _ = os::signal_group(pgid, signal);
}

/// Stop a child's whole group: SIGTERM, then SIGKILL after `grace` if the leader has not
/// exited by then (`exited` resolves when it has). The group is swept with SIGKILL either way,
/// so a grandchild that ignored SIGTERM does not outlive its parent.
pub async fn stop_group(pgid: u32, grace: Duration, exited: impl std::future::Future<Output = ()>) {
    signal_group(pgid, libc::SIGTERM);
    let _ = tokio::time::timeout(grace, exited).await;
    signal_group(pgid, libc::SIGKILL);
}

/// What the daemon writes beside the socket for each running child.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChildRecord {
    pub pid: u32,
    pub pgid: u32,
    /// The leader's start time as [`os::Process::start`] reads it (Linux: clock ticks since
    /// boot; macOS: microseconds since the epoch), to tell a recycled pid from ours. The name is
    /// older than the macOS unit and kept so records of running daemons stay readable.
    #[serde(default)]
    pub start_ticks: Option<u64>,
    pub command: String,
    pub daemon_pid: u32,
}

pub fn write_record(path: &Path, record: &ChildRecord) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(record).unwrap_or_default())?;
    std::fs::rename(&tmp, path)
}

pub fn remove_record(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// A process's (group, start time), for the record written when a child starts; `None` where
/// the OS cannot say (the record then never leads to a kill).
pub fn proc_stat(pid: u32) -> Option<(u32, u64)> {
    os::process(pid).map(|p| (p.pgid, p.start))
}

/// Kill what is left of the groups recorded in `dir` by earlier daemons of this socket.
/// Returns the pids that were signalled.
/// `keep`: children this process carried over in an upgrade in place (its own, still served).
pub fn reap_recorded(records: &[PathBuf], keep: &[u32]) -> Vec<u32> {
    let mut killed = Vec::new();
    for path in records {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let Ok(record) = serde_json::from_slice::<ChildRecord>(&bytes) else {
            tracing::warn!(path = %path.display(), "ignoring unreadable child record");
            remove_record(path);
            continue;
        };
        if keep.contains(&record.pid) && record.daemon_pid == std::process::id() {
            continue;
        }
        killed.extend(reap_group(&record));
        remove_record(path);
    }
    killed
}

fn reap_group(record: &ChildRecord) -> Vec<u32> {
    let members = members_to_kill(
        record,
        os::process(record.pid),
        &os::process_group(record.pgid),
    );
    for pid in &members {
        // A pid just tied to our recorded group.
        let _ = os::signal(*pid, libc::SIGKILL);
    }
    if !members.is_empty() {
        tracing::warn!(
            pgid = record.pgid,
            command = %record.command,
            killed = ?members,
            "reaped an upstream group left behind by a daemon that did not stop cleanly"
        );
    }
    members
}

/// The decision, the same on every OS: every live member of the recorded group that started no
/// earlier than the recorded leader. A recycled group id would belong to processes that
/// started later than ours did only if the leader pid was recycled too, which is ruled out
/// when the leader is still there with another start time. A record without a start time (an
/// OS that could not say) never leads to a kill.
fn members_to_kill(
    record: &ChildRecord,
    leader: Option<os::Process>,
    group: &[os::Process],
) -> Vec<u32> {
    let Some(start) = record.start_ticks else {
        return Vec::new();
    };
    if leader.is_some_and(|l| l.start != start) {
        // The leader pid now belongs to someone else: not ours to touch.
        return Vec::new();
    }
    group
        .iter()
        .filter(|p| p.pgid == record.pgid && p.start >= start)
        .map(|p| p.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::Process;

    fn record(pid: u32, start: Option<u64>) -> ChildRecord {
        ChildRecord {
            pid,
            pgid: pid,
            start_ticks: start,
            command: "sleep 30".into(),
            daemon_pid: 1,
        }
    }

    fn proc(pid: u32, pgid: u32, start: u64) -> Process {
        Process {
            pid,
            ppid: 1,
            pgid,
            start,
            zombie: false,
        }
    }

    #[test]
    fn decision_kills_only_what_the_record_ties_to_us() {
        let rec = record(100, Some(50));
        let group = [proc(100, 100, 50), proc(101, 100, 60), proc(102, 100, 40)];
        // The leader as recorded: it and what it started later; not an older member.
        assert_eq!(
            members_to_kill(&rec, Some(group[0]), &group),
            vec![100, 101]
        );
        // The leader gone, its children left: they are still ours.
        assert_eq!(members_to_kill(&rec, None, &group[1..]), vec![101]);
        // The leader pid recycled (another start time): nothing.
        assert!(members_to_kill(&rec, Some(proc(100, 7, 99)), &group).is_empty());
        // No start time recorded: nothing, whatever the table says.
        assert!(members_to_kill(&record(100, None), Some(group[0]), &group).is_empty());
        // Members of another group are never picked, even if listed.
        assert!(members_to_kill(&rec, None, &[proc(200, 200, 70)]).is_empty());
    }

    fn server(config: serde_json::Value) -> ServerConfig {
        crate::config::Config::from_value(config, None)
            .unwrap()
            .servers
            .shift_remove("t")
            .unwrap()
    }

    /// A bare command found only in the recorded `path` starts, whatever the daemon's own PATH,
    /// and runs with that PATH (so `npx` finds `node` the same way).
    #[tokio::test]
    async fn a_command_is_found_in_the_recorded_path() {
        use tokio::io::AsyncReadExt;
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("coogle-test-tool");
        crate::fake_executable::write_executable(&tool, "#!/bin/sh\nprintf '%s' \"$PATH\"\n");
        let s = server(serde_json::json!({
            "path": [bin],
            "servers": {"t": {"command": "coogle-test-tool", "credentials": {"source": "none"}}}
        }));
        let mut spawned = spawn(&s, &BTreeMap::new()).unwrap();
        let mut out = String::new();
        spawned.stdout.read_to_string(&mut out).await.unwrap();
        let _ = spawned.child.wait().await;
        assert!(out.starts_with(&format!("{}:", bin.display())), "{out}");

        // Not in the recorded path, nor anywhere else: a message that names the PATH searched.
        let s = server(serde_json::json!({
            "servers": {"t": {"command": "coogle-test-tool", "credentials": {"source": "none"}}}
        }));
        let err = spawn(&s, &BTreeMap::new()).err().unwrap().to_string();
        assert!(
            err.contains("`coogle-test-tool` is not in any directory"),
            "{err}"
        );
        assert!(err.contains("coogle doctor"), "{err}");

        // The server's own env.PATH is taken as written.
        let s = server(serde_json::json!({
            "path": ["/nowhere"],
            "servers": {"t": {"command": "coogle-test-tool", "credentials": {"source": "none"},
                              "env": {"PATH": bin}}}
        }));
        let mut spawned = spawn(&s, &BTreeMap::new()).unwrap();
        let mut out = String::new();
        spawned.stdout.read_to_string(&mut out).await.unwrap();
        let _ = spawned.child.wait().await;
        assert_eq!(out, bin.display().to_string());
    }

    // A real group, reaped through the OS's own process table (Linux /proc, macOS libproc).
    #[test]
    fn reaps_a_recorded_group_and_only_it() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let (pgid, start) = proc_stat(pid).unwrap();
        assert_eq!(pgid, pid);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rec.child");
        // A record whose start time does not match must not be acted on.
        write_record(&path, &record(pid, Some(start + 1))).unwrap();
        assert!(reap_recorded(std::slice::from_ref(&path), &[]).is_empty());
        assert!(child.try_wait().unwrap().is_none());
        write_record(&path, &record(pid, Some(start))).unwrap();
        assert_eq!(reap_recorded(std::slice::from_ref(&path), &[]), vec![pid]);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!path.exists());
    }
}
