//! The operating system, behind one portable API: the process table, users, the credentials of a
//! socket's peer, the open-file limit, locks, signals, descriptor flags, the terminal's modes, a
//! process's exit, and where the linker puts a section. Everything above asks here and never
//! calls the OS itself, so platform code stays out of the rest of coogle (pueue's
//! `process_helper`): each fact is read one way per OS, in `linux.rs`, `macos.rs`, or
//! `fallback.rs` for any other Unix (which knows less, and says so), with what POSIX gives them
//! all in `unix.rs`. Every `unsafe` of the crate is in this module, each with its SAFETY note.
//!
//! It imports nothing of coogle's: it is the bottom layer. It reports and acts when asked; what
//! a fact means (is that lock stale, is that process ours to stop) is the caller's to decide.

use std::io;
use std::path::PathBuf;

mod path_watch;
mod unix;
mod watch;

#[cfg_attr(target_os = "linux", path = "linux.rs")]
#[cfg_attr(target_os = "macos", path = "macos.rs")]
#[cfg_attr(
    not(any(target_os = "linux", target_os = "macos")),
    path = "fallback.rs"
)]
mod platform;

pub use path_watch::PathWatch;
pub use unix::{
    FdKind, Want, adopt_inherited_fd, fd_kind, password_file_only, raise_open_files,
    register_socket, restore_terminal, restore_terminal_on_interrupt, set_cloexec,
    start_new_session, try_lock, uid, wait_for,
};
pub use watch::ExitInfo;
pub use watch::ProcessWatch;

/// One row of the process table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Its process group.
    pub pgid: u32,
    /// When it started, in this OS's unit (Linux: clock ticks since boot, `/proc/<pid>/stat`
    /// field 22; macOS: microseconds since the epoch): what tells a process from a later one
    /// that got its pid. Only ever compared with another read on the same machine.
    pub start: u64,
    /// It has exited and its parent has not collected its status yet.
    pub zombie: bool,
}

/// `pid`'s row; `None` when there is no such process (or this OS cannot say).
pub fn process(pid: u32) -> Option<Process> {
    platform::process(pid)
}

/// Every process this OS lists (none where it cannot say).
pub fn processes() -> Vec<Process> {
    platform::processes()
}

/// Every process of group `pgid`.
pub fn process_group(pgid: u32) -> Vec<Process> {
    platform::process_group(pgid)
}

/// Whether the process that had `pid` and started at `start` still runs: a pid now used by
/// another process (its start differs), or a zombie, does not. `None` for `start` (a record
/// that has none) asks only whether the pid runs.
pub fn still_running(pid: u32, start: Option<u64>) -> bool {
    process(pid).is_some_and(|p| !p.zombie && start.is_none_or(|s| s == p.start))
}

/// The (device, inode) of the executable process `pid` runs, whatever its path has become
/// since (replaced, renamed, deleted).
pub fn executable_id(pid: u32) -> io::Result<(u64, u64)> {
    platform::executable_id(pid)
}

/// Send `signal` (`libc::SIGTERM`, …) to process `pid`. Only ever one process: a pid of 0 or
/// one too large for the OS (which `kill` would take for a group) is refused.
pub fn signal(pid: u32, signal: i32) -> io::Result<()> {
    unix::kill(positive(pid)?, signal)
}

/// Send `signal` to every process of group `pgid`. Group 0 (`killpg` would take it for the
/// caller's own) and group 1 (init's) are refused.
pub fn signal_group(pgid: u32, signal: i32) -> io::Result<()> {
    match positive(pgid)? {
        1 => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "process group 1 is init's",
        )),
        g => unix::killpg(g, signal),
    }
}

/// Die here and now, as a `SIGKILL` from outside would have it: no destructor, no flush, no
/// lock released.
pub fn die_now() -> ! {
    unix::kill_self()
}

/// A pid the OS's calls take for one process: 1 to `i32::MAX`.
fn positive(pid: u32) -> io::Result<libc::pid_t> {
    libc::pid_t::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{pid} is not a process id"),
            )
        })
}

/// Collect the exit status of `pid` if it is a child of this process that has exited, without
/// waiting: `None` while it runs, [`ExitInfo::NotOurChild`] when it is not this process's
/// child (or its status was collected already).
pub fn try_collect(pid: u32) -> Option<ExitInfo> {
    unix::try_collect(positive(pid).ok()?)
}

