//! Watching a process exit, whatever its pid: a child spawned with or without tokio, one this
//! process inherited across an exec, or one that is not its child at all. The OS says when it
//! exits (Linux: a pidfd; macOS: a kqueue's `EVFILT_PROC`/`NOTE_EXIT`), made pollable for tokio
//! with `AsyncFd`; where it cannot, the process table is looked at now and then. Once it has
//! exited, its status is collected if it is this process's child.
//!
//! A child spawned with `tokio::process` is tokio's to collect: watched here, it may read as
//! [`ExitInfo::NotOurChild`].

#![cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "issue 23 has the daemon watch the children it adopts; until then only the tests do"
    )
)]

use std::io;
use std::time::Duration;

use super::{platform, unix};

/// How a watched process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It has exited, and it was not this process's child (or its status was collected by
    /// someone else), so how is not known here.
    NotOurChild,
}

impl ExitInfo {
    /// What a `wait` status says.
    pub(super) fn from_wait_status(status: libc::c_int) -> ExitInfo {
        if libc::WIFSIGNALED(status) {
            ExitInfo::Signal(libc::WTERMSIG(status))
        } else {
            ExitInfo::Code(libc::WEXITSTATUS(status))
        }
    }
}

/// How often a process is looked for where the OS cannot say when it exits.
const POLL: Duration = Duration::from_millis(200);

/// One process, watched until it exits. Made and awaited inside a tokio runtime.
pub struct ProcessWatch {
    pid: u32,
    source: Source,
    /// The OS said it exited (a kqueue says so once).
    seen: bool,
    done: Option<ExitInfo>,
}

enum Source {
    /// The OS tells.
    Os(platform::ExitSource),
    /// The process table is asked every [`POLL`]; `start` tells the process from a later one
    /// with its pid.
    Polling { start: Option<u64> },
    /// Its exit was collected when the watch began.
    Collected,
}

