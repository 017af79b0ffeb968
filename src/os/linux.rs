//! Linux: the process table from `/proc`, peer credentials from `SO_PEERCRED`, `prctl`'s
//! parent-death signal and child subreaper, and a process's exit through a pidfd.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::Process;
use super::unix;
use super::watch::ExitInfo;

pub(super) fn process(pid: u32) -> Option<Process> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &stat)
}

pub(super) fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(process)
        .collect()
}

pub(super) fn process_group(pgid: u32) -> Vec<Process> {
    processes().into_iter().filter(|p| p.pgid == pgid).collect()
}

/// One `/proc/<pid>/stat` line. The command is in parentheses and may hold anything (spaces,
/// parentheses), so the fields are read after the last `)`: from field 3, the state.
fn parse_stat(pid: u32, stat: &str) -> Option<Process> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state), ppid field 4, pgrp field 5, starttime field 22.
    Some(Process {
        pid,
        zombie: *f.first()? == "Z",
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

pub(super) fn executable_id(pid: u32) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    // The link's target is the file the process runs, even once its path is gone.
    let meta = std::fs::metadata(format!("/proc/{pid}/exe"))?;
    Ok((meta.dev(), meta.ino()))
}

pub(super) fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    peer_cred(fd).map(|c| c.uid)
}

pub(super) fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let pid = peer_cred(fd)?.pid;
    u32::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| io::Error::other("SO_PEERCRED named no process"))
}

fn peer_cred(fd: BorrowedFd<'_>) -> io::Result<libc::ucred> {
    // SAFETY: ucred is plain integers; all-zero is a valid value that getsockopt overwrites.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live, correctly sized locals; the kernel writes at most
    // `len` bytes into `cred`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("SO_PEERCRED returned a short answer"));
    }
    Ok(cred)
}

pub(super) fn die_with_parent(command: &mut std::process::Command) -> bool {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed; prctl is one, and it changes only the child.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    true
}

pub(super) fn roomy_descriptor_table(command: &mut std::process::Command, slots: i32) -> bool {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed; fcntl is one. F_DUPFD_CLOEXEC takes the lowest free descriptor at or
    // above `slots - 1` (it replaces none), and exec closes it again: only the table's size
    // stays. The child is single-threaded here, so this growth waits for nothing. Best effort:
    // a soft RLIMIT_NOFILE below `slots` makes it fail, and the child starts as it would have.
    unsafe {
        command.pre_exec(move || {
            libc::fcntl(0, libc::F_DUPFD_CLOEXEC, slots - 1);
            Ok(())
        });
    }
    true
}

pub(super) fn cloexec_above_stderr() -> bool {
    cloexec_from(3)
}

/// Mark this process's descriptors from `first` up close-on-exec, in one call (Linux 5.11's
/// `close_range` with `CLOSE_RANGE_CLOEXEC`); false where the kernel does not know the call or
/// the flag, or a sandbox refuses it.
fn cloexec_from(first: u32) -> bool {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets the close-on-exec flag of this
    // process's descriptors in the range; it frees and closes nothing. One system call:
    // async-signal-safe, so also fit for a pre_exec hook.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
    }
}

pub(super) fn only_stdio_across_exec(command: &mut std::process::Command) -> bool {
    use std::os::unix::process::CommandExt;
    // A kernel older than 5.11 (or a sandbox) refuses the call: asked here on the one number
    // u32::MAX, never open, it changes nothing and says so, and the caller has the child mark
    // each descriptor instead.
    if !cloexec_from(u32::MAX) {
        return false;
    }
    // SAFETY: the hook runs in the child between fork and exec and makes one system call (see
    // `cloexec_above_stderr`). std's own pipe that reports a failed exec is close-on-exec
    // already, so a failed exec is still reported.
    unsafe {
        command.pre_exec(|| {
            cloexec_above_stderr();
            Ok(())
        });
    }
    true
}

pub(super) fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only changes this process's attribute.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn user_temp_dir() -> Option<PathBuf> {
    None
}

