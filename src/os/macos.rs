//! macOS: the process table from libproc (what `ps` and Activity Monitor read; the `libc` crate
//! has no `kinfo_proc` for Apple, so sysctl's `KERN_PROC` would mean declaring that struct by
//! hand), peer credentials from `getpeereid` and `LOCAL_PEERPID`, the per-user temporary
//! directory from `confstr`, and a process's exit through a kqueue.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::Process;
use super::unix;
use super::watch::ExitInfo;

/// `pid`'s row, from `proc_pidinfo(PROC_PIDTBSDINFO)`: the one place it is called.
pub(super) fn process(pid: u32) -> Option<Process> {
    let pid_c = libc::c_int::try_from(pid).ok().filter(|p| *p > 0)?;
    // SAFETY: an all-zero proc_bsdinfo is a valid value (integers and byte arrays).
    let mut bsd: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: the buffer is a live proc_bsdinfo of exactly `size` bytes; proc_pidinfo writes
    // at most that many and returns how many it wrote.
    let n = unsafe {
        libc::proc_pidinfo(
            pid_c,
            libc::PROC_PIDTBSDINFO,
            0,
            (&raw mut bsd).cast(),
            size,
        )
    };
    (n == size).then(|| Process {
        pid,
        ppid: bsd.pbi_ppid,
        pgid: bsd.pbi_pgid,
        start: bsd
            .pbi_start_tvsec
            .saturating_mul(1_000_000)
            .saturating_add(bsd.pbi_start_tvusec),
        zombie: bsd.pbi_status == libc::SZOMB,
    })
}

pub(super) fn processes() -> Vec<Process> {
    // SAFETY: a null buffer asks only for the number of pids.
    let n = unsafe { libc::proc_listallpids(std::ptr::null_mut(), 0) };
    let Ok(n) = usize::try_from(n) else {
        return Vec::new();
    };
    // Room for those started meanwhile.
    listed(n + 64, |buf, bytes| {
        // SAFETY: `buf` holds `bytes` bytes of pid_t; proc_listallpids fills at most that and
        // returns the number of pids written.
        unsafe { libc::proc_listallpids(buf, bytes) }
    })
}

pub(super) fn process_group(pgid: u32) -> Vec<Process> {
    let Ok(pgid_c) = libc::pid_t::try_from(pgid) else {
        return Vec::new();
    };
    // A group of upstream processes is small; room for 4096 is plenty, and a bigger group
    // only means some members are missed this time, never that a wrong one is named.
    listed(4096, |buf, bytes| {
        // SAFETY: `buf` holds `bytes` bytes of pid_t; proc_listpgrppids fills at most that and
        // returns the number of pids written.
        unsafe { libc::proc_listpgrppids(pgid_c, buf, bytes) }
    })
    .into_iter()
    .filter(|p| p.pgid == pgid)
    .collect()
}

/// The rows of the pids `list` writes into a buffer of `room` pids.
fn listed(
    room: usize,
    list: impl FnOnce(*mut libc::c_void, libc::c_int) -> libc::c_int,
) -> Vec<Process> {
    let mut pids = vec![0 as libc::pid_t; room];
    let Ok(bytes) = libc::c_int::try_from(pids.len() * std::mem::size_of::<libc::pid_t>()) else {
        return Vec::new();
    };
    let n = usize::try_from(list(pids.as_mut_ptr().cast(), bytes)).unwrap_or(0);
    pids.truncate(n.min(room));
    pids.into_iter()
        .filter_map(|p| u32::try_from(p).ok())
        .filter(|&p| p != 0)
        .filter_map(process)
        .collect()
}

pub(super) fn executable_id(pid: u32) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::MetadataExt;
    let pid_c = libc::c_int::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not a process id"))?;
    let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    // SAFETY: proc_pidpath writes at most `buf.len()` bytes into `buf` and returns how many.
    let n = unsafe { libc::proc_pidpath(pid_c, buf.as_mut_ptr().cast(), buf.len() as u32) };
    let n = usize::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(io::Error::last_os_error)?;
    buf.truncate(n);
    let meta = std::fs::metadata(std::ffi::OsString::from_vec(buf))?;
    Ok((meta.dev(), meta.ino()))
}

pub(super) fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    unix::getpeereid_uid(fd)
}

pub(super) fn peer_pid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut pid: libc::pid_t = 0;
    let mut len = std::mem::size_of::<libc::pid_t>() as libc::socklen_t;
    // SAFETY: `pid` and `len` are live, correctly sized locals; the kernel writes at most
    // `len` bytes into `pid`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_LOCAL,
            libc::LOCAL_PEERPID,
            (&raw mut pid).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| io::Error::other("LOCAL_PEERPID named no process"))
}

/// macOS has no parent-death signal: a child sees its stdin close instead.
pub(super) fn die_with_parent(_command: &mut std::process::Command) -> bool {
    false
}

/// Only Linux grows a shared descriptor table by waiting for an RCU grace period.
pub(super) fn roomy_descriptor_table(_command: &mut std::process::Command, _slots: i32) -> bool {
    false
}

pub(super) fn cloexec_above_stderr() -> bool {
    false
}

