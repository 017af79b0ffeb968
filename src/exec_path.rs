//! The PATH an upstream's command is found in and runs under, and the PATH an MCP client runs
//! coogle's own entry with.
//!
//! A daemon's environment depends on who started it: a login shell's PATH when a terminal's
//! `coogle mcp` started it, `/usr/bin:/bin:/usr/sbin:/sbin` when Claude Desktop's did (macOS
//! gives GUI apps no more), whatever the unit or plist says under systemd or launchd. So the
//! daemon does not rely on it: `coogle setup` records the user's PATH in config.json (`path`),
//! and the daemon searches that, then the places `uv`, Homebrew and the system put programs;
//! its own PATH only while nothing is recorded. The child gets the same PATH, since `npx` finds `node` (and `uvx`
//! finds its Python) through it. `coogle doctor` checks a command against the worst case: the
//! recorded PATH plus a GUI app's.
//!
//! Only absolute directories are ever searched: an empty or relative PATH entry would let the
//! working directory choose the program.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::paths::{Os, Platform};

/// The PATH macOS gives GUI apps (Claude Desktop) and launchd jobs without their own:
/// `launchctl getenv PATH` / `/etc/paths` minus what shells add.
pub const GUI_PATH: &str = "/usr/bin:/bin:/usr/sbin:/sbin";

/// Where programs upstreams run are commonly installed, searched after the recorded and the
/// inherited PATH: uv's and pipx's default (`~/.local/bin`), Homebrew's on Apple silicon and
/// on Intel (also where the macOS pkg and most Linux source installs go), and the system's.
pub fn fallback_dirs(platform: &Platform) -> Vec<PathBuf> {
    let mut dirs = vec![platform.home.join(".local/bin")];
    if platform.os == Os::MacOs {
        dirs.push(PathBuf::from("/opt/homebrew/bin"));
    }
    dirs.push(PathBuf::from("/usr/local/bin"));
    dirs.extend(std::env::split_paths(GUI_PATH));
    dirs
}

/// The absolute entries of a PATH-like list, in order, each once.
pub fn clean<I, P>(dirs: I) -> Vec<PathBuf>
where
    I: IntoIterator<Item = P>,
    P: Into<PathBuf>,
{
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let dir: PathBuf = dir.into();
        if dir.is_absolute() && !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

/// The daemon's search path for upstream commands: what setup recorded, then
/// [`fallback_dirs`]. The daemon's own PATH (`inherited`) counts only when nothing is recorded:
/// it is whichever client started the daemon's (a project's direnv `PATH_add` included), and
/// what a child finds must not depend on that.
pub fn daemon_path(
    recorded: &[PathBuf],
    inherited: Option<&OsStr>,
    platform: &Platform,
) -> OsString {
    let inherited = inherited
        .filter(|_| recorded.is_empty())
        .map(std::env::split_paths)
        .into_iter()
        .flatten();
    let dirs = clean(
        recorded
            .iter()
            .cloned()
            .chain(inherited)
            .chain(fallback_dirs(platform)),
    );
    // Joining fails only for an entry holding ':'; such an entry is dropped rather than
    // allowed to split into two.
    std::env::join_paths(dirs.iter().filter(|d| std::env::join_paths([d]).is_ok()))
        .unwrap_or_default()
}

/// The program `command` names: itself when it holds a `/` (relative to `cwd`), else the
/// first executable of that name in `path`'s directories.
pub fn resolve(command: &str, path: &OsStr, cwd: Option<&Path>) -> Option<PathBuf> {
    if command.contains('/') {
        let p = match cwd {
            Some(cwd) => cwd.join(command),
            None => PathBuf::from(command),
        };
        return is_executable(&p).then_some(p);
    }
    let path = std::env::join_paths(clean(std::env::split_paths(path))).ok()?;
    let cwd = cwd.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    which::which_in(command, Some(path), cwd).ok()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn platform(os: Os) -> Platform {
        let mut p = Platform::current();
        p.os = os;
        p.home = PathBuf::from("/Users/ada");
        p
    }

    #[test]
    fn recorded_then_fallbacks_each_once_inherited_only_without_a_record() {
        let recorded = [
            PathBuf::from("/Users/ada/.local/bin"),
            PathBuf::from("/opt/homebrew/bin"),
        ];
        let path = daemon_path(
            &recorded,
            Some(OsStr::new("/usr/bin:relative::/bin:/custom")),
            &platform(Os::MacOs),
        );
        assert_eq!(
            path,
            "/Users/ada/.local/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "the starter's /custom is not searched once a PATH is recorded"
        );
        // Linux has no /opt/homebrew fallback; nothing recorded keeps the inherited order first.
        let path = daemon_path(&[], Some(OsStr::new("/usr/bin:/bin")), &platform(Os::Linux));
        assert_eq!(
            path,
            "/usr/bin:/bin:/Users/ada/.local/bin:/usr/local/bin:/usr/sbin:/sbin"
        );
        let path = daemon_path(&[], None, &platform(Os::MacOs));
        assert_eq!(
            path,
            "/Users/ada/.local/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        );
    }

    #[test]
    fn resolves_in_the_given_path_only() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("fake-uvx");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = bin.join("not-executable");
        std::fs::write(&plain, "").unwrap();

        let with = std::env::join_paths([Path::new("/usr/bin"), &bin]).unwrap();
        assert_eq!(resolve("fake-uvx", &with, None), Some(tool.clone()));
        assert_eq!(resolve("fake-uvx", OsStr::new(GUI_PATH), None), None);
        assert_eq!(resolve("not-executable", &with, None), None);
        // A path is taken as it is, relative to the working directory.
        assert_eq!(
            resolve(tool.to_str().unwrap(), OsStr::new(""), None),
            Some(tool.clone())
        );
        assert_eq!(
            resolve("bin/fake-uvx", OsStr::new(""), Some(tmp.path())),
            Some(tmp.path().join("bin/fake-uvx"))
        );
        // A relative PATH entry is never searched, whatever the working directory.
        assert_eq!(
            resolve("fake-uvx", OsStr::new("bin"), Some(tmp.path())),
            None
        );
    }
}
