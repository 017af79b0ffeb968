//! Writing files the user owns (`~/.claude.json`, `config.json`, the unit file, the plist):
//! a timestamped backup first, then a temp file in the same directory, fsync, a re-read of the
//! target to catch another program's write, and a rename; the file's permissions are kept.
//! Where another program takes a lock around its own writes (Claude Code's `<file>.lock`, an
//! mkdir lock in the style of npm's proper-lockfile), the re-read and the rename happen under
//! it, and a re-read after the rename makes sure no other program's rename undid the write.
//!
//! This module never writes over a file it could not read or (for JSON) parse, and never
//! changes a file when the new content equals the old. It also owns coogle's own scratch
//! directories (`PrivateDir`), which nobody else may read and which never outlive their use.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::date::timestamp;

/// How many times a write is retried when the file changes under it.
pub const ATTEMPTS: u32 = 5;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    // Read and Write: the I/O error is part of the one-line message (these are shown in ✓/✗
    // lines), not a separate cause, so it is said once.
    #[error("could not read {}: {error}", path.display())]
    Read { path: PathBuf, error: io::Error },
    #[error("could not parse {} at line {line} column {column}: {message}; it was left unchanged", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{} is not a JSON object; it was left unchanged", path.display())]
    NotAnObject { path: PathBuf },
    #[error("could not write {}: {error}", path.display())]
    Write { path: PathBuf, error: io::Error },
    #[error("{} kept changing while coogle tried to update it ({attempts} attempts); it was left as the other program wrote it", path.display())]
    Changed { path: PathBuf, attempts: u32 },
    #[error("{}: {detail}", path.display())]
    Refused { path: PathBuf, detail: String },
    #[error("{} stayed locked by another program ({} held for over {} s); it was left unchanged", path.display(), lock.display(), waited.as_secs())]
    Locked {
        path: PathBuf,
        lock: PathBuf,
        waited: Duration,
    },
}

/// Another program's lock on a file, taken around the final re-read and the rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lock {
    /// Nobody else locks it (coogle's own files, the unit file, the plist).
    None,
    /// `<file>.lock` as a directory, as npm's proper-lockfile makes it: Claude Code 2.1.328
    /// takes it around each write of `~/.claude.json` (mkdir, re-read, write a temp file,
    /// rename, rmdir).
    Mkdir,
}

/// When [`update_with_hook`]'s hook runs (tests play the other program there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// After the new content is ready, before the lock, the re-read and the rename.
    BeforeRename,
    /// After the rename and the unlock, before the re-read that checks the write stayed.
    AfterRename,
}

/// A lock directory untouched for this long was left by a holder that died: proper-lockfile's
/// default stale time, which Claude Code keeps.
pub const LOCK_STALE: Duration = Duration::from_secs(10);
/// How long coogle waits for another program's lock: past [`LOCK_STALE`], so a dead holder's
/// lock is always taken over within the wait, and a live one (held for milliseconds) released.
pub const LOCK_WAIT: Duration = Duration::from_secs(15);

/// A held mkdir lock; dropping it removes the directory.
struct MkdirLock {
    dir: PathBuf,
}

impl MkdirLock {
    /// Take the lock beside `target`, retrying with backoff for up to `wait`; a lock older
    /// than `stale` is taken over.
    fn acquire(target: &Path, wait: Duration, stale: Duration) -> Result<MkdirLock, FsError> {
        let dir = sibling(target, ".lock");
        let deadline = Instant::now() + wait;
        let mut delay = Duration::from_millis(5);
        loop {
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(MkdirLock { dir }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Only a directory we could remove counts as taken over; anything else
                    // (a file of that name, no permission) is waited out like a live lock.
                    if is_stale(&dir, stale) && fs::remove_dir(&dir).is_ok() {
                        tracing::warn!(lock = %dir.display(), "took over a stale lock");
                        continue;
                    }
                }
                Err(e) => return Err(write_err(&dir)(e)),
            }
            if Instant::now() >= deadline {
                return Err(FsError::Locked {
                    path: target.to_path_buf(),
                    lock: dir,
                    waited: wait,
                });
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_millis(200));
        }
    }
}

