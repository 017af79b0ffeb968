//! Where coogle keeps its socket, lock, pid records, log and cache (and where Claude Desktop
//! keeps its config), and the checks that make the per-user socket directory safe to use.
//! Each path is decided from a [`Platform`] value, so the macOS choices are tested on Linux.
//!
//! This module decides paths and checks ownership; it must never create anything but coogle's
//! own private directories, and it never loosens a permission it did not set.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::os;

/// The longest path a Unix socket address can hold on both Linux and macOS: macOS's `sun_path`
/// is 104 bytes (Linux's 108), one of them the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 103;

/// Shown on one line (inside a refusal, a ✗ line, the daemon's log), so an I/O error is part
/// of the message, not a separate cause.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("could not create {path}: {error}")]
    Create { path: PathBuf, error: io::Error },
    #[error("could not inspect {path}: {error}")]
    Inspect { path: PathBuf, error: io::Error },
    #[error("{path} is a symlink; refusing to use it for the socket directory")]
    Symlink { path: PathBuf },
    #[error("{path} is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("{path} is owned by uid {owner}, not by you (uid {me}); refusing to use it")]
    WrongOwner { path: PathBuf, owner: u32, me: u32 },
    #[error("could not restrict {path} to mode 0700: {error}")]
    Chmod { path: PathBuf, error: io::Error },
    #[error(
        "{path} is mode {mode:03o}: other users can write in it and could replace the socket; refusing to use it"
    )]
    OthersCanWrite { path: PathBuf, mode: u32 },
    #[error(
        "{path} is mode {mode:03o}, open to other users (coogle keeps it 0700); refusing to use it"
    )]
    NotPrivate { path: PathBuf, mode: u32 },
    #[error(
        "socket path {path} is {len} bytes, longer than the {MAX_SOCKET_PATH} a Unix socket allows"
    )]
    TooLong { path: PathBuf, len: usize },
    #[error(
        "{path}, above the socket directory, {why}: they could replace the socket directory and cut every client off; refusing to use it (choose a socketPath below directories only you or root can change, or set XDG_RUNTIME_DIR)"
    )]
    ReplaceableParent { path: PathBuf, why: Replaceable },
}

/// Why a directory above the socket's could be renamed, or emptied, by someone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaceable {
    /// Owned by a user other than you and root.
    Owner(u32),
    /// Writable by every user, without the sticky bit that keeps them off others' entries.
    OthersWrite(u32),
    /// Writable by its group, without the sticky bit (only a warning: the group is often the
    /// user's own).
    GroupWrite(u32),
}

impl std::fmt::Display for Replaceable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Replaceable::Owner(uid) => {
                write!(f, "is owned by {}", os::describe_uid(*uid))
            }
            Replaceable::OthersWrite(mode) => write!(
                f,
                "is mode {mode:04o}, writable by every user without the sticky bit"
            ),
            Replaceable::GroupWrite(mode) => write!(
                f,
                "is mode {mode:04o}, writable by its group without the sticky bit"
            ),
        }
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Whose conventions the paths follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    MacOs,
    /// Linux and every other Unix: the XDG base directories.
    Linux,
}

impl Os {
    /// The OS this binary was built for.
    pub const fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else {
            Os::Linux
        }
    }
}

/// Everything the path decisions read from the machine, in one value: [`Platform::current`]
/// in real use; tests build a macOS one on Linux (and the reverse) so every branch of every
/// path is checked on the machines that run the tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: Os,
    pub uid: u32,
    pub home: PathBuf,
    /// The XDG variables, each only when set to an absolute path.
    pub xdg_runtime_dir: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub xdg_state_home: Option<PathBuf>,
    pub xdg_cache_home: Option<PathBuf>,
    /// macOS's per-user private temporary directory, `confstr(_CS_DARWIN_USER_TEMP_DIR)`
    /// (`/var/folders/xx/…/T/`): mode 0700, owned by the user, and the same for every process
    /// of the user whatever its environment (Terminal, launchd, a GUI app), unlike `$TMPDIR`,
    /// which a minimal environment lacks.
    pub user_temp_dir: Option<PathBuf>,
}

