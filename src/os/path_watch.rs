//! Being told when a path may no longer lead to the entry it led to: the entry removed,
//! replaced or renamed away; its directory or any directory above it removed or renamed; a
//! symlink on the way removed or re-pointed; a file system mounted over the way. The daemon
//! watches its socket's path this way, so a quiet daemon need not look every few seconds, and
//! a socket nobody can reach any more is seen at once (Linux: inotify and the mount table).
//! Where the OS cannot tell, [`PathWatch::new`] says so and the caller keeps looking now and
//! then.

use std::ffi::OsStr;
use std::io;
use std::path::Path;

#[cfg(target_os = "linux")]
use super::platform::PathSource;

/// The path to one entry, watched. Made and awaited inside a tokio runtime.
pub struct PathWatch(PathSource);

/// Not watched on macOS yet (a kqueue's `EVFILT_VNODE` could), nor elsewhere: never made, the
/// caller polls.
#[cfg(not(target_os = "linux"))]
enum PathSource {}

#[cfg(not(target_os = "linux"))]
impl PathSource {
    fn open(_dir: &Path, _name: &OsStr, _mount_table: bool) -> io::Result<Option<PathSource>> {
        Ok(None)
    }

    fn left_out(&self) -> &[std::path::PathBuf] {
        match *self {}
    }

    async fn changed(&mut self) -> io::Result<()> {
        match *self {}
    }
}

impl PathWatch {
    /// Watch the path to the entry `name` of `dir`. `Ok(None)` where this OS cannot tell (the
    /// caller polls instead). An error where the entry or its directory cannot be watched; a
    /// directory above that cannot be (not readable) is left out, and so is what lies beyond a
    /// symlink's target's own symlinks: the caller's occasional look still covers those.
    pub fn new(dir: &Path, name: &OsStr) -> io::Result<Option<PathWatch>> {
        Ok(PathSource::open(dir, name, true)?.map(PathWatch))
    }

    /// The same without the mount table: for tests, which must not be woken by whatever mounts
    /// the machine makes meanwhile.
    #[cfg(all(test, target_os = "linux"))]
    fn without_mounts(dir: &Path, name: &OsStr) -> io::Result<Option<PathWatch>> {
        Ok(PathSource::open(dir, name, false)?.map(PathWatch))
    }

    /// The directories and symlinks on the way that could not be watched (not readable by this
    /// user, or past the OS's limit of watches): only the caller's occasional look sees them.
    pub fn left_out(&self) -> &[std::path::PathBuf] {
        self.0.left_out()
    }

