//! What POSIX gives every Unix coogle runs on: ids, signals, collecting a child's exit, the
//! password database, a child's own session, the open-file limit, `flock`, descriptor flags and
//! the terminal's modes. What differs by OS is in the platform files.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use super::watch::ExitInfo;

/// This process's real uid.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `kill(2)`; the caller made `pid` one process's id (positive).
pub(super) fn kill(pid: libc::pid_t, signal: i32) -> io::Result<()> {
    // SAFETY: kill only sends a signal, and `pid` names one process, never a group.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `killpg(2)`; the caller made `pgid` a group's id (positive, not 1).
pub(super) fn killpg(pgid: libc::pid_t, signal: i32) -> io::Result<()> {
    // SAFETY: killpg only sends a signal to the group `pgid` names.
    if unsafe { libc::killpg(pgid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn kill_self() -> ! {
    // SAFETY: kill(2) with our own pid and SIGKILL, which cannot be caught: the process ends
    // before the call returns to any code of ours.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // Not reached; should the kernel ever return first, still no destructor runs.
    std::process::abort()
}

/// `waitpid(pid, WNOHANG)`: the exit of a child that has exited, `None` while it runs,
/// [`ExitInfo::NotOurChild`] for a process that is not our child (ECHILD).
pub(super) fn try_collect(pid: libc::pid_t) -> Option<ExitInfo> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid on one pid (positive, so never a group) without blocking; it writes
        // only into `status`, a live local.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc > 0 {
            return Some(ExitInfo::from_wait_status(status));
        }
        if rc == 0 {
            return None;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Some(ExitInfo::NotOurChild),
            _ => return None,
        }
    }
}

/// One user's entry in the password database.
pub(super) struct Passwd {
    pub name: String,
    pub home: PathBuf,
}

/// Set by [`password_file_only`]: look users up in /etc/passwd alone.
static FILE_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on this process finds users in /etc/passwd alone, never through the C library's
/// name services. For a statically linked glibc program: for a user that file lacks, glibc
/// would load the system's NSS modules (sss, systemd, ldap), built against another glibc,
/// which is unsupported and can crash it. Such a user is then unknown (`None`).
pub fn password_file_only() {
    FILE_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// `uid`'s entry in the password database (`getpwuid_r`, which writes only into the buffers it
/// is given, unlike `getpwuid`); `None` when there is none.
pub(super) fn passwd(uid: u32) -> Option<Passwd> {
    if FILE_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
        let text = std::fs::read("/etc/passwd").ok()?;
        return passwd_in_file(&text, uid);
    }
    passwd_from_libc(uid)
}

/// `uid`'s line in a passwd(5) file: `name:password:uid:gid:gecos:home:shell`.
fn passwd_in_file(text: &[u8], uid: u32) -> Option<Passwd> {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    text.split(|b| *b == b'\n').find_map(|line| {
        // Comments and NIS compat entries (`+name`, `-name`) name nobody here.
        if matches!(line.first(), Some(b'#' | b'+' | b'-')) {
            return None;
        }
        let mut fields = line.split(|b| *b == b':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        let home = fields.nth(2)?;
        (std::str::from_utf8(id).ok()?.trim().parse::<u32>().ok()? == uid).then(|| Passwd {
            name: String::from_utf8_lossy(name).into_owned(),
            home: PathBuf::from(OsStr::from_bytes(home)),
        })
    })
}

fn passwd_from_libc(uid: u32) -> Option<Passwd> {
    use std::ffi::{CStr, OsStr};
    use std::os::unix::ffi::OsStrExt;

    let mut size = 16 * 1024;
    loop {
        let mut buf = vec![0 as libc::c_char; size];
        // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids); getpwuid_r
        // fills it.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer refers to live, correctly sized storage owned by this frame.
        let rc =
            unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
        if rc == libc::ERANGE && size < 1 << 20 {
            size *= 4;
            continue;
        }
        if rc != 0 || result.is_null() {
            return None;
        }
        let text = |p: *const libc::c_char| {
            if p.is_null() {
                return Vec::new();
            }
            // SAFETY: on success each non-null string field points to a NUL-terminated string
            // inside `buf`, which is still alive.
            unsafe { CStr::from_ptr(p) }.to_bytes().to_vec()
        };
        let name = String::from_utf8_lossy(&text(pwd.pw_name)).into_owned();
        let home = PathBuf::from(OsStr::from_bytes(&text(pwd.pw_dir)));
        return Some(Passwd { name, home });
    }
}

/// The peer's effective uid by `getpeereid`, where the OS has it (every Unix but Linux, which
/// says more with `SO_PEERCRED`).
#[cfg(not(target_os = "linux"))]
pub(super) fn getpeereid_uid(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    let mut uid: libc::uid_t = 0;
    let mut gid: libc::gid_t = 0;
    // SAFETY: both out-pointers refer to live locals of the right type; a descriptor that is
    // not a connected Unix socket makes it fail, which is returned.
    if unsafe { libc::getpeereid(fd.as_raw_fd(), &mut uid, &mut gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(uid)
}

/// What [`wait_for`] waits on a descriptor for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    pub read: bool,
    pub write: bool,
}

impl Want {
    pub const READ: Want = Want {
        read: true,
        write: false,
    };
}

/// What [`wait_for`] found a descriptor ready for. An end or an error counts as both: the next
/// read or write says which it was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ready {
    pub read: bool,
    pub write: bool,
}

/// Wait until one of `fds` is ready for what it is wanted for (a `None` is not waited on), for
/// at most `timeout` (`None`: however long it takes): one `poll` over them all, so one thread
/// serves several descriptors and a wake-up is only ever for something asked about. `None`
/// when the time ran out. A wait a signal ends early (EINTR) is waited again, from the start.
pub fn wait_for<const N: usize>(
    fds: [(Option<std::os::fd::BorrowedFd<'_>>, Want); N],
    timeout: Option<std::time::Duration>,
) -> io::Result<Option<[Ready; N]>> {
    let mut pfds = fds.map(|(fd, want)| libc::pollfd {
        // poll skips a negative descriptor.
        fd: fd.map_or(-1, |fd| fd.as_raw_fd()),
        events: if want.read { libc::POLLIN } else { 0 }
            | if want.write { libc::POLLOUT } else { 0 },
        revents: 0,
    });
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
    loop {
        // SAFETY: `pfds` is an array of N pollfds we own for the duration of the call, and N is
        // what poll is told.
        match unsafe { libc::poll(pfds.as_mut_ptr(), N as libc::nfds_t, ms) } {
            -1 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            0 => return Ok(None),
            _ => {
                let ended = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
                return Ok(Some(pfds.map(|p| Ready {
                    read: p.revents & (libc::POLLIN | ended) != 0,
                    write: p.revents & (libc::POLLOUT | ended) != 0,
                })));
            }
        }
    }
}

/// Have the child `command` starts lead a session of its own (`setsid`): no controlling
/// terminal, its own process group, so a terminal's hang-up or Ctrl-C never reaches it.
pub fn start_new_session(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed; setsid is one, and it changes only the child.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Raise the soft limit on open files towards the hard one, to `cap` at the most (macOS
/// reports an infinite hard limit it does not honour); the soft limit in force after, `None`
/// when the OS does not say.
#[allow(
    clippy::unnecessary_cast,
    reason = "rlim_t is u64 on Linux and macOS, not on every Unix"
)]
pub fn raise_open_files(cap: u64) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let want = lim.rlim_max.min(cap as libc::rlim_t);
    if want > lim.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = want;
        }
    }
    Some(lim.rlim_cur as u64)
}

/// Take `flock`'s exclusive lock on `file` without waiting: `Ok(false)` when another open file
/// holds it. Held until every descriptor of this open file is closed.
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor `file` owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(err)
}

