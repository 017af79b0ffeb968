//! What setup records (config.json `path`) so the daemon finds `uvx`, `npx` and `node` whoever
//! starts it (see [`crate::exec_path`]): this shell's PATH (where setup found them), a login
//! shell's PATH, and Homebrew's prefixes on macOS.
//!
//! The login shell matters when setup runs from somewhere other than the user's terminal: on
//! macOS `zsh -l` reads `/etc/zprofile` (path_helper) and `~/.zprofile`, where Homebrew's
//! installer puts `brew shellenv`. It is asked without `-i`: an interactive shell would try to
//! take over the terminal setup is running in. Setup's own recorded entries are kept when they
//! still exist, so running setup from a poorer environment never loses a directory.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::exec_path;
use crate::paths::{Os, Platform};
use crate::process::run_bounded;

/// A login shell that hangs in its profile must not hang setup.
const LOGIN_SHELL_LIMIT: Duration = Duration::from_secs(5);

const MARK: &str = "__COOGLE_PATH__";

/// The directories to record, in search order, each once.
pub(super) fn capture(platform: &Platform) -> Vec<PathBuf> {
    let own = std::env::var_os("PATH");
    let login = login_shell_path(platform);
    let homebrew = match platform.os {
        Os::MacOs => vec![
            PathBuf::from("/opt/homebrew/bin"),
            PathBuf::from("/usr/local/bin"),
        ],
        Os::Linux => Vec::new(),
    };
    exec_path::clean(
        own.iter()
            .flat_map(std::env::split_paths)
            .chain(login.iter().flat_map(std::env::split_paths))
            .chain(homebrew),
    )
}

/// The new record: what was captured, then earlier entries that still exist and were not
/// captured again.
pub(super) fn merge(captured: Vec<PathBuf>, previous: &[PathBuf]) -> Vec<PathBuf> {
    let kept = previous.iter().filter(|d| d.is_dir()).cloned();
    exec_path::clean(captured.into_iter().chain(kept))
}

/// The user's login shell: `$SHELL`, else the OS's default.
fn login_shell(platform: &Platform) -> PathBuf {
    std::env::var_os("SHELL")
        .map(PathBuf::from)
        .filter(|s| s.is_absolute() && s.exists())
        .unwrap_or_else(|| match platform.os {
            Os::MacOs => PathBuf::from("/bin/zsh"),
            Os::Linux => PathBuf::from("/bin/sh"),
        })
}

/// PATH as a login shell sets it; `None` when the shell fails or takes too long.
fn login_shell_path(platform: &Platform) -> Option<OsString> {
    // Marked, because a profile may print its own lines; fish joins a quoted $PATH with ':'.
    let script = format!("printf '\\n{MARK}%s{MARK}\\n' \"$PATH\"");
    let out = run_bounded(
        &login_shell(platform),
        &["-l", "-c", &script],
        LOGIN_SHELL_LIMIT,
    )
    .map_err(|e| tracing::debug!(error = %e, "no PATH from the login shell"))
    .ok()?;
    parse_marked(&out).map(OsString::from)
}

fn parse_marked(out: &str) -> Option<&str> {
    let start = out.find(MARK)? + MARK.len();
    let len = out[start..].find(MARK)?;
    Some(&out[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marked_path_is_found_among_a_profiles_chatter() {
        let out = "Welcome!\n\n__COOGLE_PATH__/a:/b c__COOGLE_PATH__\nbye";
        assert_eq!(parse_marked(out), Some("/a:/b c"));
        assert_eq!(parse_marked("no marks"), None);
    }

    #[test]
    fn a_login_shell_answers() {
        let p = Platform::current();
        let path = login_shell_path(&p).expect("the login shell printed its PATH");
        assert!(
            std::env::split_paths(&path).any(|d| d.is_absolute()),
            "{path:?}"
        );
    }

    #[test]
    fn merge_keeps_what_still_exists() {
        let tmp = tempfile::tempdir().unwrap();
        let kept = tmp.path().to_path_buf();
        let captured = vec![PathBuf::from("/usr/bin")];
        let merged = merge(
            captured,
            &[
                PathBuf::from("/usr/bin"),
                kept.clone(),
                PathBuf::from("/gone/away"),
            ],
        );
        assert_eq!(merged, [PathBuf::from("/usr/bin"), kept]);
    }

    #[test]
    fn macos_adds_both_homebrew_prefixes() {
        let mut p = Platform::current();
        p.os = Os::MacOs;
        let dirs = capture(&p);
        assert!(
            dirs.contains(&PathBuf::from("/opt/homebrew/bin")),
            "{dirs:?}"
        );
        assert!(dirs.contains(&PathBuf::from("/usr/local/bin")), "{dirs:?}");
        // This shell's PATH is in it, in order, before what the login shell adds.
        let own: Vec<PathBuf> = exec_path::clean(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let positions: Vec<usize> = own
            .iter()
            .map(|d| dirs.iter().position(|x| x == d).unwrap())
            .collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]) || own.len() < 2,
            "{dirs:?}"
        );
    }
}
