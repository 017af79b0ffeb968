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
//!
//! What a killed coogle leaves is recognizable and cleaned up by the next run: a temp file is
//! 0600 until the moment of its rename and carries its writer's pid and start time in its name,
//! and an mkdir lock coogle takes has a record beside it (pid, start time, and which directory
//! it made), so a lock whose coogle is gone is taken over at once instead of after the stale
//! time, while a lock of a live process, or of Claude Code, is only ever waited for. Callers
//! that keep a record of what they change get a say just before the rename
//! ([`update_journaled`]): the record is written first, so a crash between the two is never a
//! change nobody knows of.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::crash_point;
use crate::date::timestamp;
use crate::os;

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

/// A held mkdir lock; dropping it removes the directory (and coogle's record of it).
struct MkdirLock {
    dir: PathBuf,
    owner: PathBuf,
}

/// Who holds an mkdir lock coogle took, written beside it (`<file>.lock.coogle-owner`): never
/// inside, since Claude Code's proper-lockfile removes a stale lock with rmdir, which fails on
/// a directory that is not empty. The directory's identity (device, inode, modification time
/// to the nanosecond) ties the record to the one directory coogle made, so a record left over
/// never speaks for a lock someone else took later.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct LockOwner {
    pid: u32,
    start: Option<u64>,
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl LockOwner {
    fn identity(meta: &fs::Metadata) -> (u64, u64, i64, i64) {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec())
    }

    fn for_dir(dir: &Path) -> Option<LockOwner> {
        let (dev, ino, mtime, mtime_nsec) = Self::identity(&fs::symlink_metadata(dir).ok()?);
        let pid = std::process::id();
        Some(LockOwner {
            pid,
            start: os::process(pid).map(|p| p.start),
            dev,
            ino,
            mtime,
            mtime_nsec,
        })
    }

    /// True when this record describes the directory now at `dir`.
    fn describes(&self, dir: &Path) -> bool {
        fs::symlink_metadata(dir).is_ok_and(|m| {
            m.is_dir() && Self::identity(&m) == (self.dev, self.ino, self.mtime, self.mtime_nsec)
        })
    }

    fn read(path: &Path) -> Option<LockOwner> {
        serde_json::from_slice(&fs::read(path).ok()?).ok()
    }

    fn is_ours(&self) -> bool {
        self.pid == std::process::id() && self.start == own_start()
    }
}