/// [`super::close_inherited_on_exec`] where the OS cannot mark them all at once: each
/// descriptor the OS lists for this process.
pub fn cloexec_each_listed() {
    // The listing's own descriptor is in it, and closed by now: EBADF, nothing to do.
    for fd in listed_descriptors().into_iter().filter(|&fd| fd > 2) {
        let _ = set_cloexec_raw(fd, true);
    }
}

/// The child `command` starts marks close-on-exec each descriptor above stderr that this
/// process holds now, as the OS lists them, or, where it lists none, every number up to the
/// file limit (at most 65,536). For [`super::only_stdio_across_exec`] where the child cannot
/// mark them all in one call.
pub fn cloexec_listed_in_child(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // Listed here: reading a directory allocates, which the child may not do before exec.
    let listed: Vec<RawFd> = listed_descriptors()
        .into_iter()
        .filter(|&fd| fd > 2)
        .collect();
    let every = if listed.is_empty() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit only writes the struct it is given.
        let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
        let limit = if known { lim.rlim_cur } else { 1024 };
        RawFd::try_from(limit.min(65_536)).unwrap_or(1024)
    } else {
        0
    };
    // SAFETY: the hook runs in the child between fork and exec and only calls fcntl, which is
    // async-signal-safe, over a list made before the fork: it allocates nothing. A number that
    // is closed by now (the listing's own) fails with EBADF, and is passed over; std's own pipe
    // that reports a failed exec is close-on-exec already.
    unsafe {
        command.pre_exec(move || {
            let mark = |fd: RawFd| {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            };
            listed.iter().copied().for_each(mark);
            (3..every).for_each(mark);
            Ok(())
        });
    }
}