pub(super) fn release_free_memory() {
    // SAFETY: malloc_trim only hands free pages of the heap back to the kernel; it touches no
    // memory the program holds.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}

pub(super) fn one_malloc_arena() {
    // SAFETY: mallopt only sets one of the allocator's parameters, which glibc reads at its
    // next decision; M_ARENA_MAX is one it knows.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

pub(super) fn release_idle_pages() {
    // One pass over this process's mappings: where the main stack is, and which of the
    // executable's mappings hold nothing but the file's own bytes.
    let (stack, code) = idle_plan(main_stack_pointer());
    if let Some((bottom, end)) = stack {
        trim_main_stack(bottom, end);
    }
    release_free_memory();
    // Last: whatever runs after this maps its code again.
    for &(start, end) in code.iter().flatten() {
        // SAFETY: whole pages of a read-only file mapping of the executable with no page of its
        // own (`Anonymous: 0`: no breakpoint, no uprobe, no relocation wrote to it), so
        // MADV_DONTNEED only drops their entries: the next touch maps the file's same bytes
        // again. Nothing is lost.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// At most this many of the executable's read-only mappings are let go (a linker makes two
/// or three: headers and read-only data, code); a fixed array, so that nothing is freed once
/// the code's pages are gone.
const CODE_MAPPINGS: usize = 8;

/// An address range, `start..end`, as a pair.
type Span = (usize, usize);

/// Where a stack pointer of the main thread's is now: the address of a local of a function
/// that is never inlined, so no caller's frame lies below it.
#[inline(never)]
fn main_stack_pointer() -> usize {
    let here = 0u8;
    std::hint::black_box(&raw const here) as usize
}

/// From `/proc/self/smaps`: the main thread's stack below `sp` (less a margin), if `sp` is in
/// `[stack]`; and the executable's code and read-only data, `[__executable_start, etext)`,
/// mapping by mapping, leaving out any mapping that is writable or has pages of its own.
fn idle_plan(sp: usize) -> (Option<Span>, [Option<Span>; CODE_MAPPINGS]) {
    use std::io::BufRead;

    unsafe extern "C" {
        // Defined by the linker (GNU ld and lld alike): where the executable's image starts,
        // and where its code ends. Below `etext` are the headers, read-only data and code;
        // the data a program writes, relocated pointers included, comes after it.
        static __executable_start: u8;
        static etext: u8;
    }
    let page = page_size();
    let image = (&raw const __executable_start as usize).next_multiple_of(page)
        ..(&raw const etext as usize) / page * page;
    let mut stack = None;
    let mut code = [None; CODE_MAPPINGS];
    let Ok(file) = std::fs::File::open("/proc/self/smaps") else {
        return (stack, code);
    };
    let mut lines = std::io::BufReader::with_capacity(4096, file);
    let mut line = String::new();
    // The mapping whose fields are being read: its range, and whether it may be let go.
    let mut current: Option<(usize, usize, bool)> = None;
    let mut found = 0;
    while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
        if let Some(anonymous) = line.strip_prefix("Anonymous:") {
            let none = anonymous.trim().strip_suffix("kB").map(str::trim) == Some("0");
            if let Some((lo, hi, true)) = current.take()
                && none
                && found < CODE_MAPPINGS
            {
                code[found] = Some((lo.max(image.start), hi.min(image.end)));
                found += 1;
            }
        } else if let Some((lo, hi, perms, name)) = mapping_header(&line) {
            if name == "[stack]" && (lo..hi).contains(&sp) {
                // Two pages below this frame's are left mapped: the frames of `madvise` and
                // of its caller live there while it runs.
                stack = Some((lo, (sp / page).saturating_sub(2) * page));
            }
            let read_only = !perms.contains('w');
            let ours = lo < image.end && image.start < hi;
            current = Some((lo, hi, read_only && ours));
        }
        line.clear();
    }
    (stack, code)
}

/// A `/proc/PID/maps` or `smaps` mapping line: its range, permissions and name (empty for an
/// anonymous mapping).
fn mapping_header(line: &str) -> Option<(usize, usize, &str, &str)> {
    let mut fields = line.split_ascii_whitespace();
    let (lo, hi) = fields.next()?.split_once('-')?;
    let lo = usize::from_str_radix(lo, 16).ok()?;
    let hi = usize::from_str_radix(hi, 16).ok()?;
    let perms = fields.next()?;
    let name = fields.nth(3).unwrap_or("");
    Some((lo, hi, perms, name))
}

/// Let go of the main thread's stack pages in `[bottom, end)`, below its live frames (see
/// [`idle_plan`]): deep start-up calls (parsing a config, connecting) touched them once, and a
/// waiting process never goes as deep again.
fn trim_main_stack(bottom: usize, end: usize) {
    if end > bottom {
        // SAFETY: the range lies inside the main thread's stack mapping and below the deepest
        // live frame of this thread (two pages below a local of a function that is not
        // inlined); what is below it holds nothing, and MADV_DONTNEED hands those pages back
        // as zeroes on their next touch.
        unsafe {
            libc::madvise(
                bottom as *mut libc::c_void,
                end - bottom,
                libc::MADV_DONTNEED,
            );
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the system.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    }
}

/// The path to one entry, told by inotify and the mount table; `PathWatch` says what counts.
///
/// inotify watches inodes, not paths, so the path is followed as the kernel resolves it, one
/// name at a time, and each inode met is watched for itself only, never for a directory's
/// other entries, so a busy directory (`$HOME`, `/tmp`) does not wake the reader:
/// - the entry: its link count changes when it is removed or another file is renamed over it
///   (`IN_ATTRIB`), it is renamed away, or removed;
/// - each directory reached, the entry's own and every one above it: removed, renamed, or
///   its file system unmounted;
/// - each symlink met on the way (`/var/run` → `/run`, and any in its target), not followed:
///   the same as the entry, so re-pointing it (a new link renamed over it, `ln -sfn`) or
///   removing it is told, while its directory's other entries are not.
///
/// A mount over any directory on the way changes what the path leads to without touching an
/// inode: `/proc/self/mountinfo` is priority-readable whenever this process's mount table
/// changes, which is rare (a mount, an unmount), and then told too.
pub(super) struct PathSource {
    fd: AsyncFd<OwnedFd>,
    mounts: Option<AsyncFd<std::fs::File>>,
    left_out: Vec<std::path::PathBuf>,
}

/// What the entry and each symlink on the way ask for, and what each directory asks for itself.
const ENTRY_EVENTS: u32 =
    libc::IN_ATTRIB | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_DONT_FOLLOW;
const DIR_EVENTS: u32 = libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_ONLYDIR;
/// As the kernel: a path whose resolution meets more symlinks than this leads nowhere.
const MAX_SYMLINKS: usize = 40;

impl PathSource {
    pub fn open(
        dir: &std::path::Path,
        name: &std::ffi::OsStr,
        mount_table: bool,
    ) -> io::Result<Option<PathSource>> {
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1; no memory is
        // passed.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: inotify_init1 just returned this descriptor; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let add = |path: &std::path::Path, mask: u32| inotify_add(&fd, path, mask);
        // The entry and its own directory must be watched, or nothing is.
        add(&dir.join(name), ENTRY_EVENTS)?;
        add(dir, DIR_EVENTS)?;
        let mut left_out = Vec::new();
        for (path, mask) in the_way(&std::path::absolute(dir)?) {
            if add(&path, mask).is_err() {
                // Not readable by this user, or past inotify's limit: the caller's occasional
                // look covers it.
                left_out.push(path);
            }
        }
        let mounts = mount_table
            .then(|| {
                std::fs::File::open("/proc/self/mountinfo").and_then(|f| {
                    // SAFETY: the File's descriptor is open, and the same one, for as long as
                    // it lives, which is as long as the AsyncFd that owns it.
                    unsafe { AsyncFd::register_with_interest(f, Interest::PRIORITY) }
                        .map_err(io::Error::from)
                })
            })
            .transpose();
        Ok(Some(PathSource {
            // SAFETY: an OwnedFd's descriptor is open, and the same one, for as long as it
            // lives, which is as long as the AsyncFd that owns it.
            fd: unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE)? },
            mounts: mounts.ok().flatten(),
            left_out,
        }))
    }

    /// What could not be watched on the way (the caller's occasional look covers it).
    pub fn left_out(&self) -> &[std::path::PathBuf] {
        &self.left_out
    }

    /// Resolves once something that may concern the path happened: an event on the path
    /// (all those pending read), or the mount table changed.
    pub async fn changed(&mut self) -> io::Result<()> {
        let PathSource { fd, mounts, .. } = self;
        tokio::select! {
            told = Self::events(fd) => told,
            told = Self::mounts_changed(mounts) => told,
        }
    }

    async fn mounts_changed(mounts: &mut Option<AsyncFd<std::fs::File>>) -> io::Result<()> {
        let Some(mounts) = mounts else {
            return std::future::pending().await;
        };
        // The kernel says "changed" once per change, when polled: the readiness is cleared
        // here and comes back with the next mount or unmount.
        let mut guard = mounts.ready(Interest::PRIORITY).await?;
        guard.clear_ready();
        Ok(())
    }

    /// Every event asked for concerns the path: read them all, then say so.
    async fn events(fd: &AsyncFd<OwnedFd>) -> io::Result<()> {
        // Room for many events with names (each is 16 bytes and a name of up to 255).
        let mut buf = [0u8; 4096];
        loop {
            let mut guard = fd.readable().await?;
            let mut read_any = false;
            loop {
                // SAFETY: read writes at most `buf.len()` bytes into `buf`, a live local.
                let n = unsafe {
                    libc::read(
                        guard.get_inner().as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    )
                };
                if n == 0 {
                    return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                }
                if n > 0 {
                    read_any = true;
                    continue;
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        guard.clear_ready();
                        break;
                    }
                    io::ErrorKind::Interrupted => {}
                    _ => return Err(e),
                }
            }
            if read_any {
                return Ok(());
            }
        }
    }
}

/// Watch `path` for `mask`, added to what its inode is already watched for (one inode met twice
/// on the way asks for both, where a second add would otherwise replace the first's mask).
fn inotify_add(fd: &OwnedFd, path: &std::path::Path, mask: u32) -> io::Result<libc::c_int> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `path` is a NUL-terminated string that lives across the call, which only reads
    // it.
    match unsafe {
        libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask | libc::IN_MASK_ADD)
    } {
        wd if wd >= 0 => Ok(wd),
        _ => Err(io::Error::last_os_error()),
    }
}