impl Platform {
    /// This process's platform.
    pub fn current() -> Platform {
        let os = Os::current();
        Platform {
            os,
            uid: crate::os::uid(),
            home: home(),
            xdg_runtime_dir: env_path("XDG_RUNTIME_DIR"),
            xdg_config_home: env_path("XDG_CONFIG_HOME"),
            xdg_state_home: env_path("XDG_STATE_HOME"),
            xdg_cache_home: env_path("XDG_CACHE_HOME"),
            user_temp_dir: (os == Os::MacOs).then(crate::os::user_temp_dir).flatten(),
        }
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config` (on macOS too: coogle's config lives where the
    /// other command-line tools' do).
    pub fn config_home(&self) -> PathBuf {
        self.xdg_config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
    }

    /// The default socket: `$XDG_RUNTIME_DIR/coogle/coogle.sock`; else, on macOS, the same in
    /// the per-user temporary directory ([`Platform::user_temp_dir`]), private where `/tmp` is
    /// shared with every user and swept by macOS's periodic cleaning; else (or when that path
    /// would not fit a socket address) `/tmp/coogle-$UID/coogle.sock`.
    pub fn default_socket(&self) -> PathBuf {
        if let Some(dir) = &self.xdg_runtime_dir {
            return dir.join("coogle").join("coogle.sock");
        }
        if self.os == Os::MacOs
            && let Some(tmp) = &self.user_temp_dir
        {
            let socket: PathBuf = tmp
                .join("coogle")
                .join("coogle.sock")
                .components()
                .collect();
            if socket.as_os_str().len() <= MAX_SOCKET_PATH {
                return socket;
            }
        }
        PathBuf::from(format!("/tmp/coogle-{}", self.uid)).join("coogle.sock")
    }

    /// macOS `~/Library/Logs/coogle` (where Console.app looks), elsewhere
    /// `$XDG_STATE_HOME/coogle` (default `~/.local/state/coogle`).
    pub fn log_dir(&self) -> PathBuf {
        match self.os {
            Os::MacOs => self.home.join("Library/Logs/coogle"),
            Os::Linux => self
                .xdg_state_home
                .clone()
                .unwrap_or_else(|| self.home.join(".local/state"))
                .join("coogle"),
        }
    }

    /// macOS `~/Library/Caches/coogle`, elsewhere `$XDG_CACHE_HOME/coogle` (default
    /// `~/.cache/coogle`).
    pub fn cache_dir(&self) -> PathBuf {
        match self.os {
            Os::MacOs => self.home.join("Library/Caches/coogle"),
            Os::Linux => self
                .xdg_cache_home
                .clone()
                .unwrap_or_else(|| self.home.join(".cache"))
                .join("coogle"),
        }
    }

    /// Claude Desktop's config: macOS `~/Library/Application Support/Claude/
    /// claude_desktop_config.json`, elsewhere `$XDG_CONFIG_HOME/Claude/…` (unofficial builds).
    pub fn claude_desktop_config(&self) -> PathBuf {
        let dir = match self.os {
            Os::MacOs => self.home.join("Library/Application Support/Claude"),
            Os::Linux => self.config_home().join("Claude"),
        };
        dir.join("claude_desktop_config.json")
    }
}

/// `$HOME` when it is an absolute path.
pub fn env_home() -> Option<PathBuf> {
    env_path("HOME")
}

/// `$HOME` when it is an absolute path, else the password database's entry for this user (a
/// service or cron job may run without `HOME`), else `/`.
pub fn home() -> PathBuf {
    env_home()
        .or_else(|| os::user_home(os::uid()))
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// [`Platform::config_home`] of this process: where coogle's config, the systemd user unit
/// and Claude Desktop's config (on Linux) live.
pub fn config_home() -> PathBuf {
    Platform::current().config_home()
}

/// [`Platform::default_socket`] of this process.
pub fn default_socket() -> PathBuf {
    Platform::current().default_socket()
}

/// [`Platform::log_dir`] of this process.
pub fn log_dir() -> PathBuf {
    Platform::current().log_dir()
}

pub fn log_file() -> PathBuf {
    log_dir().join("coogle.log")
}

/// [`Platform::cache_dir`] of this process: what the daemon learned from each upstream
/// (initialize result, tool list).
pub fn cache_dir() -> PathBuf {
    Platform::current().cache_dir()
}

/// Files that live beside the socket.
#[derive(Debug, Clone)]
pub struct RuntimePaths {
    pub socket: PathBuf,
    pub dir: PathBuf,
    pub lock: PathBuf,
}

impl RuntimePaths {
    pub fn for_socket(socket: &Path) -> Self {
        let dir = socket
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let stem = socket
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "coogle.sock".into());
        RuntimePaths {
            lock: dir.join(format!("{stem}.lock")),
            socket: socket.to_path_buf(),
            dir,
        }
    }

    /// The record of an upstream child's pid, so a daemon that was SIGKILLed reaps it next start.
    pub fn child_record(&self, upstream: &str) -> PathBuf {
        let stem = self
            .socket
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.dir.join(format!("{stem}.{upstream}.child"))
    }

    pub fn check_length(&self) -> Result<(), PathError> {
        let len = self.socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(PathError::TooLong {
                path: self.socket.clone(),
                len,
            });
        }
        Ok(())
    }
}

