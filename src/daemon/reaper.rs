//! Descendants that escape a child's process group: a helper that called `setsid()`, a
//! browser or a daemon a server detached. Killing the group misses them, so they would outlive
//! the child and the daemon, contradicting "no orphans".
//!
//! On Linux the daemon is a child subreaper (`PR_SET_CHILD_SUBREAPER`): such a process, once its
//! parent is gone, becomes the daemon's child instead of init's. Everywhere, while a child is
//! alive, the daemon looks at the process table every few seconds and remembers which processes
//! (by pid and start time) live below each upstream's child. When a child exits, what was below
//! it is stopped, along with what its exit reparented to the daemon; at shutdown, all of it.
//!
//! What is reparented to the daemon without a scan having seen it below a child may also be a
//! live server's own helper, double-forked and reparented at once: it is stopped only once no
//! live child may account for it (see `Inner::may_own`), never for another child's exit. With
//! no child alive the table is left alone (a quiet daemon costs nothing), but for a few scans
//! after the last one goes and a scan whenever a process of the daemon's own ends: those stop
//! what is reparented to it late and reap its zombies. This module never signals a process it
//! cannot tie to a child by pid and start time, or to the daemon as an orphan no live child
//! may account for, and never reaps a child tokio manages.

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
    /// Live upstream children, by pid.
    leaders: HashMap<u32, Leader>,
    /// Processes seen below an upstream's child: (pid, start) → that child's pid. By child,
    /// not by server: several instances of one server (projects, sessions) each have their own,
    /// and one's exit must not take another's processes with it.
    below: HashMap<(u32, u64), u32>,
    /// What was stopped and was not gone after SIGKILL (not ours to signal, stuck in the
    /// kernel, or still ending): not stopped again, so that no scan or exit stops it, and says
    /// so, again and again.
    given_up: HashSet<(u32, u64)>,
    /// Scans still to make with no child alive (see [`Reaper::watching`]).
    settling: u8,
}

/// A live upstream child.
struct Leader {
    /// When it started (see [`Process::start`]), where that could be read.
    start: Option<u64>,
}

impl Inner {
    /// Whether one of the live children that `among` names may account for `p`, a process
    /// reparented to the daemon that no scan saw below any of them: it is still in that child's
    /// process group (each child leads its own), or that child started before `p` did, so one
    /// of its processes may have started `p` and left it to the daemon (a helper it detached by
    /// a double fork, or whose parent went). A process that started before every live child
    /// did is none of theirs: it was left by one that is gone. Neither the process table nor
    /// the OS tells more, so what a gone child started after a live one did waits for that
    /// one to go (or for shutdown): never is a live server's helper stopped for another's exit.
    fn may_own(&self, p: &Process, among: impl Fn(u32) -> bool) -> bool {
        (self.leaders.contains_key(&p.pgid) && among(p.pgid))
            || self
                .leaders
                .iter()
                .any(|(pid, l)| among(*pid) && l.start.is_none_or(|s| s <= p.start))
    }

    /// Reparented to the daemon (`me`), and not one of its children itself.
    fn orphan(&self, p: &Process, me: u32) -> bool {
        p.ppid == me && !self.leaders.contains_key(&p.pid)
    }

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
        let start = self.1.process(pid).map(|p| p.start);
        if start.is_none() {
            tracing::debug!(upstream, pid, "the child's start time could not be read");
        }
        self.0.leaders.insert(pid, Leader { start });
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

