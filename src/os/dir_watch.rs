//! Being told when an entry of a directory may have changed: removed, replaced, renamed away,
//! or the directory itself removed or renamed. The daemon watches its socket this way
//! so that a quiet daemon need not look every few seconds (Linux: inotify). Where the OS
//! cannot tell, [`DirWatch::new`] says so and the caller keeps looking now and then.

use std::ffi::OsStr;
use std::io;
use std::path::Path;

#[cfg(target_os = "linux")]
use super::platform::DirSource;

/// One entry of a directory, watched. Made and awaited inside a tokio runtime.
pub struct DirWatch(DirSource);

/// Not watched on macOS yet (a kqueue's `EVFILT_VNODE` could), nor elsewhere: never made, the
/// caller polls.
#[cfg(not(target_os = "linux"))]
enum DirSource {}

#[cfg(not(target_os = "linux"))]
impl DirSource {
    fn open(_dir: &Path, _name: &OsStr) -> io::Result<Option<DirSource>> {
        Ok(None)
    }

    async fn changed(&mut self) -> io::Result<()> {
        match *self {}
    }
}

impl DirWatch {
    /// Watch the entry `name` of `dir`. `Ok(None)` where this OS cannot tell (the caller polls
    /// instead).
    pub fn new(dir: &Path, name: &OsStr) -> io::Result<Option<DirWatch>> {
        Ok(DirSource::open(dir, name)?.map(DirWatch))
    }

    /// Resolves once the entry may have changed since the last call (what changed is for the
    /// caller to look at); other entries coming and going do not wake it. After the entry or
    /// the directory is gone, it may never resolve again.
    pub async fn changed(&mut self) -> io::Result<()> {
        self.0.changed().await
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn changed(w: &mut DirWatch) -> bool {
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
            DirWatch::new(dir.path(), OsStr::new("f"))
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
}