/// Create (mode 0700) or verify the socket directory: it must be a real directory owned by
/// this user (see [`check_private_dir`] for its mode).
pub fn ensure_private_dir(dir: &Path) -> Result<(), PathError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Only the last component: its parent ($XDG_RUNTIME_DIR, /tmp, a configured
            // directory) must exist. Recreating a whole missing tree would resurrect a
            // directory someone removed, with a daemon in it nobody can find.
            match fs::DirBuilder::new().mode(0o700).create(dir) {
                // Created just now, so ours to set whatever the umask did.
                Ok(()) => check_dir(dir, true),
                // Another coogle made it between the look and here (ten shims starting at
                // once): checked as one that was there already.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => check_private_dir(dir),
                Err(error) => Err(PathError::Create {
                    path: dir.to_path_buf(),
                    error,
                }),
            }
        }
        Err(error) => Err(PathError::Inspect {
            path: dir.to_path_buf(),
            error,
        }),
        Ok(_) => check_private_dir(dir),
    }
}

/// Verify without creating: symlink, type, owner. coogle's own socket directory is tightened
/// to 0700; any other directory (a `socketPath` in `$HOME`, say) is the user's, so its mode is
/// never changed: it is refused when others can write in it, else used as it is.
pub fn check_private_dir(dir: &Path) -> Result<(), PathError> {
    check_dir(dir, is_coogles_dir(dir))
}

