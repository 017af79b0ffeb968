//! Descendants that escape a child's process group: a helper that called `setsid()`, a
//! browser or a daemon a server detached. Killing the group misses them, so they would outlive
//! the child and the daemon, contradicting "no orphans".
//!
//! On Linux the daemon is a child subreaper (`PR_SET_CHILD_SUBREAPER`): such a process, once its
//! parent is gone, becomes the daemon's child instead of init's. Everywhere, the daemon looks at
//! the process table now and then and remembers which processes (by pid and start time) live
//! below each upstream's child. When a child exits, what was below it is stopped, along with
//! any process reparented to the daemon that no live child accounts for; at shutdown, all of
//! it. Zombies of reparented processes are reaped. This module never signals a process it
//! cannot tie to a child by pid and start time, and never reaps a child tokio manages.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long stopped processes get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(500);

/// One row of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// Start time (clock ticks since boot on Linux, µs since the epoch on macOS), to tell a
    /// recycled pid from the process we saw.
    pub start: u64,
    pub zombie: bool,
}

#[derive(Default)]
struct Inner {
    /// Live upstream children: leader pid → upstream (for the log).
    leaders: HashMap<u32, String>,
    /// Processes seen below an upstream's child: (pid, start) → that child's pid. By child,
    /// not by server: several instances of one server (projects, sessions) each have their own,
    /// and one's exit must not take another's processes with it.
    below: HashMap<(u32, u64), u32>,
}

/// Held while a child is spawned: the process table is not read meanwhile, so a child that
/// exists but is not registered yet is never taken for an orphan (see [`Reaper::child_exited`]).
pub(crate) struct Spawning<'a>(std::sync::MutexGuard<'a, Inner>);

impl Spawning<'_> {
    /// The child just spawned, as `upstream`'s.
    pub fn started(mut self, upstream: &str, pid: u32) {
        self.0.leaders.insert(pid, upstream.to_string());
    }
}

/// The daemon's record of its children's descendants.
#[derive(Default)]
pub(crate) struct Reaper {
    inner: Mutex<Inner>,
}