impl MkdirLock {
    /// Take the lock beside `target`, retrying with backoff for up to `wait`; a lock older
    /// than `stale`, or one a coogle process that is gone left, is taken over.
    fn acquire(target: &Path, wait: Duration, stale: Duration) -> Result<MkdirLock, FsError> {
        let dir = sibling(target, ".lock");
        let owner = sibling(target, LOCK_OWNER_SUFFIX);
        let deadline = Instant::now() + wait;
        let mut delay = Duration::from_millis(5);
        loop {
            match fs::create_dir(&dir) {
                Ok(()) => {
                    // Best effort: without the record (a full disk), a crash now costs the
                    // stale time, as for any other program's lock.
                    if let Some(record) = LockOwner::for_dir(&dir) {
                        let _ =
                            write_small(&owner, &serde_json::to_vec(&record).unwrap_or_default());
                    }
                    return Ok(MkdirLock { dir, owner });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Only a directory we could remove counts as taken over; anything else
                    // (a file of that name, no permission) is waited out like a live lock.
                    if take_over_dead_coogle_lock(&dir, &owner) {
                        continue;
                    }
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
        // The directory first: a record left without its directory speaks for nothing.
        let _ = fs::remove_dir(&self.dir);
        if LockOwner::read(&self.owner).is_some_and(|o| o.is_ours()) {
            let _ = fs::remove_file(&self.owner);
        }
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

/// `<file>.lock.coogle-owner`: the record of an mkdir lock coogle holds.
const LOCK_OWNER_SUFFIX: &str = ".lock.coogle-owner";

/// Remove the lock at `dir` when its record proves a coogle process that is gone made it;
/// true when it was removed. A lock without a record (Claude Code's, or coogle's from the
/// instant between its mkdir and its record) is never touched here.
fn take_over_dead_coogle_lock(dir: &Path, owner_path: &Path) -> bool {
    let Some(owner) = LockOwner::read(owner_path) else {
        return false;
    };
    if owner.is_ours() || !owner.describes(dir) || os::still_running(owner.pid, owner.start) {
        return false;
    }
    if fs::remove_dir(dir).is_err() {
        return false;
    }
    let _ = fs::remove_file(owner_path);
    tracing::warn!(lock = %dir.display(), pid = owner.pid, "took over a lock left by a coogle process that is gone");
    true
}

/// Write a small file of coogle's own (0600) in one go.
fn write_small(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
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
                let written = f
                    .write_all(bytes)
                    .and_then(|_| f.set_permissions(fs::Permissions::from_mode(mode)))
                    .and_then(|_| f.sync_all());
                if let Err(e) = written {
                    // A full disk: no half backup is left behind.
                    let _ = fs::remove_file(&candidate);
                    return Err(write_err(&candidate)(e));
                }
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

/// The start time of this process, as [`os::process`] reads it.
fn own_start() -> Option<u64> {
    static START: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *START.get_or_init(|| os::process(std::process::id()).map(|p| p.start))
}

/// `<name>.coogle-tmp-`: every temp file coogle writes beside a file starts so.
const TEMP_INFIX: &str = ".coogle-tmp-";

/// Write a temp file beside `path`, mode 0600 whatever the target's (it may hold a secret the
/// target's mode would show: that mode is given at the rename), and sync it; the caller renames
/// it. Its name says who wrote it (`<name>.coogle-tmp-<pid>-<start>-<time>`), so a run that
/// finds one its writer left when it died removes it ([`sweep`]).
fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf, FsError> {
    let tmp = sibling(
        path,
        &format!(
            "{TEMP_INFIX}{}-{}-{}",
            std::process::id(),
            own_start().unwrap_or(0),
            timestamp()
        ),
    );
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(write_err(&tmp))?;
    let r = f
        .write_all(bytes)
        .and_then(|_| f.set_permissions(fs::Permissions::from_mode(0o600)))
        .and_then(|_| f.sync_all());
    if let Err(e) = r {
        let _ = fs::remove_file(&tmp);
        return Err(write_err(&tmp)(e));
    }
    Ok(tmp)
}

/// Rename the temp file over `target`, giving it `mode` first.
fn install_temp(tmp: &Path, target: &Path, mode: u32) -> Result<(), FsError> {
    fs::set_permissions(tmp, fs::Permissions::from_mode(mode)).map_err(write_err(target))?;
    fs::rename(tmp, target).map_err(write_err(target))
}

/// What [`sweep`] removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    /// Temp files of coogle processes that are gone.
    pub temp_files: Vec<PathBuf>,
    /// An mkdir lock (`<file>.lock`) a coogle process that is gone held.
    pub lock: Option<PathBuf>,
}

impl Swept {
    pub fn is_empty(&self) -> bool {
        self.temp_files.is_empty() && self.lock.is_none()
    }
}

/// Remove what coogle processes that are gone left beside `path`: their temp files (which may
/// hold the secrets of the file they were to replace) and an mkdir lock one of them held
/// (which would make Claude Code wait out its stale time). A temp file or lock of a process
/// still running, or one coogle cannot tie to a process, is left alone.
pub fn sweep(path: &Path) -> Swept {
    let target = resolve(path);
    let mut out = Swept::default();
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return out;
    };
    let prefix = format!("{}{TEMP_INFIX}", name.to_string_lossy());
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let file_name = e.file_name();
            let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
                continue;
            };
            if temp_writer_is_gone(rest) && fs::remove_file(e.path()).is_ok() {
                out.temp_files.push(e.path());
            }
        }
    }
    let lock = sibling(&target, ".lock");
    let owner = sibling(&target, LOCK_OWNER_SUFFIX);
    if take_over_dead_coogle_lock(&lock, &owner) {
        out.lock = Some(lock);
    } else if !lock.exists()
        && LockOwner::read(&owner).is_some_and(|o| !os::still_running(o.pid, o.start))
    {
        // A record whose lock is gone: its coogle died between the rmdir and removing it.
        let _ = fs::remove_file(&owner);
    }
    out
}

/// From the part of a temp file's name after `.coogle-tmp-`: true when the process that wrote
/// it is gone. Names are `<pid>-<start>-<time>` (and `<pid>-<time>` from coogle 0.1, which
/// recorded no start time: then only a pid that runs no process proves it).
fn temp_writer_is_gone(rest: &str) -> bool {
    let mut parts = rest.split('-');
    let Some(pid) = parts.next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    if pid == std::process::id() {
        return false;
    }
    let start = parts
        .next()
        .filter(|s| !s.contains('T'))
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&s| s != 0);
    !os::still_running(pid, start)
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
    transform: impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, FsError>,
    hook: &mut dyn FnMut(Moment, &Path),
) -> Result<Written, FsError> {
    update_journaled(path, mode, lock, transform, &mut |_| Ok(()), hook)
}

