//! Descendants that escape a child's process group: a helper that called `setsid()`, a
//! browser or a daemon a server detached. Killing the group misses them, so they would outlive
//! the child and the daemon, contradicting "no orphans".
//!
//! On Linux the daemon is a child subreaper (`PR_SET_CHILD_SUBREAPER`): such a process, once its
//! parent is gone, becomes the daemon's child instead of init's. Everywhere, while a child is
//! alive, the daemon looks at the process table every few seconds and remembers which processes
//! (by pid and start time) live below each upstream's child. When a child exits, what was below
//! it is stopped, along with what its exit reparented to the daemon; at shutdown, all of it.
//! What a scan finds reparented to the daemon while children live, and can tie to none of them
//! (a live server's own double-forked helper looks just like a gone one's leftover), is
//! stopped only once no child is alive: never at another child's exit. With no child alive the table is left alone (a quiet daemon
//! costs nothing), but for a few scans after the last one goes and a scan whenever a process of
//! the daemon's own ends: those stop what is reparented to it late and reap its zombies. This
//! module never signals a process it cannot tie to a child by pid and start time, or to the
//! daemon as an orphan no live child may account for, and never reaps a child tokio manages.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::os::{self, Process};

/// How long stopped processes get between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(500);

/// Scans made once no child is alive, for what the last one left to be reparented late.
const SETTLING_SCANS: u8 = 2;

#[derive(Default)]
struct Inner {
    /// Live upstream children: leader pid → upstream (for the log).
    leaders: HashMap<u32, String>,
    /// Processes seen below an upstream's child: (pid, start) → that child's pid. By child,
    /// not by server: several instances of one server (projects, sessions) each have their own,
    /// and one's exit must not take another's processes with it.
    below: HashMap<(u32, u64), u32>,
    /// Processes reparented to the daemon while children lived, that no scan could tie to one
    /// of them: a server's own detached helper (double-forked and `setsid()`, so reparented at
    /// once, never seen below its server) looks exactly like what a gone child left behind.
    /// Such a process is stopped only once no child is alive (or at shutdown), never at
    /// another child's exit: parking makes exits frequent, and one server's exit must not take
    /// a live server's helper with it.
    unowned: HashSet<(u32, u64)>,
    /// Scans still to make with no child alive (see [`Reaper::watching`]).
    settling: u8,
}

impl Inner {
    /// A leader gone: with it the last, a few more scans, then none.
    fn leader_gone(&mut self, pid: u32) {
        if self.leaders.remove(&pid).is_some() && self.leaders.is_empty() {
            self.settling = SETTLING_SCANS;
        }
    }

    fn watching(&self) -> bool {
        !self.leaders.is_empty() || self.settling > 0
    }
}

/// Held while a child is spawned: the process table is not read meanwhile, so a child that
/// exists but is not registered yet is never taken for an orphan (see [`Reaper::child_exited`]).
pub(crate) struct Spawning<'a>(std::sync::MutexGuard<'a, Inner>, &'a Reaper);

impl Spawning<'_> {
    /// The child just spawned, as `upstream`'s.
    pub fn started(mut self, upstream: &str, pid: u32) {
        self.0.leaders.insert(pid, upstream.to_string());
        if !self.1.watching.swap(true, Ordering::AcqRel) {
            // The accept loop may be waiting with no scan due: it looks again.
            self.1.woken.notify_one();
        }
    }
}

/// The daemon's record of its children's descendants.
#[derive(Default)]
pub(crate) struct Reaper {
    inner: Mutex<Inner>,
    /// `Inner::watching`, kept as it changes: read by the accept loop, which must never wait
    /// for the lock (a spawn holds it).
    watching: AtomicBool,
    /// Told when `watching` becomes true, so the accept loop, which may be waiting on nothing
    /// else for hours, starts scanning.
    woken: tokio::sync::Notify,
    /// The process table a test shows it, in place of the whole one: a test's reaper must not
    /// stop what other tests of the same process started.
    #[cfg(test)]
    table: Option<Box<dyn Fn() -> Vec<Process> + Send + Sync>>,
}