/// No `close_range` here: the caller has the child mark each descriptor `/dev/fd` lists.
pub(super) fn only_stdio_across_exec(_command: &mut std::process::Command) -> bool {
    false
}

pub(super) fn become_subreaper() -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "macOS has no child subreaper",
    ))
}

/// macOS's allocator has no arena per thread to turn off.
pub(super) fn one_malloc_arena() {}

/// macOS's allocator returns free pages by itself.
pub(super) fn release_free_memory() {}

/// Left to macOS, whose pager compresses an idle process's pages by itself.
pub(super) fn release_idle_pages() {}

/// `confstr(_CS_DARWIN_USER_TEMP_DIR)`, when it answers with an absolute path.
pub(super) fn user_temp_dir() -> Option<PathBuf> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;

    let mut buf = vec![0 as libc::c_char; libc::PATH_MAX as usize + 1];
    // SAFETY: confstr writes at most `buf.len()` bytes, NUL included, into our buffer and
    // returns the length it needed (0 on error).
    let needed =
        unsafe { libc::confstr(libc::_CS_DARWIN_USER_TEMP_DIR, buf.as_mut_ptr(), buf.len()) };
    if needed == 0 || needed > buf.len() {
        return None;
    }
    // SAFETY: on success the buffer holds a NUL-terminated string.
    let dir = unsafe { CStr::from_ptr(buf.as_ptr()) };
    let dir = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    dir.is_absolute().then_some(dir)
}

/// A process's exit, told by a kqueue of its own (`EVFILT_PROC`, `NOTE_EXIT`); the kqueue's
/// descriptor is readable while an event is pending, which is what tokio polls.
pub(super) struct ExitSource {
    kq: AsyncFd<OwnedFd>,
}

impl ExitSource {
    /// An error (ESRCH) when there is no such process, or it has exited already.
    pub fn open(pid: libc::pid_t) -> io::Result<Option<ExitSource>> {
        // SAFETY: kqueue takes nothing and returns a new descriptor or -1.
        let kq = unsafe { libc::kqueue() };
        if kq < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: kqueue just returned this descriptor; nothing else owns it.
        let kq = unsafe { OwnedFd::from_raw_fd(kq) };
        unix::set_cloexec(&kq, true)?;
        let change = libc::kevent {
            ident: pid as libc::uintptr_t,
            filter: libc::EVFILT_PROC,
            flags: libc::EV_ADD | libc::EV_ONESHOT,
            fflags: libc::NOTE_EXIT,
            data: 0,
            udata: std::ptr::null_mut(),
        };
        // SAFETY: one change, read from a live local; no room for events, so the call only
        // registers and returns (a null timeout does not make it wait).
        let rc = unsafe {
            libc::kevent(
                kq.as_raw_fd(),
                &change,
                1,
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(ExitSource {
            // SAFETY: an OwnedFd's descriptor is open, and the same one, for as long as it
            // lives, which is as long as the AsyncFd that owns it.
            kq: unsafe { AsyncFd::register_with_interest(kq, Interest::READABLE)? },
        }))
    }

    /// Resolves once the process has exited. The kqueue says so once: the caller remembers.
    pub async fn exited(&mut self) -> io::Result<()> {
        loop {
            let mut ready = self.kq.readable().await?;
            // SAFETY: kevent is plain data (the null udata included); all-zero is valid.
            let mut event: libc::kevent = unsafe { std::mem::zeroed() };
            let now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: no changes; room for one event in a live local; a zero timeout, so it
            // does not block.
            let n = unsafe {
                libc::kevent(
                    self.kq.get_ref().as_raw_fd(),
                    std::ptr::null(),
                    0,
                    &mut event,
                    1,
                    &now,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(e);
            }
            if n > 0 && event.filter == libc::EVFILT_PROC && event.fflags & libc::NOTE_EXIT != 0 {
                return Ok(());
            }
            ready.clear_ready();
        }
    }

    /// Its status, once it is our child's and there to collect; `None` for a child not there
    /// yet.
    pub fn collect(&self, pid: libc::pid_t) -> Option<ExitInfo> {
        unix::try_collect(pid)
    }
}

#[cfg(test)]
#[allow(
    clippy::zombie_processes,
    reason = "the test collects its child through the kqueue's `collect`"
)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The kqueue path itself (not the polling fallback): a child's exit is told once by its
    /// kqueue, after which its status is there to collect; a running process is not said to
    /// have exited; a pid that is gone is refused with ESRCH.
    #[tokio::test]
    async fn a_kqueue_tells_a_childs_exit_once() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "read _; exit 7"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let mut source = ExitSource::open(pid).unwrap().expect("a kqueue");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), source.exited())
                .await
                .is_err(),
            "said to exit while it runs"
        );
        drop(child.stdin.take());
        tokio::time::timeout(Duration::from_secs(20), source.exited())
            .await
            .expect("the kqueue tells the exit")
            .unwrap();
        let mut info = None;
        for _ in 0..1000 {
            info = source.collect(pid);
            if info.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(info, Some(ExitInfo::Code(7)));
        let gone = ExitSource::open(pid).err().and_then(|e| e.raw_os_error());
        assert_eq!(gone, Some(libc::ESRCH));
    }
}