/// [`update_with_hook`], with `journal` called in each round once the backup (its path is
/// passed) and the temp file exist and before the lock and the rename: the caller records
/// what the round's `transform` is about to change, so a process killed right after the
/// rename leaves a record the next run can finish. An error from `journal` abandons the write:
/// the file is left as it was, and the temp file and the backup are removed.
pub fn update_journaled(
    path: &Path,
    mode: Mode,
    lock: Lock,
    mut transform: impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, FsError>,
    journal: &mut dyn FnMut(Option<&Path>) -> Result<(), FsError>,
    hook: &mut dyn FnMut(Moment, &Path),
) -> Result<Written, FsError> {
    let target = resolve(path);
    if let Some(dir) = target.parent()
        && !dir.as_os_str().is_empty()
    {
        fs::create_dir_all(dir).map_err(write_err(dir))?;
    }
    let swept = sweep(&target);
    if !swept.is_empty() {
        tracing::info!(path = %target.display(), ?swept, "removed what a coogle process that is gone left");
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
        crash_point::reached("backup");
        let abandon = |tmp: Option<&Path>| {
            if let Some(t) = tmp {
                let _ = fs::remove_file(t);
            }
            if let Some(b) = &backup_path {
                let _ = fs::remove_file(b);
            }
        };
        let tmp = write_temp(&target, &new).inspect_err(|_| abandon(None))?;
        crash_point::reached("temp");
        hook(Moment::BeforeRename, &target);
        journal(backup_path.as_deref()).inspect_err(|_| abandon(Some(&tmp)))?;
        crash_point::reached("journaled");
        if lock == Lock::Mkdir && held.is_none() {
            held = Some(
                MkdirLock::acquire(&target, LOCK_WAIT, LOCK_STALE)
                    .inspect_err(|_| abandon(Some(&tmp)))?,
            );
            crash_point::reached("locked");
        }
        let now = read_optional(&target);
        if !matches!(&now, Ok(now) if *now == old) {
            abandon(Some(&tmp));
            now?;
            continue;
        }
        if let Err(e) = install_temp(&tmp, &target, mode) {
            abandon(Some(&tmp));
            return Err(e);
        }
        sync_dir(&target);
        crash_point::reached("renamed");
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
    edit: impl FnMut(Option<&Value>) -> Result<Option<Value>, FsError>,
    hook: &mut dyn FnMut(Moment, &Path),
) -> Result<Written, FsError> {
    update_json_journaled(path, mode, lock, edit, &mut |_| Ok(()), hook)
}

/// [`update_json_with_hook`] with a journal (see [`update_journaled`]).
pub fn update_json_journaled(
    path: &Path,
    mode: Mode,
    lock: Lock,
    mut edit: impl FnMut(Option<&Value>) -> Result<Option<Value>, FsError>,
    journal: &mut dyn FnMut(Option<&Path>) -> Result<(), FsError>,
    hook: &mut dyn FnMut(Moment, &Path),
) -> Result<Written, FsError> {
    let target = resolve(path);
    update_journaled(
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
        journal,
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
    sweep(path);
    let tmp = write_temp(path, bytes)?;
    crash_point::reached("own-temp");
    if let Err(e) = install_temp(&tmp, path, mode) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(path);
    crash_point::reached("own-renamed");
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

    /// A lock is taken over at once only when coogle's record beside it proves a coogle
    /// process that is gone made that very directory: never a lock without a record (Claude
    /// Code's), one whose maker still runs, or one the record does not describe (a lock someone
    /// else took after a record was left behind).
    #[test]
    fn only_a_dead_coogles_own_lock_is_taken_over_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(".claude.json");
        let lock = dir.path().join(".claude.json.lock");
        let owner = dir.path().join(".claude.json.lock.coogle-owner");
        let wait = Duration::from_millis(100);
        let dead = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            let pid = c.id();
            c.wait().unwrap();
            pid
        };
        let record = |pid: u32, start: Option<u64>| {
            let mut r = LockOwner::for_dir(&lock).unwrap();
            r.pid = pid;
            r.start = start;
            fs::write(&owner, serde_json::to_vec(&r).unwrap()).unwrap();
        };
        let taken = || MkdirLock::acquire(&target, wait, LOCK_STALE).is_ok();

        fs::create_dir(&lock).unwrap();
        assert!(!taken(), "a fresh lock without a record is waited for");
        record(1, os::process(1).map(|p| p.start));
        assert!(!taken(), "a lock whose maker runs is waited for");
        record(dead, None);
        let claude_codes = {
            // The record was left behind; the directory is another program's, made since.
            fs::remove_dir(&lock).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            fs::create_dir(&lock).unwrap();
            lock.clone()
        };
        assert!(
            !taken(),
            "a record that does not describe the lock speaks for nothing"
        );
        assert!(claude_codes.is_dir());
        record(dead, None);
        let held = MkdirLock::acquire(&target, wait, LOCK_STALE).expect("taken over at once");
        let mine = LockOwner::read(&owner).unwrap();
        assert!(mine.is_ours() && mine.describes(&lock), "{mine:?}");
        drop(held);
        assert!(!lock.exists() && !owner.exists());
    }

    #[test]
    fn temp_files_of_dead_writers_are_swept_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f.json");
        let me = std::process::id();
        let start = own_start().unwrap();
        let dead = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            let pid = c.id();
            c.wait().unwrap();
            pid
        };
        let name = |rest: String| dir.path().join(format!("f.json.coogle-tmp-{rest}"));
        let live = name(format!("{me}-{start}-20260101T000000Z"));
        let gone = name(format!("{dead}-{start}-20260101T000000Z"));
        let old_format_gone = name(format!("{dead}-20260101T000000Z"));
        let recycled = name(format!("1-{}-20260101T000000Z", start + 1));
        let other = dir.path().join("g.json.coogle-tmp-1-2-3");
        for f in [&live, &gone, &old_format_gone, &recycled, &other] {
            fs::write(f, b"secret").unwrap();
        }
        // The record of a lock its dead coogle had already removed.
        let orphan = dir.path().join("f.json.lock.coogle-owner");
        let record = LockOwner {
            pid: dead,
            start: None,
            dev: 0,
            ino: 0,
            mtime: 0,
            mtime_nsec: 0,
        };
        fs::write(&orphan, serde_json::to_vec(&record).unwrap()).unwrap();
        let swept = sweep(&target);
        assert!(!orphan.exists());
        let mut removed = swept.temp_files.clone();
        removed.sort();
        let mut want = vec![gone.clone(), old_format_gone.clone(), recycled.clone()];
        want.sort();
        assert_eq!(removed, want);
        assert!(live.exists() && other.exists());
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