/// The descriptors the OS lists as this process's open ones (none where it lists none).
fn listed_descriptors() -> Vec<RawFd> {
    let listing = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    let Ok(entries) = std::fs::read_dir(listing) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether `fd` is closed when this process execs another program (`FD_CLOEXEC`).
pub fn set_cloexec(fd: impl AsFd, on: bool) -> io::Result<()> {
    set_cloexec_raw(fd.as_fd().as_raw_fd(), on)
}

fn set_cloexec_raw(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl with F_GETFD/F_SETFD reads and writes only the descriptor's flags; an
    // invalid descriptor makes it fail with EBADF, which is returned.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What an open descriptor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    Socket,
    File,
    Other,
}

/// What the descriptor numbered `fd` is; an error (EBADF) when none is open there.
pub fn fd_kind(fd: RawFd) -> io::Result<FdKind> {
    // SAFETY: stat is plain data; all-zero is a valid value that fstat overwrites.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes only into the struct we own; a closed descriptor makes it fail.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFSOCK => FdKind::Socket,
        libc::S_IFREG => FdKind::File,
        _ => FdKind::Other,
    })
}

/// Descriptor numbers adopted so far: each is taken once.
static ADOPTED: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// Take ownership of descriptor `fd`, which this process inherited across the exec that
/// started it (named on its command line by the process that exec'd it), and make it
/// close-on-exec so no child inherits it. Stdin, stdout and stderr (std's), a descriptor that
/// is not open, and one adopted already are refused. Call it only for such a descriptor, before
/// anything else could open one of that number.
pub fn adopt_inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    if fd <= 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "stdin, stdout and stderr are not to be adopted",
        ));
    }
    let mut adopted = ADOPTED.lock().unwrap_or_else(|e| e.into_inner());
    if adopted.contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("descriptor {fd} was adopted already"),
        ));
    }
    set_cloexec_raw(fd, true)?;
    adopted.push(fd);
    // SAFETY: `fd` is open (fcntl just succeeded on it), is not std's stdio, and was handed to
    // this process across exec for it to own: no Rust value of this process owns it (it was not
    // opened here, and it is adopted once).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a SIGINT does once [`restore_terminal_on_interrupt`] has run.
struct Interrupt {
    /// The terminal's modes before the first prompt; `None` when stdin is no terminal.
    modes: Option<libc::termios>,
    farewell: &'static [u8],
    code: i32,
}

static INTERRUPT: OnceLock<Interrupt> = OnceLock::new();

/// Save stdin's terminal modes, and from now on answer SIGINT by putting them back, writing
/// `farewell` to stderr and exiting with `code` at once. Only the first call does anything.
pub fn restore_terminal_on_interrupt(farewell: &'static [u8], code: i32) {
    if INTERRUPT.get().is_some() {
        return;
    }
    // SAFETY: termios is plain data; all-zero is valid and tcgetattr overwrites it.
    let mut modes: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes into our local; fd 0 is only read.
    let modes = (unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut modes) } == 0).then_some(modes);
    let interrupt = Interrupt {
        modes,
        farewell,
        code,
    };
    if INTERRUPT.set(interrupt).is_err() {
        return;
    }
    // SAFETY: a zeroed sigaction is valid; the handler is set and the mask emptied. The
    // handler only calls async-signal-safe functions (tcsetattr, write, _exit) and reads
    // INTERRUPT, set before the handler is installed and never changed after.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

extern "C" fn on_interrupt(_signal: libc::c_int) {
    let Some(i) = INTERRUPT.get() else {
        return;
    };
    restore_modes(i);
    write_stderr(i.farewell);
    // SAFETY: _exit is async-signal-safe and ends the process at once.
    unsafe { libc::_exit(i.code) }
}

/// Put the terminal's modes back as [`restore_terminal_on_interrupt`] saved them (if it ran),
/// and write `farewell` to stderr. Async-signal-safe: no allocation, no locks.
pub fn restore_terminal(farewell: &[u8]) {
    if let Some(i) = INTERRUPT.get() {
        restore_modes(i);
    }
    write_stderr(farewell);
}

fn restore_modes(i: &Interrupt) {
    if let Some(modes) = &i.modes {
        // SAFETY: restoring modes tcgetattr gave us, on the same terminal.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, modes) };
    }
}

