//! `ask_google`'s `output_file`: writing the answer where the caller asked, and nowhere else.
//!
//! The server is shared by every session (the daemon runs one child for all), so its working
//! directory is nobody's project: a relative path is refused rather than resolved against it
//! (see [`check_path`]). The file is created, never replaced, unless the call says
//! `overwrite: true`; its last component is never followed when it is a symbolic link (a link
//! planted at `answer.md` does not make the answer land in `~/.bashrc`), and a file with other
//! hard links, or something that is not a regular file, is not written. Directories that do
//! not exist yet are created. Directories on the way that are symbolic links are followed, as
//! any program given that path would (on macOS `/tmp` itself is one), and where they led is
//! said in the note that ends the answer.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why `path` is not a place to write to, before anything is asked of Gemini.
pub fn check_path(path: &Path) -> Result<(), String> {
    if !path.is_absolute() {
        return Err(format!(
            "output_file must be an absolute path, not {:?}: this server is shared by every session, so a relative path has no project to be relative to (give e.g. /path/to/your/project/{})",
            path.display().to_string(),
            path.display()
        ));
    }
    if path.file_name().is_none() {
        return Err(format!(
            "output_file {:?} names a directory, not a file",
            path.display().to_string()
        ));
    }
    Ok(())
}

/// Write `text` (and a newline) to `path`; returns where it went.
pub fn write(path: &Path, text: &str, overwrite: bool) -> Result<PathBuf, String> {
    check_path(path)?;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(format!("{} names no file", path.display()));
    };
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("could not create {}: {e}", parent.display()))?;
    let parent = std::fs::canonicalize(parent)
        .map_err(|e| format!("could not resolve {}: {e}", parent.display()))?;
    let target = parent.join(name);
    let mut options = OpenOptions::new();
    options.write(true).create(true);
    if overwrite {
        // Not O_TRUNC: what is there is looked at before a byte of it is lost. Non-blocking, so
        // a FIFO there cannot hang the call.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    } else {
        options.create_new(true).custom_flags(libc::O_NOFOLLOW);
    }
    let mut file = options.open(&target).map_err(|e| match e.raw_os_error() {
        Some(libc::EEXIST) if is_link(&target) => {
            format!(
                "{} is a symbolic link; the answer is not written through it",
                target.display()
            )
        }
        Some(libc::EEXIST) => format!(
            "{} already exists; pass \"overwrite\": true to replace it",
            target.display()
        ),
        Some(libc::ELOOP) => {
            format!(
                "{} is a symbolic link; the answer is not written through it",
                target.display()
            )
        }
        _ => format!("could not write {}: {e}", target.display()),
    })?;
    if overwrite {
        let meta = file
            .metadata()
            .map_err(|e| format!("could not write {}: {e}", target.display()))?;
        if !meta.is_file() {
            return Err(format!(
                "{} is not a regular file; the answer is not written there",
                target.display()
            ));
        }
        if meta.nlink() > 1 {
            return Err(format!(
                "{} has other hard links, which would change with it; not overwritten",
                target.display()
            ));
        }
        file.set_len(0)
            .map_err(|e| format!("could not write {}: {e}", target.display()))?;
    }
    file.write_all(format!("{text}\n").as_bytes())
        .map_err(|e| format!("could not write {}: {e}", target.display()))?;
    Ok(target)
}

fn is_link(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn relative_and_directory_paths_are_refused() {
        let e = check_path(Path::new("notes/a.md")).unwrap_err();
        assert!(e.starts_with("output_file must be an absolute path"), "{e}");
        assert!(e.contains("/path/to/your/project/notes/a.md"), "{e}");
        assert!(
            check_path(Path::new("/"))
                .unwrap_err()
                .contains("names a directory")
        );
        assert!(check_path(Path::new("/tmp/..")).is_err());
        assert!(check_path(Path::new("/tmp/a.md")).is_ok());
    }

    #[test]
    fn never_over_a_file_or_through_a_link_unless_told() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let precious = root.join("precious");
        fs::write(&precious, "keep me").unwrap();
        // New, with its parents.
        let new = root.join("a/b/answer.md");
        assert_eq!(write(&new, "one", false).unwrap(), new);
        assert_eq!(fs::read_to_string(&new).unwrap(), "one\n");
        // Existing: kept, unless overwrite.
        let e = write(&new, "two", false).unwrap_err();
        assert!(
            e.contains("already exists") && e.contains("overwrite"),
            "{e}"
        );
        assert_eq!(fs::read_to_string(&new).unwrap(), "one\n");
        write(&new, "longer second", true).unwrap();
        write(&new, "3", true).unwrap();
        assert_eq!(fs::read_to_string(&new).unwrap(), "3\n");
        // A link in the file's place: never written through, overwrite or not; a dangling one
        // is not created through either.
        let link = root.join("link.md");
        std::os::unix::fs::symlink(&precious, &link).unwrap();
        let dangling = root.join("dangling.md");
        std::os::unix::fs::symlink(root.join("nowhere"), &dangling).unwrap();
        for (path, overwrite) in [
            (&link, false),
            (&link, true),
            (&dangling, false),
            (&dangling, true),
        ] {
            let e = write(path, "evil", overwrite).unwrap_err();
            assert!(e.contains("symbolic link"), "{overwrite}: {e}");
        }
        assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
        assert!(!root.join("nowhere").exists());
        // A hard link to it is not overwritten either.
        let hard = root.join("hard.md");
        fs::hard_link(&precious, &hard).unwrap();
        assert!(
            write(&hard, "evil", true)
                .unwrap_err()
                .contains("hard links")
        );
        assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me");
        // Nor a FIFO (which would block an open for writing) or a directory.
        let fifo = root.join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let e = write(&fifo, "x", true).unwrap_err();
        assert!(
            e.contains("not a regular file") || e.contains("could not write"),
            "{e}"
        );
        assert!(write(&root.join("a"), "x", true).is_err());
        // A symlinked directory on the way is followed, and the real place is returned.
        let real = root.join("real");
        fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, root.join("via")).unwrap();
        assert_eq!(
            write(&root.join("via/x.md"), "x", false).unwrap(),
            real.join("x.md")
        );
    }
}