/// What to watch on the way to the absolute directory `dir`, resolved as the kernel does, one
/// name at a time: each directory reached (but `/`, which cannot move) and each symlink met,
/// itself, with the symlink's target resolved in its place (a relative one from the directory
/// holding it). Stops where the way does not go on (a name missing, too many symlinks).
fn the_way(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u32)> {
    use std::collections::VecDeque;
    use std::path::{Component, PathBuf};
    let names = |p: &std::path::Path| -> Vec<PathBuf> {
        p.components()
            .map(|c| PathBuf::from(c.as_os_str()))
            .collect()
    };
    let mut to_go: VecDeque<PathBuf> = names(dir).into();
    let mut at = PathBuf::from("/");
    let mut watch = Vec::new();
    let mut links = 0;
    while let Some(name) = to_go.pop_front() {
        match name.components().next() {
            Some(Component::RootDir) => at = PathBuf::from("/"),
            // `at` is resolved, so its parent is what `..` leads to.
            Some(Component::ParentDir) => {
                at.pop();
            }
            Some(Component::Normal(n)) => {
                let next = at.join(n);
                match std::fs::symlink_metadata(&next) {
                    Ok(m) if m.file_type().is_symlink() => {
                        links += 1;
                        let Ok(target) = std::fs::read_link(&next) else {
                            break;
                        };
                        watch.push((next, ENTRY_EVENTS));
                        if links > MAX_SYMLINKS {
                            break;
                        }
                        for part in names(&target).into_iter().rev() {
                            to_go.push_front(part);
                        }
                    }
                    Ok(m) if m.is_dir() => {
                        watch.push((next.clone(), DIR_EVENTS));
                        at = next;
                    }
                    _ => break,
                }
            }
            _ => {}
        }
    }
    watch
}