/// Have the child `command` starts die when this process does (Linux's `PR_SET_PDEATHSIG`,
/// SIGKILL). `false` where the OS has no such thing, and nothing is changed.
pub fn die_with_parent(command: &mut std::process::Command) -> bool {
    platform::die_with_parent(command)
}

/// Mark every descriptor above stderr close-on-exec. Whatever this process was given beyond
/// stdin, stdout and stderr leaked from the program that started it (for a daemon, the client
/// of whichever session happened to start it): no program this one starts may get it. One
/// this process adopted (see [`adopt_inherited_fd`]) is marked already. Linux 5.11 marks them
/// all in one call; elsewhere, or on an older kernel, each one the OS lists (`/proc/self/fd`,
/// `/dev/fd`) is marked, and where it lists none, nothing is.
pub fn close_inherited_on_exec() {
    if !platform::cloexec_above_stderr() {
        unix::cloexec_each_listed();
    }
}

/// Have the program `command` starts get stdin, stdout and stderr and nothing else of this
/// process's, even what this process does not know it holds. For a daemon a client starts: it
/// outlives the client, and a pipe's end it kept open would keep the client's reader from ever
/// seeing end-of-file.
///
/// Linux 5.11 marks every descriptor above stderr close-on-exec in the child, before exec, in
/// one call. Elsewhere (macOS), or where the kernel is older or a sandbox refuses the call, the
/// child marks each descriptor this process holds as the OS lists them now (`/dev/fd`,
/// `/proc/self/fd`); where the OS lists none, each number up to the file limit. This process
/// itself is left as it is.
pub fn only_stdio_across_exec(command: &mut std::process::Command) {
    if !platform::only_stdio_across_exec(command) {
        unix::cloexec_listed_in_child(command);
    }
}

/// Have the child `command` starts begin with room for `slots` descriptors (Linux; `false`
/// elsewhere, and nothing is changed).
///
/// Linux gives a new process a table of 64 descriptors, or as many as its parent's highest open
/// descriptor needs, and grows a table that threads share only after an RCU grace period
/// (`expand_fdtable`). Node opens more than 64 files at once while V8's threads run: a Node
/// server started by the daemon (few descriptors open) waited for that growth, 15-20 ms of a
/// 170 ms start here (`server-memory`, the same CPU time, measured in the child's own clock).
/// Claude Code's stdio servers start with 256 slots, and never pay it. Growing the table
/// before exec, while the child is a single thread, costs nothing.
pub fn roomy_descriptor_table(command: &mut std::process::Command, slots: i32) -> bool {
    platform::roomy_descriptor_table(command, slots)
}

/// Become a child subreaper (Linux's `PR_SET_CHILD_SUBREAPER`): an orphaned descendant becomes
/// this process's child instead of init's. Changes the whole process: only a daemon of its own
/// calls it. `Unsupported` elsewhere.
pub fn become_subreaper() -> io::Result<()> {
    platform::become_subreaper()
}

/// The effective uid of the process at the other end of a connected Unix socket (the one that
/// called `listen` for a client, `connect` for a server), as the kernel recorded it.
pub fn peer_uid(socket: &impl std::os::fd::AsFd) -> io::Result<u32> {
    platform::peer_uid(socket.as_fd())
}

/// The pid of the process at the other end of a connected Unix socket.
pub fn peer_pid(socket: &impl std::os::fd::AsFd) -> io::Result<u32> {
    platform::peer_pid(socket.as_fd())
}

/// The login name of `uid` from the password database; `None` when it has none.
pub fn user_name(uid: u32) -> Option<String> {
    unix::passwd(uid).map(|p| p.name).filter(|n| !n.is_empty())
}

/// The home directory of `uid` from the password database; `None` when it has none.
pub fn user_home(uid: u32) -> Option<PathBuf> {
    unix::passwd(uid)
        .map(|p| p.home)
        .filter(|h| !h.as_os_str().is_empty())
}