    /// Resolves once the path may lead elsewhere since the last call (what changed is for the
    /// caller to look at); other entries of the directories on the way coming and going do
    /// not resolve it, and mounts anywhere do. After the entry or a directory on the way is
    /// gone, it may never resolve again.
    pub async fn changed(&mut self) -> io::Result<()> {
        self.0.changed().await
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// `dir` renamed is told; it is then put back.
    async fn told_when_renamed(mut w: PathWatch, dir: &Path, what: &str) {
        let aside = dir.with_extension("aside");
        std::fs::rename(dir, &aside).unwrap();
        assert!(changed(&mut w).await, "{what}");
        std::fs::rename(&aside, dir).unwrap();
    }

    async fn changed(w: &mut PathWatch) -> bool {
        tokio::time::timeout(Duration::from_millis(200), w.changed())
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The entry removed, replaced or renamed away is told, once for all that happened
    /// meanwhile, and so is its directory removed; a write to it, other entries coming and
    /// going, and quiet are not.
    #[tokio::test]
    async fn the_entry_going_is_told_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let (f, g) = (dir.path().join("f"), dir.path().join("g"));
        let watch = || {
            PathWatch::without_mounts(dir.path(), OsStr::new("f"))
                .unwrap()
                .expect("inotify")
        };
        std::fs::write(&f, "a").unwrap();
        let mut w = watch();
        assert!(!changed(&mut w).await, "quiet");
        std::fs::write(&f, "more").unwrap();
        assert!(!changed(&mut w).await, "a write to it");
        for i in 0..1000 {
            let other = dir.path().join(format!("other-{i}"));
            std::fs::write(&other, "").unwrap();
            std::fs::remove_file(&other).unwrap();
        }
        assert!(!changed(&mut w).await, "other entries");
        std::fs::remove_file(&f).unwrap();
        assert!(changed(&mut w).await, "removed");
        std::fs::write(&f, "b").unwrap();
        let mut w = watch();
        std::fs::write(&g, "c").unwrap();
        std::fs::rename(&g, &f).unwrap();
        assert!(changed(&mut w).await, "replaced");
        let mut w = watch();
        std::fs::rename(&f, &g).unwrap();
        std::fs::rename(&g, &f).unwrap();
        assert!(changed(&mut w).await, "renamed away and back");
        assert!(!changed(&mut w).await, "told once for all of it");
        drop(dir);
        assert!(changed(&mut w).await, "the directory removed");
    }

    /// The way to the entry: its own directory or one above renamed, a symlink on the way
    /// (absolute, relative, or met inside another's target) re-pointed or removed, a directory
    /// above a symlink or above its target renamed. Entries coming and going beside each
    /// directory and each symlink on the way are not told.
    #[tokio::test]
    async fn the_way_to_the_entry_changing_is_told_and_nothing_beside_it() {
        let root = tempfile::tempdir().unwrap();
        let at = |p: &str| root.path().join(p);
        for d in ["top/mid/run", "targets/one/run", "targets/two/run"] {
            std::fs::create_dir_all(at(d)).unwrap();
        }
        for f in ["top/mid/run/s", "targets/one/run/s", "targets/two/run/s"] {
            std::fs::write(at(f), "").unwrap();
        }
        let watch = |dir: &str| {
            PathWatch::without_mounts(&at(dir), OsStr::new("s"))
                .unwrap()
                .expect("inotify")
        };
        let busy = |dir: &str| {
            for i in 0..200 {
                let other = at(dir).join(format!("other-{i}"));
                std::fs::write(&other, "").unwrap();
                std::fs::remove_file(&other).unwrap();
            }
        };
        let link = |target: &str, name: &str| {
            let new = at(&format!("{name}.new"));
            std::os::unix::fs::symlink(target, &new).unwrap();
            std::fs::rename(&new, at(name)).unwrap();
        };

        let mut w = watch("top/mid/run");
        busy("top");
        busy("top/mid");
        busy("top/mid/run");
        assert!(
            !changed(&mut w).await,
            "other entries of the directories on the way"
        );
        let w = watch("top/mid/run");
        told_when_renamed(w, &at("top/mid/run"), "its own directory renamed").await;
        let w = watch("top/mid/run");
        told_when_renamed(w, &at("top"), "a directory two above renamed").await;
        let mut w = watch("top/mid/run");
        std::fs::rename(at("top/mid"), at("mid-elsewhere")).unwrap();
        assert!(changed(&mut w).await, "the directory above moved out");

        // A symlink on the way: `via/link/run/s`, where `link` → `targets/one`.
        std::fs::create_dir(at("via")).unwrap();
        link(at("targets/one").to_str().unwrap(), "via/link");
        let mut w = watch("via/link/run");
        busy("via");
        assert!(!changed(&mut w).await, "other entries beside the symlink");
        link(at("targets/two").to_str().unwrap(), "via/link");
        assert!(changed(&mut w).await, "the symlink re-pointed");
        let mut w = watch("via/link/run");
        std::fs::remove_file(at("via/link")).unwrap();
        assert!(changed(&mut w).await, "the symlink removed");
        link("../targets/two", "via/link");
        let w = watch("via/link/run");
        let what = "the directory above a relative symlink renamed";
        told_when_renamed(w, &at("via"), what).await;
        let w = watch("via/link/run");
        let what = "a directory above the symlink's target renamed";
        told_when_renamed(w, &at("targets"), what).await;

        // A symlink inside a symlink's target: `via/link` → `current` → `targets/one`.
        link("current", "via/link");
        link("../targets/one", "via/current");
        let mut w = watch("via/link/run");
        busy("via");
        assert!(!changed(&mut w).await, "quiet beside two symlinks");
        link("../targets/two", "via/current");
        assert!(changed(&mut w).await, "the inner symlink re-pointed");
    }
}