/// `write(2)` to stderr, once, whatever it takes: for a signal handler, which may not lock
/// std's stderr.
fn write_stderr(bytes: &[u8]) {
    // SAFETY: writes `bytes.len()` bytes from a live slice to descriptor 2.
    unsafe { libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len()) };
}

/// A Unix socket registered with the tokio runtime for `interest` only (tokio's own sockets
/// register for reading and writing both, and a socket then wakes the runtime each time its
/// peer reads).
pub fn register_socket(
    stream: std::sync::Arc<std::os::unix::net::UnixStream>,
    interest: tokio::io::Interest,
) -> io::Result<tokio::io::unix::AsyncFd<std::sync::Arc<std::os::unix::net::UnixStream>>> {
    // SAFETY: a `UnixStream` owns its descriptor, and the `Arc` the `AsyncFd` now holds keeps
    // the stream (so the descriptor, open and the same) alive until the `AsyncFd` drops it.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(stream, interest) }
        .map_err(|e| e.into_parts().1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's line for the uid, by its third field; comments, short and malformed lines
    /// are nobody's.
    #[test]
    fn a_user_is_found_in_a_passwd_file_by_uid() {
        let file = b"#old:x:501:20::/old:/bin/sh\n+nis:x:501:20::/nis:/bin/sh\nroot:x:0:0:root:/root:/bin/bash\nshort:x:7\nbad:x:abc:1::/bad:/bin/sh\nalice:x:501:20:Alice A:/home/alice:/bin/zsh";
        let alice = passwd_in_file(file, 501).unwrap();
        assert_eq!(
            (alice.name.as_str(), alice.home.as_path()),
            ("alice", std::path::Path::new("/home/alice"))
        );
        assert_eq!(
            passwd_in_file(file, 0).unwrap().home,
            std::path::Path::new("/root")
        );
        for nobody in [7, 1, 502] {
            assert!(passwd_in_file(file, nobody).is_none(), "{nobody}");
        }
    }

    #[test]
    fn a_lock_is_held_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        assert!(try_lock(&a).unwrap());
        assert!(try_lock(&a).unwrap(), "the same open file: held already");
        assert!(!try_lock(&b).unwrap(), "another open file waits");
        drop(a);
        assert!(try_lock(&b).unwrap(), "released with its file");
    }

    #[test]
    fn descriptors_are_told_apart_and_adopted_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(fd_kind(file.as_raw_fd()).unwrap(), FdKind::File);
        assert_eq!(fd_kind(sock.as_raw_fd()).unwrap(), FdKind::Socket);
        assert!(fd_kind(-1).is_err());
        set_cloexec(&file, false).unwrap();
        // SAFETY (test): F_GETFD only reads the flags of a descriptor `file` owns.
        let flags = || unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(flags() & libc::FD_CLOEXEC, 0);
        set_cloexec(&file, true).unwrap();
        assert_ne!(flags() & libc::FD_CLOEXEC, 0);
        for stdio in 0..=2 {
            assert!(adopt_inherited_fd(stdio).is_err());
        }
        // A descriptor handed over (here: one whose owner gives it up).
        let fd = std::os::fd::IntoRawFd::into_raw_fd(File::open(dir.path().join("f")).unwrap());
        set_cloexec_raw(fd, false).unwrap();
        let owned = adopt_inherited_fd(fd).unwrap();
        assert_eq!(owned.as_raw_fd(), fd);
        assert!(adopt_inherited_fd(fd).is_err(), "adopted once");
    }

    /// Where the child cannot mark every descriptor in one call (macOS), it marks each one this
    /// process listed: a stray this process holds, not close-on-exec, never reaches the program.
    #[test]
    fn a_stray_is_not_passed_on_where_the_child_marks_each_listed_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let stray = File::create(dir.path().join("f")).unwrap();
        set_cloexec(&stray, false).unwrap();
        let fd = stray.as_raw_fd();
        let open_in_child = |marked: bool| {
            let mut cmd = std::process::Command::new("sh");
            cmd.args([
                "-c",
                &format!("[ -e /dev/fd/{fd} ] && echo open || echo closed"),
            ]);
            if marked {
                cloexec_listed_in_child(&mut cmd);
            }
            let out = cmd.output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        // The test itself: unmarked, the stray does reach the program.
        assert_eq!(open_in_child(false), "open");
        assert_eq!(open_in_child(true), "closed");
        assert!(listed_descriptors().contains(&fd));
    }

    #[test]
    fn the_file_limit_is_raised_at_most_to_the_cap() {
        let soft = raise_open_files(10_240).expect("the limit is readable");
        assert!(soft >= 1, "{soft}");
        // Asking for less never lowers it.
        assert_eq!(raise_open_files(1), Some(soft));
    }
}
