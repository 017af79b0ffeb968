//! Who is at the other end of a connected Unix socket, as the kernel recorded it: the uid (and
//! pid) of the process that called `listen` (for a client) or `connect` (for a server). Clients
//! ask before they send a byte, since whoever created the socket path first could be listening
//! there; the daemon asks which process answers for a binary it is to hand over to.
//!
//! This module only asks the kernel; deciding what to do with the answer is the caller's.

use std::io;
use std::os::fd::AsRawFd;

/// The peer's effective uid (`SO_PEERCRED` on Linux, `getpeereid` elsewhere).
pub fn peer_uid(socket: &impl AsRawFd) -> io::Result<u32> {
    imp::peer_uid(socket.as_raw_fd())
}

/// The peer's pid (`SO_PEERCRED` on Linux, `LOCAL_PEERPID` on macOS).
pub fn peer_pid(socket: &impl AsRawFd) -> io::Result<u32> {
    imp::peer_pid(socket.as_raw_fd())
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::io;
    use std::os::fd::RawFd;

    pub fn peer_uid(fd: RawFd) -> io::Result<u32> {
        peer_cred(fd).map(|c| c.uid)
    }

    pub fn peer_pid(fd: RawFd) -> io::Result<u32> {
        let pid = peer_cred(fd)?.pid;
        u32::try_from(pid).map_err(|_| io::Error::other("SO_PEERCRED named no process"))
    }

    fn peer_cred(fd: RawFd) -> io::Result<libc::ucred> {
        // SAFETY: ucred is plain integers; all-zero is a valid value that getsockopt overwrites.
        let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` and `len` are live, correctly sized locals; the kernel writes at most
        // `len` bytes into `cred`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
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
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use std::io;
    use std::os::fd::RawFd;

    pub fn peer_uid(fd: RawFd) -> io::Result<u32> {
        let mut uid: libc::uid_t = 0;
        let mut gid: libc::gid_t = 0;
        // SAFETY: both out-pointers refer to live locals of the right type.
        if unsafe { libc::getpeereid(fd, &mut uid, &mut gid) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(uid)
    }

    #[cfg(target_os = "macos")]
    pub fn peer_pid(fd: RawFd) -> io::Result<u32> {
        let mut pid: libc::pid_t = 0;
        let mut len = std::mem::size_of::<libc::pid_t>() as libc::socklen_t;
        // SAFETY: `pid` and `len` are live, correctly sized locals; the kernel writes at most
        // `len` bytes into `pid`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_LOCAL,
                libc::LOCAL_PEERPID,
                (&mut pid as *mut libc::pid_t).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        u32::try_from(pid).map_err(|_| io::Error::other("LOCAL_PEERPID named no process"))
    }

    #[cfg(not(target_os = "macos"))]
    pub fn peer_pid(_fd: RawFd) -> io::Result<u32> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no way to ask for a Unix socket peer's pid here",
        ))
    }
}

/// The login name of `uid` from the password database, for messages; `None` when it has none.
pub fn user_name(uid: u32) -> Option<String> {
    use std::ffi::CStr;

    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value (null pointers, zero ids); getpwuid_r fills it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live, correctly sized storage owned by this frame.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`, still alive.
    let name = unsafe { CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// `uid 65534 (nobody)`, or `uid 65534` when the name is unknown.
pub fn describe_uid(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_pair_is_our_own_uid() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(peer_uid(&a).unwrap(), crate::paths::uid());
        assert_eq!(peer_pid(&a).unwrap(), std::process::id());
        assert!(describe_uid(crate::paths::uid()).starts_with("uid "));
    }
}
