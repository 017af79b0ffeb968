//! Upstream child processes: spawn, record, stop, and reap the leftovers of a daemon that died.
//!
//! A child runs in its own process group so that everything it starts (uvx starts python) is
//! stopped with it; on Linux it also gets `PR_SET_PDEATHSIG` so a SIGKILLed daemon takes its
//! direct child along. Its pid, group and start time are recorded beside the socket so the next
//! daemon can reap a group that outlived a daemon killed without warning. This module must never
//! signal a process group it cannot tie to a record it wrote.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::config::ServerConfig;

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("could not start `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

pub struct Spawned {
    pub child: Child,
    pub pid: u32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Start the upstream's command with its environment, in a new process group.
pub fn spawn(server: &ServerConfig) -> Result<Spawned, SpawnError> {
    let env = server.child_env()?;
    let mut cmd = Command::new(&server.command);
    // The daemon's environment minus other upstreams' secrets, then this upstream's own.
    for name in server.withheld_env() {
        cmd.env_remove(name);
    }
    cmd.args(&server.args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false)
        .process_group(0);
    if let Some(cwd) = &server.cwd {
        cmd.current_dir(cwd);
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl is async-signal-safe and touches only the calling (child) process.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|source| SpawnError::Spawn {
        command: display_command(server),
        source,
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

pub fn display_command(server: &ServerConfig) -> String {
    std::iter::once(server.command.as_str())
        .chain(server.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Send `signal` to the process group led by `pgid`. Errors (the group is gone) are ignored.
pub fn signal_group(pgid: u32, signal: i32) {
    if pgid == 0 {
        return;
    }
    // SAFETY: killpg only sends a signal; a stale group gives ESRCH, which we ignore.
    unsafe {
        libc::killpg(pgid as libc::pid_t, signal);
    }
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
    /// Start time in clock ticks since boot (Linux `/proc/<pid>/stat` field 22), to tell a
    /// recycled pid from ours.
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

/// `/proc/<pid>/stat`: (process group, start time in ticks).
#[cfg(target_os = "linux")]
pub fn proc_stat(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); pgrp is field 5, starttime field 22.
    let pgrp = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((pgrp, start))
}

#[cfg(not(target_os = "linux"))]
pub fn proc_stat(_pid: u32) -> Option<(u32, u64)> {
    None
}

/// Kill what is left of the groups recorded in `dir` by earlier daemons of this socket.
/// Returns the pids that were signalled.
pub fn reap_recorded(records: &[PathBuf]) -> Vec<u32> {
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
        killed.extend(reap_group(&record));
        remove_record(path);
    }
    killed
}

#[cfg(target_os = "linux")]
fn reap_group(record: &ChildRecord) -> Vec<u32> {
    // Every live member of the recorded group that started no earlier than the recorded leader:
    // a recycled group id would belong to processes that started later than ours did only if the
    // leader pid was recycled too, which we rule out when the leader is still there.
    let Some(start) = record.start_ticks else {
        return Vec::new();
    };
    if let Some((_, leader_start)) = proc_stat(record.pid)
        && leader_start != start
    {
        // The leader pid now belongs to someone else: not ours to touch.
        return Vec::new();
    }
    let mut members = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some((pgrp, st)) = proc_stat(pid)
                && pgrp == record.pgid
                && st >= start
            {
                members.push(pid);
            }
        }
    }
    for pid in &members {
        // SAFETY: sending SIGKILL to a pid we just tied to our recorded group.
        unsafe {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
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

#[cfg(not(target_os = "linux"))]
fn reap_group(record: &ChildRecord) -> Vec<u32> {
    // Without /proc we cannot check start times; the leader must still be alive for us to act.
    // SAFETY: signal 0 only checks for existence.
    let alive = unsafe { libc::kill(record.pid as libc::pid_t, 0) } == 0;
    if alive {
        signal_group(record.pgid, libc::SIGKILL);
        vec![record.pid]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_stat_reads_our_own_group() {
        let (pgrp, start) = proc_stat(std::process::id()).unwrap();
        // SAFETY: getpgrp has no preconditions.
        assert_eq!(pgrp, unsafe { libc::getpgrp() } as u32);
        assert!(start > 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reaps_a_recorded_group_and_only_it() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let (_, start) = proc_stat(pid).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("rec.child");
        // A record whose start time does not match must not be acted on.
        write_record(
            &path,
            &ChildRecord {
                pid,
                pgid: pid,
                start_ticks: Some(start + 1),
                command: "sleep 30".into(),
                daemon_pid: 1,
            },
        )
        .unwrap();
        assert!(reap_recorded(std::slice::from_ref(&path)).is_empty());
        assert!(child.try_wait().unwrap().is_none());
        write_record(
            &path,
            &ChildRecord {
                pid,
                pgid: pid,
                start_ticks: Some(start),
                command: "sleep 30".into(),
                daemon_pid: 1,
            },
        )
        .unwrap();
        assert_eq!(reap_recorded(std::slice::from_ref(&path)), vec![pid]);
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!path.exists());
    }
}