/// `uid 65534 (nobody)`, or `uid 65534` when the name is unknown.
pub fn describe_uid(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

/// The per-user temporary directory the OS keeps for this user, the same for every process of
/// theirs whatever its environment (macOS's `confstr(_CS_DARWIN_USER_TEMP_DIR)`); `None`
/// elsewhere.
pub fn user_temp_dir() -> Option<PathBuf> {
    platform::user_temp_dir()
}

/// Make every thread of this process allocate from one malloc arena. glibc gives each new
/// thread an arena of its own, whose pages stay mapped, and the first of them touched, for the
/// rest of the process's life; a process that mostly waits and allocates little (a shim, whose
/// only other thread is a short-lived one that reconnects) is smaller with one. A no-op where
/// the allocator has no such arenas (macOS's, musl's).
pub fn one_malloc_arena() {
    platform::one_malloc_arena()
}

/// Ask the allocator to hand the heap's free pages back to the kernel (glibc's `malloc_trim`):
/// after a large, short-lived allocation in a long-lived process that mostly waits. A no-op
/// where the allocator does this by itself.
pub fn release_free_memory() {
    platform::release_free_memory()
}

/// A long-lived process that has gone quiet gives back what only its busy moments need: its
/// page-table entries for its own code (shared in the page cache; mapped again as it runs),
/// the main thread's stack below the caller (when called on it), and the heap's free pages
/// ([`release_free_memory`]). Linux only; a no-op elsewhere.
pub fn release_idle_memory() {
    platform::release_idle_pages();
}

/// A `static` the linker puts in a section of its own, found later by reading the executable
/// without running it: ELF's section `elf`, or Mach-O's `macho` (`segment,section`), by the
/// target. Marked `#[used]`; the program must still reference it (a linker may drop a section
/// nothing reaches).
#[macro_export]
macro_rules! static_in_section {
    (elf = $elf:literal, macho = $macho:literal, $(#[$meta:meta])* static $name:ident: $ty:ty = $init:expr;) => {
        $(#[$meta])*
        #[used]
        #[cfg_attr(target_os = "macos", unsafe(link_section = $macho))]
        #[cfg_attr(not(target_os = "macos"), unsafe(link_section = $elf))]
        static $name: $ty = $init;
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    // Runs on Linux and macOS alike: the facts about this test process itself.
    #[test]
    fn the_process_table_has_us_with_our_parent_and_group() {
        let me = std::process::id();
        let p = process(me).expect("our own process is readable");
        assert_eq!(p.pid, me);
        assert_eq!(p.ppid, std::os::unix::process::parent_id());
        assert!(p.start > 0 && !p.zombie);
        assert!(processes().iter().any(|q| q.pid == me));
        assert!(process_group(p.pgid).iter().any(|q| q.pid == me));
        // Read twice, the same start: what tells our process from a recycled pid.
        assert_eq!(process(me).unwrap().start, p.start);
        assert!(still_running(me, Some(p.start)));
        assert!(still_running(me, None));
        assert!(
            !still_running(me, Some(p.start + 1)),
            "another start is another process"
        );
    }

    #[test]
    fn a_zombie_does_not_run_and_a_reaped_child_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // Not collected yet: a zombie, still in the table, not running.
        while !process(pid).is_some_and(|p| p.zombie) {
            assert!(std::time::Instant::now() < deadline, "{:?}", process(pid));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!still_running(pid, None));
        child.wait().unwrap();
        assert_eq!(process(pid), None);
    }

    #[test]
    fn a_socket_pair_is_our_own_uid_and_pid() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(peer_uid(&a).unwrap(), uid());
        assert_eq!(peer_pid(&a).unwrap(), std::process::id());
        assert!(describe_uid(uid()).starts_with(&format!("uid {}", uid())));
    }

    #[test]
    fn signals_reach_one_process_or_one_group_never_more() {
        for bad in [0, u32::MAX, 1 << 31] {
            assert_eq!(
                signal(bad, 0).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad}"
            );
            assert_eq!(
                signal_group(bad, 0).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad}"
            );
        }
        assert!(signal_group(1, 0).is_err(), "init's group");
        assert_eq!(try_collect(0), None);
        // Signal 0 only asks whether the process is there.
        signal(std::process::id(), 0).unwrap();
    }

    #[test]
    fn our_executable_is_the_file_we_run() {
        use std::os::unix::fs::MetadataExt;
        let exe = std::fs::metadata(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(
            executable_id(std::process::id()).unwrap(),
            (exe.dev(), exe.ino())
        );
    }

    #[test]
    fn our_own_user_has_a_name_or_at_least_a_uid() {
        // A container may run as a uid with no entry: then only the number is known.
        let me = uid();
        match user_name(me) {
            Some(name) => assert_eq!(describe_uid(me), format!("uid {me} ({name})")),
            None => assert_eq!(describe_uid(me), format!("uid {me}")),
        }
        if let Some(home) = user_home(me) {
            assert!(home.is_absolute(), "{}", home.display());
        }
    }
}
