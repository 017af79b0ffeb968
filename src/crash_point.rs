//! Crash points: the places between two writes of the installer where a process killed by
//! SIGKILL, an OOM kill or a power cut would leave the files it was changing. Tests have the
//! process die at each one in turn and check that the next run puts everything right.
//!
//! Compiled into every build and inert unless `COOGLE_CRASH_AT` is set:
//! - `COOGLE_CRASH_AT=N`: die at the N-th crash point this process reaches (1-based), so a test
//!   can sweep N = 1, 2, … until a run finishes;
//! - `COOGLE_CRASH_AT=NAME` or `NAME:K`: die the K-th time (default the first) the point named
//!   NAME is reached.
//!
//! Dying is `SIGKILL` to this process: no destructor, no flush, no lock released, exactly what
//! the real thing leaves. Nothing here ever runs in the daemon or `coogle mcp`.

use std::sync::Mutex;

/// Points reached so far in this process: in all, and per name.
static REACHED: Mutex<(u32, Vec<(&'static str, u32)>)> = Mutex::new((0, Vec::new()));

/// What `COOGLE_CRASH_AT` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Nth(u32),
    Named(String, u32),
}

fn target() -> Option<Target> {
    parse(&std::env::var("COOGLE_CRASH_AT").ok()?)
}

fn parse(v: &str) -> Option<Target> {
    let v = v.trim();
    if v.is_empty() {
        return None;
    }
    if let Ok(n) = v.parse() {
        return Some(Target::Nth(n));
    }
    Some(match v.split_once(':') {
        Some((name, k)) => Target::Named(name.to_owned(), k.parse().unwrap_or(1)),
        None => Target::Named(v.to_owned(), 1),
    })
}

/// The installer reached the point `name`; dies here when a test asked for it.
pub(crate) fn reached(name: &'static str) {
    let Some(target) = target() else {
        return;
    };
    let (total, this_name) = {
        let mut r = REACHED.lock().unwrap_or_else(|e| e.into_inner());
        r.0 += 1;
        let total = r.0;
        let count = match r.1.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => {
                *c += 1;
                *c
            }
            None => {
                r.1.push((name, 1));
                1
            }
        };
        (total, count)
    };
    let die = match &target {
        Target::Nth(n) => *n == total,
        Target::Named(n, k) => n == name && *k == this_name,
    };
    if die {
        tracing::warn!(
            point = name,
            n = total,
            "crash point: dying here (COOGLE_CRASH_AT)"
        );
        crate::os::die_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Parsing only: setting COOGLE_CRASH_AT here would kill the other tests of this binary.
    #[test]
    fn parses_both_forms() {
        assert_eq!(parse("renamed:2"), Some(Target::Named("renamed".into(), 2)));
        assert_eq!(parse("7"), Some(Target::Nth(7)));
        assert_eq!(parse("locked"), Some(Target::Named("locked".into(), 1)));
        assert_eq!(parse(" "), None);
    }
}