fn check_dir(dir: &Path, ours: bool) -> Result<(), PathError> {
    let mode = owned_dir(dir)?.mode() & 0o777;
    if ours && mode != 0o700 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|error| {
            PathError::Chmod {
                path: dir.to_path_buf(),
                error,
            }
        })?;
    } else if !ours && mode & 0o022 != 0 {
        return Err(PathError::OthersCanWrite {
            path: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// A client's check of the socket directory before it connects, the daemon's rules without
/// ever changing anything: whoever can create or replace the socket could read every request
/// (and the hello, which names the session). coogle's own directory must be private, any other
/// must at least not be writable by others.
pub fn verify_private_dir(dir: &Path) -> Result<(), PathError> {
    verify_dir(dir, is_coogles_dir(dir))
}

fn verify_dir(dir: &Path, ours: bool) -> Result<(), PathError> {
    let mode = owned_dir(dir)?.mode() & 0o777;
    if ours && mode & 0o077 != 0 {
        return Err(PathError::NotPrivate {
            path: dir.to_path_buf(),
            mode,
        });
    }
    if mode & 0o022 != 0 {
        return Err(PathError::OthersCanWrite {
            path: dir.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// The directories above `dir` (the socket directory) that someone else could rename, with
/// the reason: whoever can rename one can put a directory of their own in the socket
/// directory's place, and every client then refuses it (the socket directory check), so the
/// daemon is unreachable. A directory is safe when only you or root own it and, if others may
/// write in it, the sticky bit keeps them to their own entries (as on `/tmp`). Both the path
/// as written and the one its symlinks lead to are checked.
pub fn replaceable_parents(dir: &Path) -> Vec<(PathBuf, Replaceable)> {
    let me = os::uid();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let canonical = fs::canonicalize(dir).ok();
    let written = dir.ancestors().skip(1).map(Path::to_path_buf);
    let resolved = canonical.iter().flat_map(|c| {
        c.ancestors()
            .skip(1)
            .map(Path::to_path_buf)
            .collect::<Vec<_>>()
    });
    for up in written.chain(resolved) {
        if up.as_os_str().is_empty() || !seen.insert(up.clone()) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&up) else {
            continue;
        };
        let mode = meta.mode() & 0o7777;
        let sticky = mode & 0o1000 != 0;
        let why = if meta.uid() != me && meta.uid() != 0 {
            Some(Replaceable::Owner(meta.uid()))
        } else if meta.is_dir() && mode & 0o002 != 0 && !sticky {
            Some(Replaceable::OthersWrite(mode))
        } else if meta.is_dir() && mode & 0o020 != 0 && !sticky {
            Some(Replaceable::GroupWrite(mode))
        } else {
            None
        };
        if let Some(why) = why {
            out.push((up, why));
        }
    }
    out
}

/// The daemon's check of the directories above its socket's: an error for the first that
/// another user controls (owner, or writable by all), and the group-writable ones to warn of.
pub fn check_parents(dir: &Path) -> Result<Vec<(PathBuf, Replaceable)>, PathError> {
    let (warn, refuse): (Vec<_>, Vec<_>) = replaceable_parents(dir)
        .into_iter()
        .partition(|(_, why)| matches!(why, Replaceable::GroupWrite(_)));
    match refuse.into_iter().next() {
        Some((path, why)) => Err(PathError::ReplaceableParent { path, why }),
        None => Ok(warn),
    }
}

/// coogle's own socket directory: the default one, which coogle creates and may tighten.
fn is_coogles_dir(dir: &Path) -> bool {
    default_socket().parent() == Some(dir)
}

/// A real directory (not a symlink) owned by this user.
fn owned_dir(dir: &Path) -> Result<fs::Metadata, PathError> {
    let meta = fs::symlink_metadata(dir).map_err(|error| PathError::Inspect {
        path: dir.to_path_buf(),
        error,
    })?;
    if meta.file_type().is_symlink() {
        return Err(PathError::Symlink {
            path: dir.to_path_buf(),
        });
    }
    if !meta.is_dir() {
        return Err(PathError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let me = os::uid();
    if meta.uid() != me {
        return Err(PathError::WrongOwner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_private_dir_and_tightens_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("coogle");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        check_dir(&dir, true).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    }

    /// Regression: `socketPath: ~/coogle.sock` chmodded $HOME to 0700.
    #[test]
    fn a_directory_coogle_did_not_create_keeps_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        fs::create_dir(&home).unwrap();
        let mode = |m: u32| fs::set_permissions(&home, fs::Permissions::from_mode(m)).unwrap();
        mode(0o755);
        ensure_private_dir(&home).unwrap();
        assert_eq!(fs::metadata(&home).unwrap().mode() & 0o777, 0o755);
        verify_private_dir(&home).unwrap();
        mode(0o775);
        for result in [ensure_private_dir(&home), verify_private_dir(&home)] {
            assert!(
                matches!(result, Err(PathError::OthersCanWrite { mode: 0o775, .. })),
                "{result:?}"
            );
        }
        assert_eq!(fs::metadata(&home).unwrap().mode() & 0o777, 0o775);
    }

    /// A client never changes a mode: coogle's own directory, loosened, is refused.
    #[test]
    fn clients_verify_without_changing_anything() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        verify_private_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
        assert!(matches!(
            verify_dir(&dir, true),
            Err(PathError::NotPrivate { mode: 0o750, .. })
        ));
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o750);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(
            verify_private_dir(&link),
            Err(PathError::Symlink { .. })
        ));
        assert!(matches!(
            verify_private_dir(&tmp.path().join("absent")),
            Err(PathError::Inspect { .. })
        ));
    }

    #[test]
    fn parents_others_could_rename_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("top");
        let dir = top.join("coogle");
        fs::create_dir_all(&dir).unwrap();
        let mode = |m| fs::set_permissions(&top, fs::Permissions::from_mode(m)).unwrap();
        let about_top = |d: &Path| {
            replaceable_parents(d)
                .into_iter()
                .filter(|(p, _)| p == &top)
                .map(|(_, why)| why)
                .collect::<Vec<_>>()
        };
        mode(0o755);
        assert_eq!(about_top(&dir), []);
        mode(0o1777);
        assert_eq!(about_top(&dir), [], "sticky, as /tmp");
        mode(0o777);
        assert_eq!(about_top(&dir), [Replaceable::OthersWrite(0o777)]);
        assert!(matches!(
            check_parents(&dir),
            Err(PathError::ReplaceableParent { .. })
        ));
        mode(0o775);
        assert_eq!(about_top(&dir), [Replaceable::GroupWrite(0o775)]);
        assert!(check_parents(&dir).is_ok_and(|w| w.iter().any(|(p, _)| p == &top)));
    }

    #[test]
    fn never_recreates_a_missing_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("gone").join("coogle");
        assert!(matches!(
            ensure_private_dir(&dir),
            Err(PathError::Create { .. })
        ));
        assert!(!tmp.path().join("gone").exists());
    }

    #[test]
    fn refuses_symlink_and_file() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(matches!(
            ensure_private_dir(&link),
            Err(PathError::Symlink { .. })
        ));
        let file = tmp.path().join("file");
        fs::write(&file, b"").unwrap();
        assert!(matches!(
            ensure_private_dir(&file),
            Err(PathError::NotADirectory { .. })
        ));
    }

    fn platform(os: Os) -> Platform {
        Platform {
            os,
            uid: 501,
            home: PathBuf::from("/Users/ada"),
            xdg_runtime_dir: None,
            xdg_config_home: None,
            xdg_state_home: None,
            xdg_cache_home: None,
            user_temp_dir: None,
        }
    }

    /// What `confstr(_CS_DARWIN_USER_TEMP_DIR)` answers on a Mac (trailing slash included).
    const MAC_TEMP: &str = "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/";

    #[test]
    fn macos_paths() {
        let mut mac = platform(Os::MacOs);
        mac.user_temp_dir = Some(PathBuf::from(MAC_TEMP));
        assert_eq!(
            mac.default_socket(),
            Path::new("/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/coogle/coogle.sock")
        );
        assert_eq!(mac.log_dir(), Path::new("/Users/ada/Library/Logs/coogle"));
        assert_eq!(
            mac.cache_dir(),
            Path::new("/Users/ada/Library/Caches/coogle")
        );
        assert_eq!(
            mac.claude_desktop_config(),
            Path::new("/Users/ada/Library/Application Support/Claude/claude_desktop_config.json")
        );
        assert_eq!(mac.config_home(), Path::new("/Users/ada/.config"));
        // XDG_STATE_HOME and XDG_CACHE_HOME do not move macOS's Library folders.
        mac.xdg_state_home = Some(PathBuf::from("/x/state"));
        mac.xdg_cache_home = Some(PathBuf::from("/x/cache"));
        assert_eq!(mac.log_dir(), Path::new("/Users/ada/Library/Logs/coogle"));
        assert_eq!(
            mac.cache_dir(),
            Path::new("/Users/ada/Library/Caches/coogle")
        );
        // An explicit XDG_RUNTIME_DIR wins on macOS too.
        mac.xdg_runtime_dir = Some(PathBuf::from("/run/ada"));
        assert_eq!(
            mac.default_socket(),
            Path::new("/run/ada/coogle/coogle.sock")
        );
        // Without the per-user directory (confstr failed): the uid's directory in /tmp.
        let bare = platform(Os::MacOs);
        assert_eq!(
            bare.default_socket(),
            Path::new("/tmp/coogle-501/coogle.sock")
        );
    }

    #[test]
    fn a_deep_temp_dir_never_makes_a_socket_path_too_long() {
        let mut mac = platform(Os::MacOs);
        // 84 bytes of directory: with "/coogle/coogle.sock" it is 103, the most that fits.
        let fits = format!("/private/var/folders/{}/T", "a".repeat(84 - 23));
        assert_eq!(fits.len(), 84);
        mac.user_temp_dir = Some(PathBuf::from(&fits));
        let socket = mac.default_socket();
        assert_eq!(socket.as_os_str().len(), MAX_SOCKET_PATH);
        assert!(socket.starts_with(&fits));
        // One byte deeper and it falls back to the short /tmp path, which always fits.
        mac.user_temp_dir = Some(PathBuf::from(format!("{fits}b")));
        let socket = mac.default_socket();
        assert_eq!(socket, Path::new("/tmp/coogle-501/coogle.sock"));
        RuntimePaths::for_socket(&socket).check_length().unwrap();
    }

    #[test]
    fn linux_paths() {
        let mut linux = platform(Os::Linux);
        linux.home = PathBuf::from("/home/ada");
        // The macOS directory, were it somehow known, is not used on Linux.
        linux.user_temp_dir = Some(PathBuf::from(MAC_TEMP));
        assert_eq!(
            linux.default_socket(),
            Path::new("/tmp/coogle-501/coogle.sock")
        );
        assert_eq!(linux.log_dir(), Path::new("/home/ada/.local/state/coogle"));
        assert_eq!(linux.cache_dir(), Path::new("/home/ada/.cache/coogle"));
        assert_eq!(
            linux.claude_desktop_config(),
            Path::new("/home/ada/.config/Claude/claude_desktop_config.json")
        );
        linux.xdg_runtime_dir = Some(PathBuf::from("/run/user/501"));
        linux.xdg_state_home = Some(PathBuf::from("/s"));
        linux.xdg_cache_home = Some(PathBuf::from("/c"));
        linux.xdg_config_home = Some(PathBuf::from("/cfg"));
        assert_eq!(
            linux.default_socket(),
            Path::new("/run/user/501/coogle/coogle.sock")
        );
        assert_eq!(linux.log_dir(), Path::new("/s/coogle"));
        assert_eq!(linux.cache_dir(), Path::new("/c/coogle"));
        assert_eq!(
            linux.claude_desktop_config(),
            Path::new("/cfg/Claude/claude_desktop_config.json")
        );
    }

    /// On the machine running the tests: the platform it was built for, and on a Mac a real
    /// per-user directory that is private and ours.
    #[test]
    fn current_platform() {
        let p = Platform::current();
        assert_eq!(p.os, Os::current());
        assert_eq!(p.uid, os::uid());
        match p.os {
            Os::Linux => assert_eq!(p.user_temp_dir, None),
            Os::MacOs => {
                let dir = p.user_temp_dir.expect("confstr(_CS_DARWIN_USER_TEMP_DIR)");
                let meta = fs::metadata(&dir).unwrap();
                assert_eq!(meta.uid(), os::uid());
                assert_eq!(meta.mode() & 0o077, 0, "{}", dir.display());
            }
        }
    }

    #[test]
    fn runtime_paths_sit_beside_the_socket() {
        let p = RuntimePaths::for_socket(Path::new("/run/user/1/coogle/coogle.sock"));
        assert_eq!(p.lock, Path::new("/run/user/1/coogle/coogle.sock.lock"));
        assert_eq!(
            p.child_record("google"),
            Path::new("/run/user/1/coogle/coogle.sock.google.child")
        );
        let long = PathBuf::from(format!("/tmp/{}/c.sock", "x".repeat(120)));
        assert!(RuntimePaths::for_socket(&long).check_length().is_err());
    }
}
