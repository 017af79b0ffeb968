//! What the system says about a process: its process group and when it started. The daemon's
//! reaper (`daemon::child`) decides from this alone, and so does the installer when it finds a
//! lock or a temp file that names a coogle process (is that process gone?), so the same decision
//! is made (and tested) on every OS; only how the facts are read differs: `/proc` on Linux, libproc on macOS (the API
//! `ps` and Activity Monitor use; the `libc` crate has no `kinfo_proc` for Apple, so sysctl's
//! `KERN_PROC` would mean hand-declaring that struct).
//!
//! Reads only; never signals anything.

/// One process: its pid, its process group, and its start time in this OS's unit (Linux: clock
/// ticks since boot, `/proc/<pid>/stat` field 22; macOS: microseconds since the epoch). Start
/// times are only ever compared with others read on the same machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: u32,
    pub pgid: u32,
    pub start: u64,
}

/// `pid`'s group and start time; `None` when it does not exist (or cannot be read here).
#[cfg(target_os = "linux")]
pub fn info(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); pgrp is field 5, starttime field 22.
    Some(ProcInfo {
        pid,
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Whether the process that had `pid` and started at `start` still runs: a pid now used by
/// another process (its start differs), or a zombie, does not. `None` for `start` (a record
/// that has none) asks only whether the pid runs.
pub fn still_running(pid: u32, start: Option<u64>) -> bool {
    match info(pid) {
        Some(p) => start.is_none_or(|s| s == p.start) && !is_zombie(pid),
        None => false,
    }
}

#[cfg(target_os = "linux")]
fn is_zombie(pid: u32) -> bool {
    // The state follows the command name, which is in parentheses and may hold anything.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            == Some('Z')
    })
}

#[cfg(not(target_os = "linux"))]
fn is_zombie(pid: u32) -> bool {
    #[cfg(target_os = "macos")]
    {
        // `SZOMB` from <sys/proc.h>.
        const SZOMB: u32 = 5;
        let Ok(pid_c) = libc::c_int::try_from(pid) else {
            return false;
        };
        // SAFETY: an all-zero proc_bsdinfo is a valid value (integers and byte arrays).
        let mut bsd: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: the buffer is a live proc_bsdinfo of exactly `size` bytes.
        let n = unsafe {
            libc::proc_pidinfo(
                pid_c,
                libc::PROC_PIDTBSDINFO,
                0,
                (&raw mut bsd).cast(),
                size,
            )
        };
        n == size && bsd.pbi_status == SZOMB
    }
    #[cfg(not(target_os = "macos"))]
    {
        let _ = pid;
        false
    }
}

/// Every live process of group `pgid`.
#[cfg(target_os = "linux")]
pub fn group(pgid: u32) -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(info)
        .filter(|p| p.pgid == pgid)
        .collect()
}

#[cfg(target_os = "macos")]
pub fn info(pid: u32) -> Option<ProcInfo> {
    let pid_c = libc::c_int::try_from(pid).ok()?;
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
    (n == size).then(|| ProcInfo {
        pid,
        pgid: bsd.pbi_pgid,
        start: bsd
            .pbi_start_tvsec
            .saturating_mul(1_000_000)
            .saturating_add(bsd.pbi_start_tvusec),
    })
}

#[cfg(target_os = "macos")]
pub fn group(pgid: u32) -> Vec<ProcInfo> {
    let Ok(pgid_c) = libc::pid_t::try_from(pgid) else {
        return Vec::new();
    };
    // A group of upstream processes is small; room for 4096 is plenty, and a bigger group
    // only means some members are missed this time, never that a wrong one is hit.
    let mut pids = vec![0 as libc::pid_t; 4096];
    let bytes = (pids.len() * std::mem::size_of::<libc::pid_t>()) as libc::c_int;
    // SAFETY: the buffer holds `bytes` bytes of pid_t; proc_listpgrppids fills at most that
    // and returns the number of pids written.
    let n = unsafe { libc::proc_listpgrppids(pgid_c, pids.as_mut_ptr().cast(), bytes) };
    let n = usize::try_from(n).unwrap_or(0).min(pids.len());
    pids[..n]
        .iter()
        .filter_map(|&p| u32::try_from(p).ok())
        .filter(|&p| p != 0)
        .filter_map(info)
        .filter(|p| p.pgid == pgid)
        .collect()
}

/// Elsewhere nothing can be read: the reaper then leaves every group alone.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn info(_pid: u32) -> Option<ProcInfo> {
    None
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn group(_pgid: u32) -> Vec<ProcInfo> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Runs on Linux and macOS alike: the facts about this test process itself.
    #[test]
    fn reads_our_own_group_and_start() {
        let me = std::process::id();
        let p = info(me).expect("our own process is readable");
        // SAFETY: getpgrp has no preconditions.
        let pgrp = unsafe { libc::getpgrp() } as u32;
        assert_eq!((p.pid, p.pgid), (me, pgrp));
        assert!(p.start > 0);
        assert!(group(pgrp).iter().any(|q| q.pid == me));
        // Read twice, the same start: what tells our process from a recycled pid.
        assert_eq!(info(me).unwrap().start, p.start);
        assert!(still_running(me, Some(p.start)));
        assert!(
            !still_running(me, Some(p.start + 1)),
            "another start is another process"
        );
    }
}
