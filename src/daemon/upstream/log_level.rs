//! MCP log levels (`logging/setLevel`), ranked so that one session's choice never silences
//! another: the child is asked for the most verbose level any session wants, and each session
//! gets only the messages its own level admits.

use std::sync::LazyLock;

use serde_json::value::RawValue;

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A level's rank, lower is more verbose; `None` for a name MCP does not define.
pub(super) fn rank(level: &str) -> Option<u8> {
    LOG_LEVELS.iter().position(|l| *l == level).map(|p| p as u8)
}

pub(super) fn name(rank: u8) -> Option<&'static str> {
    LOG_LEVELS.get(rank as usize).copied()
}

/// A level's name as JSON text, made once (a handshake-era session's requests quote it in
/// every envelope).
pub(super) fn raw_name(rank: u8) -> Option<&'static RawValue> {
    static RAW: LazyLock<Vec<Box<RawValue>>> =
        LazyLock::new(|| LOG_LEVELS.iter().map(crate::wire::raw).collect());
    RAW.get(rank as usize).map(|r| &**r)
}

/// The level to ask the child for, given the sessions' levels: the most verbose one.
pub(super) fn wanted(levels: impl Iterator<Item = Option<u8>>) -> Option<u8> {
    levels.flatten().min()
}

/// Whether a message of `level` goes to a session that asked for `min` (or nothing).
pub(super) fn admits(min: Option<u8>, level: u8) -> bool {
    min.is_none_or(|min| level >= min)
}

pub(super) const USAGE: &str = "logging/setLevel needs a level: debug, info, notice, warning, error, critical, alert or emergency";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_are_ordered() {
        assert!(rank("debug") < rank("error"));
        assert_eq!(rank("nonsense"), None);
        assert_eq!(name(rank("notice").unwrap()), Some("notice"));
        assert_eq!(wanted([Some(3), None, Some(1)].into_iter()), Some(1));
        assert!(admits(None, 0) && admits(Some(1), 1) && !admits(Some(4), 3));
    }
}