impl Drop for MkdirLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Untouched for longer than `stale` (a lock dated in the future is not stale).
fn is_stale(lock: &Path, stale: Duration) -> bool {
    fs::symlink_metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > stale)
}

/// The permissions a written file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Keep an existing file's mode; a new file gets this one.
    KeepOr(u32),
    /// Always this mode (config.json, which may hold a client secret: 0600).
    Exactly(u32),
}

impl Mode {
    fn for_path(self, path: &Path) -> u32 {
        match self {
            Mode::KeepOr(m) => mode_of(path).unwrap_or(m),
            Mode::Exactly(m) => m,
        }
    }
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The new content equals the old: nothing was touched.
    Unchanged,
    /// The file was created (there was nothing to back up).
    Created,
    /// The file was replaced; the backup holds the previous bytes exactly.
    Replaced { backup: PathBuf },
}

/// The file a path names, following symlinks (a dotfile manager's link stays a link).
pub fn resolve(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Read a file; `None` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, FsError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(FsError::Read {
            path: path.to_path_buf(),
            error,
        }),
    }
}

/// Why JSON text did not parse: serde_json's message without its own " at line L column C",
/// which every caller's error states once, with the file's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonSyntax {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parse JSON, keeping the position of a failure apart from its message.
pub(crate) fn parse_json_bytes(bytes: &[u8]) -> Result<Value, JsonSyntax> {
    serde_json::from_slice(bytes).map_err(|e| {
        let (line, column) = (e.line(), e.column());
        let full = e.to_string();
        let suffix = format!(" at line {line} column {column}");
        JsonSyntax {
            line,
            column,
            message: full.strip_suffix(&suffix).unwrap_or(&full).to_owned(),
        }
    })
}

/// Parse JSON text, naming the file and position on failure.
pub fn parse_json(bytes: &[u8], path: &Path) -> Result<Value, FsError> {
    parse_json_bytes(bytes).map_err(|s| FsError::Parse {
        path: path.to_path_buf(),
        line: s.line,
        column: s.column,
        message: s.message,
    })
}

fn mode_of(path: &Path) -> Option<u32> {
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{name}{suffix}"))
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> FsError + '_ {
    move |error| FsError::Write {
        path: path.to_path_buf(),
        error,
    }
}