impl Reaper {
    /// The reaper for this daemon, which becomes a child subreaper: orphaned descendants of its
    /// children become its own children, so it can stop them (Linux; a no-op elsewhere). Only
    /// a process that is a daemon of its own calls this: it changes the whole process.
    pub fn new() -> Arc<Reaper> {
        match os::become_subreaper() {
            Ok(()) => {}
            // macOS: the walk by parent pid is all there is.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
            Err(e) => tracing::warn!("could not become a child subreaper: {e}"),
        }
        Arc::new(Reaper::default())
    }

    fn processes(&self) -> Vec<Process> {
        #[cfg(test)]
        if let Some(table) = &self.table {
            return table();
        }
        os::processes()
    }

    /// A reaper that sees only what `table` shows of the process table.
    #[cfg(test)]
    pub fn seeing(table: impl Fn() -> Vec<Process> + Send + Sync + 'static) -> Reaper {
        Reaper {
            table: Some(Box::new(table)),
            ..Reaper::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `pid` is one of the live children it knows.
    #[cfg(test)]
    pub fn is_leader(&self, pid: u32) -> bool {
        self.lock().leaders.contains_key(&pid)
    }

    /// Spawn a child while holding this (see [`Spawning`]).
    pub fn spawning(&self) -> Spawning<'_> {
        Spawning(self.lock(), self)
    }

    /// Resolves once a child started while none was watched (at once, if one did since the
    /// last call): the caller looks at [`Reaper::watching`] again.
    pub async fn woken(&self) {
        self.woken.notified().await;
    }

    /// Whether the process table is worth reading every few seconds: a child is alive, or the
    /// last one went a moment ago. With every child parked, a scan every 3 s read each
    /// process's entry for nothing (1,162 reads in 7 s, 73 processes here): quiet costs nothing
    /// (issue 22). Meanwhile a process of the daemon's own that ends calls for a scan (see
    /// [`Reaper::scan`]).
    pub fn watching(&self) -> bool {
        self.watching.load(Ordering::Acquire)
    }

    /// Remember who lives below each child, and reap zombies that were reparented to us. With
    /// no child alive, what was reparented to us is an orphan no child accounts for, left by
    /// one that is gone (its parent lived on a while after the child's exit was dealt with):
    /// stopped, as at that exit. Blocking (a short grace between signals): call it off the
    /// runtime.
    pub fn scan(&self) {
        let orphans = {
            let mut inner = self.lock();
            if inner.leaders.is_empty() {
                // Read under the lock, as at a child's exit: a process taken for an orphan is
                // not one that was a leader a moment before. No child lives, so no spawn
                // waits long for it.
                let table = self.processes();
                self.scan_table(&mut inner, &table, true)
            } else {
                // While children live, the table is read without holding up their spawns;
                // what it finds is only remembered and reaped, never stopped.
                drop(inner);
                let table = self.processes();
                self.scan_table(&mut self.lock(), &table, false)
            }
        };
        if !orphans.is_empty() {
            tracing::warn!(pids = ?orphans.iter().map(|p| p.pid).collect::<Vec<_>>(), "stopping processes left behind by upstreams that have exited");
            stop(&orphans);
        }
    }

    /// [`scan`](Self::scan)'s bookkeeping: the orphans to stop, when `read_locked` (the table
    /// was read under the lock now held) and no child is alive.
    fn scan_table(&self, inner: &mut Inner, table: &[Process], read_locked: bool) -> Vec<Process> {
        let none_alive = inner.leaders.is_empty();
        if none_alive {
            inner.settling = inner.settling.saturating_sub(1);
            self.watching.store(inner.watching(), Ordering::Release);
        }
        let seen = descendants_by_leader(table, &inner.leaders);
        for (key, leader) in seen {
            inner.below.insert(key, leader);
        }
        let alive: HashSet<(u32, u64)> = table.iter().map(|p| (p.pid, p.start)).collect();
        inner.below.retain(|k, _| alive.contains(k));
        inner.unowned.retain(|k| alive.contains(k));
        let me = std::process::id();
        let mut orphans = Vec::new();
        for p in table {
            if p.ppid == me && !inner.leaders.contains_key(&p.pid) {
                if p.zombie {
                    reap(p.pid);
                } else if none_alive {
                    if read_locked {
                        orphans.push(*p);
                    }
                } else if inner.leaders.contains_key(&p.pgid) {
                    // Still in a live child's process group (each child leads its own): that
                    // child's, though it was reparented before any scan saw it below it.
                    inner.below.insert((p.pid, p.start), p.pgid);
                } else if !inner.below.contains_key(&(p.pid, p.start)) {
                    inner.unowned.insert((p.pid, p.start));
                }
            }
        }
        orphans
    }

    /// A process the daemon spawned (under [`Reaper::spawning`]) and waits for itself, the
    /// hand-over's candidate, once that wait is over: it is no longer one of its own.
    pub fn release(&self, pid: u32) {
        // While a leader is, `watching` is already true; the next scan brings it down.
        self.lock().leader_gone(pid);
    }

    /// An upstream's child exited: stop what lived below it, and what its exit left to the
    /// daemon. Blocking (a short grace between signals): call it off the runtime.
    pub fn child_exited(&self, upstream: &str, pid: u32) {
        let victims = {
            let mut inner = self.lock();
            let table = self.processes();
            exit_victims(&mut inner, &table, pid)
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
        let table = self.processes();
        let victims: Vec<Process> = {
            let inner = self.lock();
            let me = std::process::id();
            table
                .into_iter()
                .filter(|p| {
                    let owner = inner.below.get(&(p.pid, p.start));
                    // What no scan could tie to a child may be a carried child's own helper.
                    let kept = keep.contains(&p.pid)
                        || owner.is_some_and(|o| keep.contains(o))
                        || (!keep.is_empty() && inner.unowned.contains(&(p.pid, p.start)));
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

/// What goes with the child `pid` that exited, from `table` read under the lock: what was seen
/// below it, what is still in its process group, and what was reparented to the daemon since
/// the last scan (its exit made orphans of its own children). What a scan found reparented
/// and could tie to no child waits for a moment with no child alive (see [`Inner::unowned`]).
fn exit_victims(inner: &mut Inner, table: &[Process], pid: u32) -> Vec<Process> {
    inner.leader_gone(pid);
    let none_alive = inner.leaders.is_empty();
    let me = std::process::id();
    let victims = table
        .iter()
        .filter(|p| {
            let key = (p.pid, p.start);
            let owner = inner.below.get(&key);
            let orphan = p.ppid == me && !inner.leaders.contains_key(&p.pid);
            owner == Some(&pid)
                || (orphan
                    && owner.is_none()
                    && (none_alive || p.pgid == pid || !inner.unowned.contains(&key)))
        })
        .copied()
        .collect();
    inner.below.retain(|_, o| *o != pid);
    victims
}

/// Every process below each leader, by (pid, start): the leader's pid.
fn descendants_by_leader(
    table: &[Process],
    leaders: &HashMap<u32, String>,
) -> HashMap<(u32, u64), u32> {
    let mut children: HashMap<u32, Vec<&Process>> = HashMap::new();
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
fn stop(victims: &[Process]) {
    for p in victims {
        signal(p.pid, libc::SIGTERM);
    }
    std::thread::sleep(GRACE);
    let now: HashMap<u32, Process> = os::processes().into_iter().map(|p| (p.pid, p)).collect();
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

/// A pid that is gone by now is fine: there is nothing left to stop.
fn signal(pid: u32, sig: i32) {
    let _ = os::signal(pid, sig);
}

/// Collect a reparented child's exit, so it does not linger as a zombie of the daemon.
fn reap(pid: u32) {
    let _ = os::try_collect(pid);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32) -> Process {
        Process {
            pid,
            ppid,
            pgid: pid,
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

    /// The table is read while a child lives and for a few scans after the last one went,
    /// then not until the next child starts.
    #[test]
    fn the_table_is_read_only_while_a_child_lives() {
        let reaper = Reaper::default();
        assert!(!reaper.watching(), "no child yet");
        reaper.spawning().started("a", 1_000_001);
        reaper.spawning().started("b", 1_000_002);
        assert!(reaper.watching());
        // An empty table: a test must not reap another test's children.
        reaper.release(1_000_001);
        assert!(reaper.scan_table(&mut reaper.lock(), &[], true).is_empty());
        assert!(reaper.watching(), "one child still lives");
        reaper.release(1_000_002);
        reaper.release(1_000_002);
        for _ in 0..SETTLING_SCANS {
            assert!(reaper.watching(), "settling after the last one");
            assert!(reaper.scan_table(&mut reaper.lock(), &[], true).is_empty());
        }
        assert!(!reaper.watching(), "quiet");
        reaper.spawning().started("a", 1_000_003);
        assert!(reaper.watching(), "a child again");
    }

    /// The accept loop, waiting with no scan due, is woken when a child starts, so the new
    /// child is scanned; not again for each child started while scans run anyway.
    #[tokio::test]
    async fn a_child_started_while_none_is_watched_wakes_the_loop() {
        async fn woken(reaper: &Reaper) -> bool {
            tokio::time::timeout(Duration::from_millis(50), reaper.woken())
                .await
                .is_ok()
        }
        let reaper = Reaper::default();
        assert!(!woken(&reaper).await, "nothing started");
        reaper.spawning().started("a", 6_000_001);
        assert!(woken(&reaper).await, "the first child");
        reaper.spawning().started("b", 6_000_002);
        assert!(!woken(&reaper).await, "scans run already");
    }

    /// With no child alive, what was reparented to the daemon is stopped, but only from a
    /// table read under the lock; while a child lives it is only remembered.
    #[test]
    fn orphans_are_stopped_only_with_no_child_alive_and_a_table_read_under_the_lock() {
        let reaper = Reaper::default();
        let me = std::process::id();
        // `scan_table` only chooses (and reaps zombies, which these are not): nothing is signalled.
        let table = [p(4_000_001, me), p(4_000_002, 4_000_001)];
        let orphans = |read_locked| {
            reaper
                .scan_table(&mut reaper.lock(), &table, read_locked)
                .iter()
                .map(|p| p.pid)
                .collect::<Vec<_>>()
        };
        assert_eq!(orphans(true), vec![4_000_001]);
        assert!(orphans(false).is_empty(), "a table read without the lock");
        reaper.spawning().started("a", 4_000_003);
        assert!(orphans(true).is_empty(), "a child lives");
    }

    /// A child's exit stops what was below it and what it left to the daemon, but not a live
    /// child's detached helper that a scan found reparented and could tie to no child.
    #[test]
    fn a_childs_exit_spares_what_a_live_child_may_have_detached() {
        let reaper = Reaper::default();
        let me = std::process::id();
        let (a, b) = (5_000_001, 5_000_002);
        reaper.spawning().started("a", a);
        reaper.spawning().started("b", b);
        let in_group = |pid, pgid| Process { pgid, ..p(pid, me) };
        let seen = [
            p(a, me),
            p(b, me),
            p(5_000_011, a),        // below a
            p(5_000_021, b),        // below b
            p(5_000_012, me),       // a's, or b's, detached helper: nobody's to tell
            in_group(5_000_022, b), // b's double-forked helper, still in b's group
        ];
        assert!(
            reaper
                .scan_table(&mut reaper.lock(), &seen, false)
                .is_empty()
        );
        // a exits: its own child is reparented, and so is one it started after the scan.
        let later = [
            p(b, me),
            p(5_000_011, me),
            p(5_000_013, me),
            p(5_000_021, b),
            p(5_000_012, me),
            in_group(5_000_022, b),
        ];
        let victims = |inner: &mut Inner, table: &[Process], pid| {
            let mut v: Vec<u32> = exit_victims(inner, table, pid)
                .iter()
                .map(|p| p.pid)
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(
            victims(&mut reaper.lock(), &later, a),
            vec![5_000_011, 5_000_013]
        );
        // b exits, the last: nothing can want what is left.
        let last = [p(5_000_021, me), p(5_000_012, me), in_group(5_000_022, b)];
        assert_eq!(
            victims(&mut reaper.lock(), &last, b),
            vec![5_000_012, 5_000_021, 5_000_022]
        );
    }
}
