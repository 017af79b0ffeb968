//! Putting a verified archive's binary in place: unpack it, run the new binary's `--version`
//! (bounded) and check it names the release, then swap it in with a rename in the target's own
//! directory, so the target is always either the old binary or the whole new one.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::release::Release;
use crate::error::InstallError;
use crate::output;
use crate::process::wait_or_kill;

/// Unpack the archive into `dir` and check that its binary runs and is `release`; returns the
/// binary's path.
pub(super) fn unpack_and_check(
    archive: &Path,
    dir: &Path,
    release: &Release,
) -> Result<PathBuf, InstallError> {
    let unpacked = dir.join("unpacked");
    self_update::Extract::from_source(archive)
        .archive(self_update::ArchiveKind::Tar(Some(
            self_update::Compression::Gz,
        )))
        .extract_into(&unpacked)
        .map_err(|source| InstallError::Unpack {
            asset: release.asset.clone(),
            source,
        })?;
    let new_bin = find_binary(&unpacked).ok_or_else(|| InstallError::NoBinary {
        asset: release.asset.clone(),
    })?;
    let said = run_version(&new_bin)?;
    if !said.split_whitespace().any(|w| w == release.version) {
        return Err(InstallError::NewBinaryWrongVersion {
            said,
            version: release.version.clone(),
        });
    }
    output::out(&format!("the new binary runs: {said}"));
    Ok(new_bin)
}

/// The `coogle` file in the unpacked archive: at its top, or one directory down.
fn find_binary(dir: &Path) -> Option<PathBuf> {
    let direct = dir.join("coogle");
    if direct.is_file() {
        return Some(direct);
    }
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path().join("coogle"))
        .find(|p| p.is_file())
}

/// Run `<bin> --version` (bounded) and return its first line.
fn run_version(bin: &Path) -> Result<String, InstallError> {
    let _ = std::fs::set_permissions(bin, std::fs::Permissions::from_mode(0o755));
    let mut child = Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(InstallError::NewBinaryDoesNotRun)?;
    let Some(status) = wait_or_kill(&mut child, Duration::from_secs(20)) else {
        return Err(InstallError::NewBinarySilent);
    };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if !status.success() {
        return Err(InstallError::NewBinaryFailed(status));
    }
    Ok(out.lines().next().unwrap_or("").trim().to_owned())
}

/// Put `new` in place of `exe`: a copy beside it (same filesystem), synced, then a rename.
pub(super) fn swap(new: &Path, exe: &Path) -> Result<(), InstallError> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".coogle-update-{}", std::process::id()));
    let result = (|| {
        std::fs::copy(new, &tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, exe)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok::<(), std::io::Error>(())
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        InstallError::Swap {
            exe: exe.to_path_buf(),
            source,
        }
    })
}