/// A process's exit, told by a pidfd: it refers to that process and no other, whatever
/// becomes of its pid, and is readable once the process has exited.
pub(super) struct ExitSource {
    pidfd: AsyncFd<OwnedFd>,
}

impl ExitSource {
    /// `Ok(None)` on a kernel without pidfds (before 5.3): the caller polls instead.
    pub fn open(pid: libc::pid_t) -> io::Result<Option<ExitSource>> {
        // SAFETY: pidfd_open takes a pid and flags (none) and returns a new descriptor, which
        // is close-on-exec, or -1; no memory is passed.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOSYS) => Ok(None),
                _ => Err(e),
            };
        }
        let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("pidfd_open's answer"))?;
        // SAFETY: pidfd_open just returned this descriptor; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Some(ExitSource {
            // SAFETY: an OwnedFd's descriptor is open, and the same one, for as long as it
            // lives, which is as long as the AsyncFd that owns it.
            pidfd: unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE)? },
        }))
    }

    /// Resolves once the process has exited (and at once after that: it stays readable).
    pub async fn exited(&mut self) -> io::Result<()> {
        self.pidfd.readable().await.map(drop)
    }

    /// Its status, once it is our child's and there to collect; `None` for a child not there
    /// yet.
    pub fn collect(&self, pid: libc::pid_t) -> Option<ExitInfo> {
        loop {
            // SAFETY: siginfo_t is plain data; all-zero is valid and waitid overwrites it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waitid writes only into `info`, a live local. P_PIDFD names the process
            // by our open pidfd, so a recycled pid can never be collected in its place.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PIDFD,
                    self.pidfd.get_ref().as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG,
                )
            };
            if rc == 0 {
                // SAFETY: a successful waitid filled the SIGCHLD fields (si_pid is 0 when the
                // child has not changed state).
                let (who, status) = unsafe { (info.si_pid(), info.si_status()) };
                return match (who, info.si_code) {
                    (0, _) => None,
                    (_, libc::CLD_EXITED) => Some(ExitInfo::Code(status)),
                    _ => Some(ExitInfo::Signal(status)),
                };
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                // Before 5.4 there is no P_PIDFD: by pid, then.
                Some(libc::EINVAL) => return unix::try_collect(pid),
                // Not our child (ECHILD), or nothing this process can collect.
                _ => return Some(ExitInfo::NotOurChild),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        let odd = "123 (a) b) c) S 7 99 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0";
        let p = parse_stat(123, odd).unwrap();
        assert_eq!((p.ppid, p.pgid, p.start, p.zombie), (7, 99, 4242, false));
        let zombie = "9 (x) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        assert!(parse_stat(9, zombie).unwrap().zombie);
        assert_eq!(parse_stat(1, "1 (cut short) S 0"), None);
        assert_eq!(parse_stat(1, "no parenthesis"), None);
    }
}