/// Write `bytes` to a new file beside `path` named `<name>.coogle-backup-<timestamp>` (with a
/// counter when that exists), synced. Returns its path. The backup gets `mode` without any
/// group or other bits: it may hold the secrets setup just moved into a 0600 file.
pub fn backup(path: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, FsError> {
    let mode = mode & 0o600;
    let base = sibling(path, &format!(".coogle-backup-{}", timestamp()));
    let mut candidate = base.clone();
    for n in 1.. {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&candidate)
        {
            Ok(mut f) => {
                f.write_all(bytes)
                    .and_then(|_| f.set_permissions(fs::Permissions::from_mode(mode)))
                    .and_then(|_| f.sync_all())
                    .map_err(write_err(&candidate))?;
                return Ok(candidate);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => {
                candidate = sibling(&base, &format!("-{n}"));
            }
            Err(e) => return Err(write_err(&candidate)(e)),
        }
    }
    unreachable!("the loop returns")
}

/// Write a temp file beside `path` with `mode` and sync it; the caller renames it.
fn write_temp(path: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, FsError> {
    let tmp = sibling(
        path,
        &format!(".coogle-tmp-{}-{}", std::process::id(), timestamp()),
    );
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(write_err(&tmp))?;
    let r = f
        .write_all(bytes)
        .and_then(|_| f.set_permissions(fs::Permissions::from_mode(mode)))
        .and_then(|_| f.sync_all());
    if let Err(e) = r {
        let _ = fs::remove_file(&tmp);
        return Err(write_err(&tmp)(e));
    }
    Ok(tmp)
}

fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(d) = fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
}

/// Read-modify-write `path` safely. `transform` gets the current bytes (`None`: no file) and
/// returns the new bytes, or `None` to leave the file alone. A file that exists is backed up
/// (the backup holds exactly the bytes `transform` saw, with the file's mode) before it is
/// replaced; the new file's mode follows `mode`.
///
/// Just before the rename, under `lock`, the file is read again; when another program changed
/// it meanwhile, everything is redone on the new content, with the lock kept so that round
/// cannot be overtaken. After the rename the file is read once more: when another program's
/// rename replaced ours, `transform` runs on what is there now, and the update is done only
/// when that says nothing is left to do (our change survived in their write); otherwise it is
/// written again. `transform` must therefore be idempotent: asked again about its own result,
/// it returns `None`. `hook` runs at each [`Moment`] (tests use it to play the other program).
pub fn update_with_hook(
    path: &Path,
    mode: Mode,
    lock: Lock,
    mut transform: impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, FsError>,
    hook: &mut dyn FnMut(Moment, &Path),
) -> Result<Written, FsError> {
    let target = resolve(path);
    if let Some(dir) = target.parent()
        && !dir.as_os_str().is_empty()
    {
        fs::create_dir_all(dir).map_err(write_err(dir))?;
    }
    // What an earlier round wrote, when another program's rename replaced it right after.
    let mut wrote: Option<Written> = None;
    let mut held: Option<MkdirLock> = None;
    for _ in 0..ATTEMPTS {
        let old = read_optional(&target)?;
        let Some(new) = transform(old.as_deref())? else {
            return Ok(wrote.unwrap_or(Written::Unchanged));
        };
        if old.as_deref() == Some(new.as_slice()) {
            return Ok(wrote.unwrap_or(Written::Unchanged));
        }
        let mode = mode.for_path(&target);
        let backup_path = match &old {
            Some(bytes) => Some(backup(&target, bytes, mode_of(&target).unwrap_or(0o600))?),
            None => None,
        };
        let abandon = |tmp: Option<&Path>| {
            if let Some(t) = tmp {
                let _ = fs::remove_file(t);
            }
            if let Some(b) = &backup_path {
                let _ = fs::remove_file(b);
            }
        };
        let tmp = write_temp(&target, &new, mode).inspect_err(|_| abandon(None))?;
        hook(Moment::BeforeRename, &target);
        if lock == Lock::Mkdir && held.is_none() {
            held = Some(
                MkdirLock::acquire(&target, LOCK_WAIT, LOCK_STALE)
                    .inspect_err(|_| abandon(Some(&tmp)))?,
            );
        }
        let now = read_optional(&target);
        if !matches!(&now, Ok(now) if *now == old) {
            abandon(Some(&tmp));
            now?;
            continue;
        }
        if let Err(e) = fs::rename(&tmp, &target) {
            abandon(Some(&tmp));
            return Err(write_err(&target)(e));
        }
        sync_dir(&target);
        drop(held.take());
        let written = match backup_path {
            Some(backup) => Written::Replaced { backup },
            None => Written::Created,
        };
        hook(Moment::AfterRename, &target);
        if read_optional(&target)?.as_deref() == Some(new.as_slice()) {
            return Ok(written);
        }
        // Another program renamed its own copy over ours (one that does not take the lock, or
        // wrote from what it read before): never report that as done. The next round asks
        // `transform` whether our change is in what is there now.
        tracing::debug!(path = %target.display(), "another program's write replaced ours; checking it");
        wrote = Some(written);
    }
    Err(FsError::Changed {
        path: target,
        attempts: ATTEMPTS,
    })
}

/// [`update_with_hook`] without a hook.
pub fn update(
    path: &Path,
    mode: Mode,
    lock: Lock,
    transform: impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, FsError>,
) -> Result<Written, FsError> {
    update_with_hook(path, mode, lock, transform, &mut |_, _| {})
}

/// Replace a whole file with `bytes` (the unit file, the plist), same guarantees.
pub fn write_file(path: &Path, bytes: &[u8], mode: Mode) -> Result<Written, FsError> {
    update(path, mode, Lock::None, |old| {
        // Asked again after the write (see `update_with_hook`): done when the bytes are there.
        Ok((old != Some(bytes)).then(|| bytes.to_vec()))
    })
}

/// Pretty JSON (two spaces, as Claude Code writes it) with a final newline.
pub fn to_json_bytes(value: &Value) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(value).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Read-modify-write a JSON object file. `edit` gets the parsed document (`None`: no file)
/// and returns the new one, or `None` for no change. An unparsable file, or one whose top
/// level is not an object, is an error and is never written.
pub fn update_json_with_hook(
    path: &Path,
    mode: Mode,
    lock: Lock,
    mut edit: impl FnMut(Option<&Value>) -> Result<Option<Value>, FsError>,
    hook: &mut dyn FnMut(Moment, &Path),
) -> Result<Written, FsError> {
    let target = resolve(path);
    update_with_hook(
        path,
        mode,
        lock,
        |old| {
            let doc = match old {
                Some(bytes) => {
                    let v = parse_json(bytes, &target)?;
                    if !v.is_object() {
                        return Err(FsError::NotAnObject {
                            path: target.clone(),
                        });
                    }
                    Some(v)
                }
                None => None,
            };
            let Some(new) = edit(doc.as_ref())? else {
                return Ok(None);
            };
            if doc.as_ref() == Some(&new) {
                return Ok(None);
            }
            Ok(Some(to_json_bytes(&new)))
        },
        hook,
    )
}

pub fn update_json(
    path: &Path,
    mode: Mode,
    lock: Lock,
    edit: impl FnMut(Option<&Value>) -> Result<Option<Value>, FsError>,
) -> Result<Written, FsError> {
    update_json_with_hook(path, mode, lock, edit, &mut |_, _| {})
}

/// Replace a file coogle alone owns (its setup state): temp file, fsync, rename, no backup.
pub fn write_own(path: &Path, bytes: &[u8], mode: u32) -> Result<(), FsError> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        fs::create_dir_all(dir).map_err(write_err(dir))?;
    }
    let tmp = write_temp(path, bytes, mode)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(write_err(path)(e));
    }
    sync_dir(path);
    Ok(())
}