    fn process(&self, pid: u32) -> Option<Process> {
        #[cfg(test)]
        if self.table.is_some() {
            return self.processes().into_iter().find(|p| p.pid == pid);
        }
        os::process(pid)
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

    /// Remember who lives below each child, reap zombies that were reparented to us, and stop
    /// what was reparented to us that no live child may account for (see [`Inner::may_own`]):
    /// left by one that is gone (its parent lived on a while after the child's exit was dealt
    /// with), as at that exit. Blocking (a short grace between signals): call it off the
    /// runtime.
    pub fn scan(&self) {
        let orphans = self.scan_victims();
        if !orphans.is_empty() {
            tracing::warn!(pids = ?orphans.iter().map(|p| p.pid).collect::<Vec<_>>(), "stopping processes left behind by upstreams that have exited");
            self.stop(&orphans);
        }
    }

    /// [`scan`](Self::scan) but the stop: what it would stop.
    fn scan_victims(&self) -> Vec<Process> {
        let mut inner = self.lock();
        let found = if inner.leaders.is_empty() {
            // No child lives, so no spawn waits long for the lock.
            let table = self.processes();
            self.scan_table(&mut inner, &table)
        } else {
            // While children live, the table is read without holding up their spawns.
            drop(inner);
            let table = self.processes();
            inner = self.lock();
            let found = self.scan_table(&mut inner, &table);
            if found.is_empty() {
                found
            } else {
                // A table read before the lock was taken may show a child that exited and was
                // let go meanwhile as an orphan, to be signalled by a pid that may be reused
                // by now: what is stopped comes from a table read under the lock, as at a
                // child's exit.
                let table = self.processes();
                self.scan_table(&mut inner, &table)
            }
        };
        // Once per scan, however many reads it took.
        if inner.leaders.is_empty() {
            inner.settling = inner.settling.saturating_sub(1);
            self.watching.store(inner.watching(), Ordering::Release);
        }
        found
    }

    /// [`scan`](Self::scan)'s bookkeeping, on `table`: the orphans no live child may account
    /// for.
    fn scan_table(&self, inner: &mut Inner, table: &[Process]) -> Vec<Process> {
        let seen = descendants_by_leader(table, &inner.leaders);
        for (key, leader) in seen {
            inner.below.insert(key, leader);
        }
        let alive: HashSet<(u32, u64)> = table.iter().map(|p| (p.pid, p.start)).collect();
        inner.below.retain(|k, _| alive.contains(k));
        inner.given_up.retain(|k| alive.contains(k));
        let me = std::process::id();
        let mut orphans = Vec::new();
        for p in table {
            if !inner.orphan(p, me) {
                continue;
            }
            if p.zombie {
                reap(p.pid);
            } else if !inner.below.contains_key(&(p.pid, p.start))
                && !inner.given_up.contains(&(p.pid, p.start))
                && !inner.may_own(p, |_| true)
            {
                orphans.push(*p);
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
            self.stop(&victims);
        }
    }

    /// At shutdown, once the children are stopped: whatever is still remembered or was
    /// reparented to the daemon goes, except the children in `keep` (carried over to the next
    /// daemon in an upgrade in place), what lives below them, and what they may have detached.
    pub fn sweep_all_but(&self, keep: &[u32]) {
        let table = self.processes();
        let victims = self.sweep_victims(&self.lock(), &table, keep);
        if !victims.is_empty() {
            tracing::warn!(pids = ?victims.iter().map(|p| p.pid).collect::<Vec<_>>(), "stopping processes upstreams left behind");
            self.stop(&victims);
        }
    }

    /// SIGTERM, a short grace, then SIGKILL for any that are still the same processes; reap
    /// those that were ours. What outlives even that is given up on, and said once.
    fn stop(&self, victims: &[Process]) {
        for p in victims {
            signal(p.pid, libc::SIGTERM);
        }
        std::thread::sleep(GRACE);
        let still = |table: Vec<Process>| {
            let now: HashMap<u32, Process> = table.into_iter().map(|p| (p.pid, p)).collect();
            victims
                .iter()
                .filter(|p| {
                    now.get(&p.pid)
                        .is_some_and(|q| q.start == p.start && !q.zombie)
                })
                .copied()
                .collect::<Vec<_>>()
        };
        for p in still(self.processes()) {
            signal(p.pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
        for p in victims {
            if p.ppid == std::process::id() {
                reap(p.pid);
            }
        }
        let left = still(self.processes());
        if !left.is_empty() {
            tracing::warn!(pids = ?left.iter().map(|p| p.pid).collect::<Vec<_>>(), "not gone 50 ms after SIGKILL (not ours to signal, stuck in the kernel, or still ending); not stopping them again");
            self.lock()
                .given_up
                .extend(left.iter().map(|p| (p.pid, p.start)));
        }
    }

    /// [`sweep_all_but`](Self::sweep_all_but) but the stop: what it would stop.
    fn sweep_victims(&self, inner: &Inner, table: &[Process], keep: &[u32]) -> Vec<Process> {
        let me = std::process::id();
        table
            .iter()
            .filter(|p| {
                let owner = inner.below.get(&(p.pid, p.start));
                let orphan = inner.orphan(p, me);
                let kept = keep.contains(&p.pid)
                    || owner.is_some_and(|o| keep.contains(o))
                    // What no scan tied to a child may be a carried child's own helper.
                    || (orphan && owner.is_none() && inner.may_own(p, |l| keep.contains(&l)));
                !kept && (owner.is_some() || orphan)
            })
            .copied()
            .collect()
    }
}

/// What goes with the child `pid` that exited, from `table` read under the lock: what was seen
/// below it, what is still in its process group, and what was reparented to the daemon (its
/// exit made orphans of its own children) that no live child may account for (see
/// [`Inner::may_own`]).
fn exit_victims(inner: &mut Inner, table: &[Process], pid: u32) -> Vec<Process> {
    inner.leader_gone(pid);
    let me = std::process::id();
    let victims = table
        .iter()
        .filter(|p| {
            let owner = inner.below.get(&(p.pid, p.start));
            owner == Some(&pid)
                || (inner.orphan(p, me)
                    && owner.is_none()
                    && !inner.given_up.contains(&(p.pid, p.start))
                    && (p.pgid == pid || !inner.may_own(p, |_| true)))
        })
        .copied()
        .collect();
    inner.below.retain(|_, o| *o != pid);
    victims
}

/// Every process below each leader, by (pid, start): the leader's pid.
fn descendants_by_leader(
    table: &[Process],
    leaders: &HashMap<u32, Leader>,
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
    use std::sync::atomic::AtomicUsize;

    /// Pids no real process has (above Linux's largest, 2^22): what a test's reaper stops is
    /// signalled for real, and must hit nothing.
    const FAKE: u32 = 5_000_000;

    fn p(pid: u32, ppid: u32) -> Process {
        Process {
            pid,
            ppid,
            pgid: pid,
            start: u64::from(pid) * 10,
            zombie: false,
        }
    }

    /// `p`, started at `start`, in group `pgid`.
    fn at(pid: u32, ppid: u32, pgid: u32, start: u64) -> Process {
        Process {
            pgid,
            start,
            ..p(pid, ppid)
        }
    }

    fn pids(v: &[Process]) -> Vec<u32> {
        let mut v: Vec<u32> = v.iter().map(|p| p.pid).collect();
        v.sort_unstable();
        v
    }

    /// A reaper shown the table `tables` holds now (a test changes it as processes come and go).
    fn reaper_of(tables: &Arc<Mutex<Vec<Process>>>) -> Reaper {
        let t = tables.clone();
        Reaper::seeing(move || t.lock().unwrap().clone())
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
        let leaders = HashMap::from([(10, Leader { start: None }), (20, Leader { start: None })]);
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
        // An empty table: a test must not reap another test's children.
        let reaper = Reaper::seeing(Vec::new);
        assert!(!reaper.watching(), "no child yet");
        reaper.spawning().started("a", 1_000_001);
        reaper.spawning().started("b", 1_000_002);
        assert!(reaper.watching());
        reaper.release(1_000_001);
        assert!(reaper.scan_victims().is_empty());
        assert!(reaper.watching(), "one child still lives");
        reaper.release(1_000_002);
        reaper.release(1_000_002);
        for _ in 0..SETTLING_SCANS {
            assert!(reaper.watching(), "settling after the last one");
            assert!(reaper.scan_victims().is_empty());
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
        let reaper = Reaper::seeing(Vec::new);
        assert!(!woken(&reaper).await, "nothing started");
        reaper.spawning().started("a", 6_000_001);
        assert!(woken(&reaper).await, "the first child");
        reaper.spawning().started("b", 6_000_002);
        assert!(!woken(&reaper).await, "scans run already");
    }

    /// A scan stops what was reparented to the daemon that no live child may account for,
    /// and only from a table read under the lock: a child that exited and was let go between a
    /// read without it and the lock is not taken for an orphan.
    #[test]
    fn a_scan_stops_only_what_no_live_child_may_account_for_read_under_the_lock() {
        let me = std::process::id();
        let (a, b, old, gone) = (FAKE + 1, FAKE + 2, FAKE + 3, FAKE + 4);
        let table = Arc::new(Mutex::new(vec![
            at(a, me, a, 100),
            at(old, me, old, 50),
            at(FAKE + 5, me, FAKE + 5, 150),
        ]));
        let reaper = reaper_of(&table);
        reaper.spawning().started("a", a);
        // Started before every live child: none of theirs. After a: maybe a's helper.
        assert_eq!(pids(&reaper.scan_victims()), vec![old]);
        // b exits and is let go; a read before the lock shows it, one under the lock does not.
        let reads = Arc::new(AtomicUsize::new(0));
        let (t, r) = (table.clone(), reads.clone());
        let reaper = Reaper::seeing(move || {
            let mut now = t.lock().unwrap().clone();
            if r.fetch_add(1, Ordering::SeqCst) == 2 {
                now.push(at(gone, me, gone, 20));
            }
            now
        });
        reaper.spawning().started("a", a);
        reaper.spawning().started("b", b);
        reaper.release(b);
        table.lock().unwrap().retain(|p| p.pid != old);
        assert!(
            reaper.scan_victims().is_empty(),
            "only the unlocked read showed it"
        );
        assert_eq!(
            reads.load(Ordering::SeqCst),
            4,
            "one read at b's start, 3 by the scan"
        );
    }

    /// What outlives SIGKILL (here: a pid no process has, which the table shown goes on
    /// listing) is given up on after one stop, not stopped again by every scan.
    #[test]
    fn what_outlives_a_stop_is_not_stopped_again() {
        let me = std::process::id();
        let (a, stuck) = (FAKE + 50, FAKE + 51);
        let table = Arc::new(Mutex::new(vec![
            at(a, me, a, 100),
            at(stuck, me, stuck, 50),
        ]));
        let reaper = reaper_of(&table);
        reaper.spawning().started("a", a);
        assert_eq!(pids(&reaper.scan_victims()), vec![stuck]);
        reaper.scan();
        assert!(reaper.scan_victims().is_empty(), "given up on");
        // Nor does a child's exit stop it again (b started after it: the rule alone would).
        let b = FAKE + 52;
        table.lock().unwrap().push(at(b, me, b, 200));
        reaper.spawning().started("b", b);
        table.lock().unwrap().retain(|p| p.pid != b);
        let exit = exit_victims(&mut reaper.lock(), &table.lock().unwrap(), b);
        assert!(exit.is_empty(), "{exit:?}");
        // Gone, then its pid taken by another process that no child may own: that one goes.
        *table.lock().unwrap() = vec![at(a, me, a, 100)];
        assert!(reaper.scan_victims().is_empty());
        table.lock().unwrap().push(at(stuck, me, stuck, 60));
        assert_eq!(pids(&reaper.scan_victims()), vec![stuck]);
    }

    /// A child's exit stops what was below it and what it left to the daemon, but not what a
    /// live child may have detached: in its group, or started after it.
    #[test]
    fn a_childs_exit_spares_what_a_live_child_may_have_detached() {
        let me = std::process::id();
        let (a, b) = (FAKE + 10, FAKE + 20);
        let a_child = at(FAKE + 11, a, FAKE + 11, 120);
        let a_old = at(FAKE + 12, me, FAKE + 12, 150);
        let a_recent = at(FAKE + 13, me, FAKE + 13, 250);
        let b_helper = at(FAKE + 21, me, FAKE + 21, 300);
        let b_group = at(FAKE + 22, me, b, 310);
        let table = Arc::new(Mutex::new(vec![
            at(a, me, a, 100),
            at(b, me, b, 200),
            a_child,
        ]));
        let reaper = reaper_of(&table);
        reaper.spawning().started("a", a);
        reaper.spawning().started("b", b);
        assert!(reaper.scan_victims().is_empty());
        // a exits: its child is reparented, and so are two it detached, one before b started.
        *table.lock().unwrap() = vec![
            at(b, me, b, 200),
            Process {
                ppid: me,
                ..a_child
            },
            a_old,
            a_recent,
            b_helper,
            b_group,
        ];
        let exit = |pid| exit_victims(&mut reaper.lock(), &table.lock().unwrap(), pid);
        assert_eq!(pids(&exit(a)), vec![a_child.pid, a_old.pid]);
        table
            .lock()
            .unwrap()
            .retain(|p| p.pid != a_child.pid && p.pid != a_old.pid);
        // c, which started before all of them (a carried child, say), lives on: b's exit takes
        // only what is still in b's group.
        let c = FAKE + 30;
        table.lock().unwrap().push(at(c, me, c, 50));
        reaper.spawning().started("c", c);
        table.lock().unwrap().retain(|p| p.pid != b);
        assert_eq!(pids(&exit(b)), vec![b_group.pid]);
        // c exits, the last: nothing can want what is left.
        table
            .lock()
            .unwrap()
            .retain(|p| p.pid != c && p.pid != b_group.pid);
        assert_eq!(pids(&exit(c)), vec![a_recent.pid, b_helper.pid]);
    }

    /// An upgrade's sweep keeps the carried children, what lives below them, and what they may
    /// have detached; the rest goes.
    #[test]
    fn the_sweep_keeps_what_a_carried_child_may_have_detached() {
        let me = std::process::id();
        let (a, b) = (FAKE + 30, FAKE + 40);
        let table = Arc::new(Mutex::new(vec![
            at(a, me, a, 100),
            at(b, me, b, 200),
            at(FAKE + 31, a, a, 110),
            at(FAKE + 41, b, b, 210),
        ]));
        let reaper = reaper_of(&table);
        reaper.spawning().started("a", a);
        reaper.spawning().started("b", b);
        assert!(reaper.scan_victims().is_empty());
        table.lock().unwrap().extend([
            at(FAKE + 32, me, a, 120),         // in a's group
            at(FAKE + 33, me, FAKE + 33, 130), // after a, before b: maybe a's
            at(FAKE + 34, me, FAKE + 34, 90),  // before a and b: nobody's
            at(FAKE + 42, me, FAKE + 42, 220), // after b: maybe a's too
        ]);
        let swept = |keep: &[u32]| {
            let inner = reaper.lock();
            pids(&reaper.sweep_victims(&inner, &table.lock().unwrap(), keep))
        };
        // (The children not kept were stopped before the sweep: they are not its to stop.)
        assert_eq!(
            swept(&[a]),
            vec![FAKE + 34, FAKE + 41],
            "a kept: below b, and what started before a"
        );
        assert_eq!(
            swept(&[b]),
            vec![FAKE + 31, FAKE + 32, FAKE + 33, FAKE + 34],
            "b kept: below a, in a's group, what started before b"
        );
    }
}
