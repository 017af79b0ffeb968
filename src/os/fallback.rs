//! Any other Unix: what POSIX alone can say. There is no process table here (so nothing is
//! ever reaped by it), no parent-death signal, no subreaper, and a process's exit is found by
//! polling.

use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use super::Process;
use super::unix;
use super::watch::ExitInfo;

pub(super) fn process(_pid: u32) -> Option<Process> {
    None
}

pub(super) fn processes() -> Vec<Process> {
    Vec::new()
}

pub(super) fn process_group(_pgid: u32) -> Vec<Process> {
    Vec::new()
}

pub(super) fn executable_id(_pid: u32) -> io::Result<(u64, u64)> {
    Err(unsupported("which file a process runs"))
}

pub(super) fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    unix::getpeereid_uid(fd)
}

pub(super) fn peer_pid(_fd: BorrowedFd<'_>) -> io::Result<u32> {
    Err(unsupported("a Unix socket peer's pid"))
}

pub(super) fn die_with_parent(_command: &mut std::process::Command) -> bool {
    false
}

pub(super) fn roomy_descriptor_table(_command: &mut std::process::Command, _slots: i32) -> bool {
    false
}

pub(super) fn cloexec_above_stderr() -> bool {
    false
}

/// No `close_range` here: the caller has the child mark each listed descriptor.
pub(super) fn only_stdio_across_exec(_command: &mut std::process::Command) -> bool {
    false
}

pub(super) fn become_subreaper() -> io::Result<()> {
    Err(unsupported("a child subreaper"))
}

pub(super) fn user_temp_dir() -> Option<PathBuf> {
    None
}

pub(super) fn one_malloc_arena() {}

pub(super) fn release_free_memory() {}

/// No portable way to drop a mapping's pages without losing what they hold.
pub(super) fn release_idle_pages() {}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("no way to ask for {what} here"),
    )
}

/// No way for the OS to tell a process's exit here: never made, the watch polls.
pub(super) enum ExitSource {}

impl ExitSource {
    pub fn open(_pid: libc::pid_t) -> io::Result<Option<ExitSource>> {
        Ok(None)
    }

    pub async fn exited(&mut self) -> io::Result<()> {
        match *self {}
    }

    pub fn collect(&self, _pid: libc::pid_t) -> Option<ExitInfo> {
        match *self {}
    }
}