/// A scratch directory coogle creates for itself (mode 0700: it may hold a socket or a
/// download), removed with everything in it when dropped.
pub(crate) struct PrivateDir {
    pub path: PathBuf,
}

impl PrivateDir {
    /// Create `path` afresh: a stale one (a crashed earlier run) is removed first.
    pub fn create(path: PathBuf) -> io::Result<PrivateDir> {
        use std::os::unix::fs::DirBuilderExt;
        let _ = fs::remove_dir_all(&path);
        fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(PrivateDir { path })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Tighten a file's mode to `mode` when it is looser (never loosens).
pub fn tighten(path: &Path, mode: u32) -> Result<bool, FsError> {
    match mode_of(path) {
        Some(m) if m & !mode != 0 => {
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(write_err(path))?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Remove a file; a missing one is fine.
pub fn remove_optional(path: &Path) -> Result<bool, FsError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(FsError::Write {
            path: path.to_path_buf(),
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mkdir_lock_is_waited_for_taken_over_when_stale_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(".claude.json");
        let lock_dir = dir.path().join(".claude.json.lock");
        let held = MkdirLock::acquire(&target, LOCK_WAIT, LOCK_STALE).unwrap();
        assert!(lock_dir.is_dir());
        let err = MkdirLock::acquire(&target, Duration::from_millis(50), LOCK_STALE)
            .err()
            .unwrap();
        assert!(matches!(err, FsError::Locked { .. }), "{err:?}");
        assert!(err.to_string().contains(".claude.json.lock"), "{err}");
        // Held for longer than the stale time (as if its holder died): taken over.
        let again = MkdirLock::acquire(&target, Duration::from_secs(5), Duration::ZERO).unwrap();
        drop(held);
        drop(again);
        assert!(!lock_dir.exists());
        // A file of that name is no lock coogle may remove: waited out, never deleted.
        fs::write(&lock_dir, b"").unwrap();
        assert!(MkdirLock::acquire(&target, Duration::from_millis(50), Duration::ZERO).is_err());
        assert!(lock_dir.is_file());
    }

    #[test]
    fn backup_names_do_not_collide() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        let a = backup(&p, b"a", 0o600).unwrap();
        let b = backup(&p, b"b", 0o600).unwrap();
        assert_ne!(a, b);
        assert_eq!(fs::read(&a).unwrap(), b"a");
        assert_eq!(fs::read(&b).unwrap(), b"b");
    }
}