impl Reaper {
    /// The reaper for this daemon, which becomes a child subreaper: orphaned descendants of its
    /// children become its own children, so it can stop them (Linux; a no-op elsewhere). Only
    /// a process that is a daemon of its own calls this: it changes the whole process.
    pub fn new() -> Arc<Reaper> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only changes this process's attribute.
            let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            if rc != 0 {
                tracing::warn!(
                    "could not become a child subreaper: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        Arc::new(Reaper::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spawn a child while holding this (see [`Spawning`]).
    pub fn spawning(&self) -> Spawning<'_> {
        Spawning(self.lock())
    }

    /// Remember who lives below each child, and reap zombies that were reparented to us.
    pub fn scan(&self) {
        let table = processes();
        let mut inner = self.lock();
        let seen = descendants_by_leader(&table, &inner.leaders);
        for (key, leader) in seen {
            inner.below.insert(key, leader);
        }
        let alive: HashSet<(u32, u64)> = table.iter().map(|p| (p.pid, p.start)).collect();
        inner.below.retain(|k, _| alive.contains(k));
        let me = std::process::id();
        for p in &table {
            if p.ppid == me && p.zombie && !inner.leaders.contains_key(&p.pid) {
                reap(p.pid);
            }
        }
    }

    /// A process the daemon spawned (under [`Reaper::spawning`]) and waits for itself, the
    /// hand-over's candidate, once that wait is over: it is no longer one of its own.
    pub fn release(&self, pid: u32) {
        self.lock().leaders.remove(&pid);
    }

    /// An upstream's child exited: stop what lived below it, and orphans no live child
    /// accounts for. Blocking (a short grace between signals): call it off the runtime.
    pub fn child_exited(&self, upstream: &str, pid: u32) {
        let victims = {
            let mut inner = self.lock();
            inner.leaders.remove(&pid);
            let table = processes();
            let mut victims: Vec<Proc> = Vec::new();
            for p in &table {
                let owner = inner.below.get(&(p.pid, p.start));
                let orphan = p.ppid == std::process::id() && !inner.leaders.contains_key(&p.pid);
                let owned_by_live = owner.is_some_and(|o| *o != pid);
                if owner == Some(&pid) || (orphan && !owned_by_live) {
                    victims.push(*p);
                }
            }
            inner.below.retain(|_, o| *o != pid);
            victims
        };
        if !victims.is_empty() {
            tracing::warn!(upstream, pids = ?victims.iter().map(|p| p.pid).collect::<Vec<_>>(), "stopping processes the upstream left behind");
            stop(&victims);
        }
    }

    /// At shutdown, once the children are stopped: whatever is still remembered or was
    /// reparented to the daemon goes, except the children in `keep` (carried over to the next
    /// daemon in an upgrade in place) and what lives below them.
    pub fn sweep_all_but(&self, keep: &[u32]) {
        let table = processes();
        let victims: Vec<Proc> = {
            let inner = self.lock();
            let me = std::process::id();
            table
                .into_iter()
                .filter(|p| {
                    let owner = inner.below.get(&(p.pid, p.start));
                    let kept = keep.contains(&p.pid) || owner.is_some_and(|o| keep.contains(o));
                    !kept
                        && (owner.is_some()
                            || (p.ppid == me && !inner.leaders.contains_key(&p.pid)))
                })
                .collect()
        };
        if !victims.is_empty() {
            tracing::warn!(pids = ?victims.iter().map(|p| p.pid).collect::<Vec<_>>(), "stopping processes upstreams left behind");
            stop(&victims);
        }
    }
}

/// Every process below each leader, by (pid, start): the leader's pid.
fn descendants_by_leader(
    table: &[Proc],
    leaders: &HashMap<u32, String>,
) -> HashMap<(u32, u64), u32> {
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in table {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut out = HashMap::new();
    for leader in leaders.keys() {
        let mut stack = vec![*leader];
        while let Some(pid) = stack.pop() {
            for c in children.get(&pid).into_iter().flatten() {
                if out.insert((c.pid, c.start), *leader).is_none() {
                    stack.push(c.pid);
                }
            }
        }
    }
    out
}

/// SIGTERM, a short grace, then SIGKILL for any that are still the same processes; reap those
/// that were ours.
fn stop(victims: &[Proc]) {
    for p in victims {
        signal(p.pid, libc::SIGTERM);
    }
    std::thread::sleep(GRACE);
    let now: HashMap<u32, Proc> = processes().into_iter().map(|p| (p.pid, p)).collect();
    for p in victims {
        if now
            .get(&p.pid)
            .is_some_and(|q| q.start == p.start && !q.zombie)
        {
            signal(p.pid, libc::SIGKILL);
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    for p in victims {
        if p.ppid == std::process::id() {
            reap(p.pid);
        }
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill only sends a signal; a pid that is gone gives ESRCH, which is fine.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Collect a reparented child's exit, so it does not linger as a zombie of the daemon.
fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: waitpid on one pid that is our child (the caller checked), without blocking.
    unsafe {
        libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG);
    }
}

/// The process table.
#[cfg(target_os = "linux")]
pub(crate) fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(pid, &stat)
        })
        .collect()
}

/// One `/proc/<pid>/stat` line: the command is in parentheses and may hold anything, so the
/// fields are read after the last `)`.
#[cfg(target_os = "linux")]
fn parse_stat(pid: u32, stat: &str) -> Option<Proc> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); ppid is field 4, starttime field 22.
    Some(Proc {
        pid,
        zombie: *f.first()? == "Z",
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// The process table, from the kernel's process list.
#[cfg(target_os = "macos")]
pub(crate) fn processes() -> Vec<Proc> {
    // SAFETY: a null buffer asks for the number of pids; the second call fills at most the
    // buffer it is given; proc_pidinfo writes at most size_of::<proc_bsdinfo>() bytes.
    unsafe {
        let n = libc::proc_listallpids(std::ptr::null_mut(), 0);
        if n <= 0 {
            return Vec::new();
        }
        let mut pids = vec![0 as libc::c_int; n as usize + 64];
        let bytes = (pids.len() * std::mem::size_of::<libc::c_int>()) as libc::c_int;
        let n = libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes);
        if n <= 0 {
            return Vec::new();
        }
        pids.truncate(n as usize);
        pids.into_iter()
            .filter(|p| *p > 0)
            .filter_map(|pid| {
                let mut info: libc::proc_bsdinfo = std::mem::zeroed();
                let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
                let got = libc::proc_pidinfo(
                    pid,
                    libc::PROC_PIDTBSDINFO,
                    0,
                    (&mut info as *mut libc::proc_bsdinfo).cast(),
                    size,
                );
                (got == size).then(|| Proc {
                    pid: pid as u32,
                    ppid: info.pbi_ppid,
                    start: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
                    zombie: info.pbi_status == libc::SZOMB,
                })
            })
            .collect()
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn processes() -> Vec<Proc> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32) -> Proc {
        Proc {
            pid,
            ppid,
            start: u64::from(pid) * 10,
            zombie: false,
        }
    }

    #[test]
    fn descendants_are_found_below_each_leader_only() {
        let table = [
            p(10, 1),
            p(11, 10),
            p(12, 11),
            p(20, 1),
            p(21, 20),
            p(30, 1),
        ];
        let leaders = HashMap::from([(10, "a".to_string()), (20, "b".to_string())]);
        let below = descendants_by_leader(&table, &leaders);
        assert_eq!(below.get(&(12, 120)), Some(&10));
        assert_eq!(below.get(&(21, 210)), Some(&20));
        assert!(!below.contains_key(&(30, 300)), "not below a leader");
        assert!(
            !below.contains_key(&(10, 100)),
            "the leader itself is the group's"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_table_has_us_and_our_parent() {
        let me = std::process::id();
        let table = processes();
        let row = table.iter().find(|p| p.pid == me).expect("this process");
        // SAFETY: getppid has no preconditions.
        assert_eq!(row.ppid, unsafe { libc::getppid() } as u32);
        assert!(row.start > 0 && !row.zombie);
        let odd = "123 (a) b) c) S 7 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0";
        let parsed = parse_stat(123, odd).unwrap();
        assert_eq!((parsed.ppid, parsed.start), (7, 4242));
    }
}