impl ProcessWatch {
    /// Watch process `pid`. An error when there is no such process (ESRCH), or `pid` cannot
    /// be one. A child that has exited but was not collected yet is watched (and reads as
    /// exited at once).
    pub fn new(pid: u32) -> io::Result<ProcessWatch> {
        let p = super::positive(pid)?;
        match platform::ExitSource::open(p) {
            Ok(Some(source)) => Ok(Self::with(pid, Source::Os(source))),
            Ok(None) => Self::polling(pid),
            // A child that has exited can no longer be watched on macOS: its status can be
            // collected now.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => match unix::try_collect(p) {
                Some(info @ (ExitInfo::Code(_) | ExitInfo::Signal(_))) => {
                    let mut watch = Self::with(pid, Source::Collected);
                    watch.done = Some(info);
                    Ok(watch)
                }
                _ => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Watch `pid` by looking at the process table: where the OS cannot say when a process
    /// exits (Linux before 5.3, any other Unix).
    fn polling(pid: u32) -> io::Result<ProcessWatch> {
        let p = super::positive(pid)?;
        match unix::try_collect(p) {
            Some(ExitInfo::NotOurChild) if gone(pid, None) => {
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            }
            Some(ExitInfo::NotOurChild) | None => {
                let start = super::process(pid).map(|p| p.start);
                Ok(Self::with(pid, Source::Polling { start }))
            }
            Some(info) => {
                let mut watch = Self::with(pid, Source::Collected);
                watch.done = Some(info);
                Ok(watch)
            }
        }
    }

    fn with(pid: u32, source: Source) -> ProcessWatch {
        ProcessWatch {
            pid,
            source,
            seen: false,
            done: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Resolves once the process has exited: its code or signal when it was this process's
    /// child (its status is then collected: it leaves no zombie), else
    /// [`ExitInfo::NotOurChild`]. Cancel-safe, and asked again it answers the same. An error
    /// only when the runtime's reactor fails.
    pub async fn exited(&mut self) -> io::Result<ExitInfo> {
        if let Some(done) = self.done {
            return Ok(done);
        }
        // `new` checked it is a valid pid.
        let pid = super::positive(self.pid)?;
        let info = match &mut self.source {
            Source::Os(source) => {
                if !self.seen {
                    source.exited().await?;
                    self.seen = true;
                }
                // Said to have exited, a child may still be on its way to being a zombie for
                // a moment: its status is collected as soon as it is there.
                let mut pause = Duration::from_millis(1);
                loop {
                    if let Some(info) = source.collect(pid) {
                        break info;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
            }
            Source::Polling { start } => loop {
                match unix::try_collect(pid) {
                    Some(ExitInfo::NotOurChild) if gone(self.pid, *start) => {
                        break ExitInfo::NotOurChild;
                    }
                    Some(ExitInfo::NotOurChild) | None => {}
                    Some(info) => break info,
                }
                tokio::time::sleep(POLL).await;
            },
            // `done` was set with it.
            Source::Collected => ExitInfo::NotOurChild,
        };
        self.done = Some(info);
        Ok(info)
    }
}

/// Whether the process that had `pid` (and started at `start`, when known) has exited: gone
/// from the table, a zombie, or replaced by a later process with its pid.
fn gone(pid: u32, start: Option<u64>) -> bool {
    match super::process(pid) {
        Some(p) => p.zombie || start.is_some_and(|s| s != p.start),
        // No table here (or no row): ask the kernel whether the pid is there at all.
        None => super::signal(pid, 0).is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)),
    }
}

#[cfg(test)]
#[allow(
    clippy::zombie_processes,
    reason = "the watch collects the children these tests start"
)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    /// Generous: the machine running the tests may be busy.
    const LIMIT: Duration = Duration::from_secs(20);

    async fn exit_of(watch: &mut ProcessWatch) -> ExitInfo {
        tokio::time::timeout(LIMIT, watch.exited())
            .await
            .expect("the exit is seen")
            .expect("no reactor error")
    }

    /// Still running: the watch has not fired after a while.
    async fn assert_running(watch: &mut ProcessWatch) {
        let r = tokio::time::timeout(Duration::from_millis(300), watch.exited()).await;
        assert!(r.is_err(), "fired early: {r:?}");
    }

    /// A `sleep 30` that is not our child: started in the background by a shell that exits at
    /// once, so init (or whichever subreaper is above us) becomes its parent.
    fn orphan() -> u32 {
        let mut sh = Command::new("/bin/sh")
            .args(["-c", "sleep 30 >/dev/null 2>&1 </dev/null & echo $!"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(sh.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(sh.wait().unwrap().success());
        let pid: u32 = line.trim().parse().unwrap();
        assert_ne!(
            super::super::process(pid).map(|p| p.ppid),
            Some(std::process::id()),
            "it must not be our child"
        );
        pid
    }

    async fn sees_a_child_exit(watch: fn(u32) -> io::Result<ProcessWatch>) {
        let child = Command::new("/bin/sh")
            .args(["-c", "exit 7"])
            .spawn()
            .unwrap();
        let mut w = watch(child.id()).unwrap();
        assert_eq!(exit_of(&mut w).await, ExitInfo::Code(7));
        assert_eq!(exit_of(&mut w).await, ExitInfo::Code(7), "asked again");
        // Collected: no zombie is left.
        assert_eq!(super::super::process(child.id()), None);

        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let mut w = watch(child.id()).unwrap();
        assert_eq!(w.pid(), child.id());
        assert_running(&mut w).await;
        super::super::signal(child.id(), libc::SIGKILL).unwrap();
        assert_eq!(exit_of(&mut w).await, ExitInfo::Signal(libc::SIGKILL));
    }

    async fn sees_another_process_exit(watch: fn(u32) -> io::Result<ProcessWatch>) {
        let pid = orphan();
        let mut w = watch(pid).unwrap();
        assert_running(&mut w).await;
        super::super::signal(pid, libc::SIGTERM).unwrap();
        assert_eq!(exit_of(&mut w).await, ExitInfo::NotOurChild);
    }

    fn refuses_what_is_no_process(watch: fn(u32) -> io::Result<ProcessWatch>) {
        for bad in [0, u32::MAX, 1 << 31] {
            let e = watch(bad).err().unwrap();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
        let mut gone = Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let e = watch(gone.id())
            .err()
            .expect("a reaped child's pid is no process");
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH), "{e}");
    }

    #[tokio::test]
    async fn a_child_is_seen_exiting_with_its_code_or_signal() {
        sees_a_child_exit(ProcessWatch::new).await;
    }

    #[tokio::test]
    async fn a_process_that_is_not_our_child_is_seen_exiting() {
        sees_another_process_exit(ProcessWatch::new).await;
    }

    #[tokio::test]
    async fn a_pid_that_is_no_process_is_an_error() {
        refuses_what_is_no_process(ProcessWatch::new);
    }

    /// Exited before the watch began, not collected yet (a zombie): its status is still ours.
    #[tokio::test]
    async fn a_child_that_exited_before_the_watch_is_collected() {
        let child = Command::new("/bin/sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + LIMIT;
        while !super::super::process(pid).is_some_and(|p| p.zombie) {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut w = ProcessWatch::new(pid).unwrap();
        assert_eq!(exit_of(&mut w).await, ExitInfo::Code(3));
    }

    /// The same, where the OS cannot tell and the table is polled.
    #[tokio::test]
    async fn polling_sees_the_same() {
        sees_a_child_exit(ProcessWatch::polling).await;
        sees_another_process_exit(ProcessWatch::polling).await;
        refuses_what_is_no_process(ProcessWatch::polling);
    }

    #[test]
    fn a_watch_moves_between_tasks() {
        fn send<T: Send>() {}
        send::<ProcessWatch>();
    }

    /// Linux watches through a pidfd.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn linux_watches_with_a_pidfd() {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let mut w = ProcessWatch::new(child.id()).unwrap();
        assert!(matches!(w.source, Source::Os(_)));
        super::super::signal(child.id(), libc::SIGTERM).unwrap();
        assert_eq!(exit_of(&mut w).await, ExitInfo::Signal(libc::SIGTERM));
    }

    /// macOS watches through a kqueue (`EVFILT_PROC`, `NOTE_EXIT`); a child that is a zombie
    /// already cannot be registered there, and is collected at once instead.
    #[cfg(target_os = "macos")]
    #[tokio::test]
    async fn macos_watches_with_a_kqueue() {
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let mut w = ProcessWatch::new(child.id()).unwrap();
        assert!(matches!(w.source, Source::Os(_)));
        assert_running(&mut w).await;
        super::super::signal(child.id(), libc::SIGTERM).unwrap();
        assert_eq!(exit_of(&mut w).await, ExitInfo::Signal(libc::SIGTERM));

        let zombie = Command::new("/bin/sh")
            .args(["-c", "exit 5"])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + LIMIT;
        while !super::super::process(zombie.id()).is_some_and(|p| p.zombie) {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut w = ProcessWatch::new(zombie.id()).unwrap();
        assert!(matches!(w.source, Source::Os(_) | Source::Collected));
        assert_eq!(exit_of(&mut w).await, ExitInfo::Code(5));
    }
}
