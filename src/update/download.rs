//! Fetching a release's archive into a private temporary directory and checking it against the
//! release's `SHA256SUMS`. A release without sums, or an archive whose SHA-256 differs, is
//! refused before anything runs or is replaced.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self_update::http::HeaderValue;
use self_update::http_client::{HeaderMap, header};
use sha2::{Digest, Sha256};

use super::release::{Github, Release, SUMS};
use crate::error::InstallError;
use crate::fsutil::PrivateDir;
use crate::output;

/// A private directory under the system temp dir for the download, removed when dropped.
pub(super) fn work_dir() -> Result<PrivateDir, InstallError> {
    let path = std::env::temp_dir().join(format!(
        "coogle-update-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    PrivateDir::create(path.clone()).map_err(|source| InstallError::Create { path, source })
}

/// Download the release's archive into `dir` and check its SHA-256; returns its path.
pub(super) fn verified_archive(
    github: &Github,
    release: &Release,
    dir: &Path,
) -> Result<PathBuf, InstallError> {
    let archive = dir.join(&release.asset);
    download(&release.archive_url, &archive, github)?;
    let expected = expected_sha256(github, release, dir)?;
    let actual = sha256_file(&archive)?;
    if actual != expected {
        return Err(InstallError::ChecksumMismatch {
            asset: release.asset.clone(),
            expected,
            actual,
        });
    }
    output::out(&format!("verified {} (sha256 {actual})", release.asset));
    Ok(archive)
}

/// The archive's SHA-256 as the release's `SHA256SUMS` gives it.
fn expected_sha256(github: &Github, release: &Release, dir: &Path) -> Result<String, InstallError> {
    let Some(url) = &release.sums_url else {
        return Err(InstallError::NoSums {
            version: release.version.clone(),
        });
    };
    let sums = dir.join(SUMS);
    download(url, &sums, github)?;
    let text = std::fs::read_to_string(&sums).unwrap_or_default();
    match self_update::Checksum::from_sums_file(&text, &release.asset) {
        Ok(self_update::Checksum::Sha256(hex)) => Ok(hex.trim().to_ascii_lowercase()),
        _ => Err(InstallError::NoChecksum {
            version: release.version.clone(),
            asset: release.asset.clone(),
        }),
    }
}

/// Fetch `url` into `to` with coogle's own client (`super::http`): no retry, five minutes at
/// most, the token only where [`Github::token_for`] allows it.
fn download(url: &str, to: &Path, github: &Github) -> Result<(), InstallError> {
    let download_error = |source| InstallError::Download {
        url: url.to_owned(),
        source,
    };
    let mut file = std::fs::File::create(to).map_err(|source| InstallError::Create {
        path: to.to_path_buf(),
        source,
    })?;
    let mut headers = HeaderMap::new();
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Some(t) = github.token_for(url)
        && let Ok(v) = HeaderValue::from_str(&format!("token {t}"))
    {
        headers.insert(header::AUTHORIZATION, v);
    }
    let response = github
        .http
        .get(url, &headers, Some(Duration::from_secs(300)))
        .map_err(download_error)?;
    std::io::copy(&mut response.body(), &mut file)
        .map_err(|e| download_error(self_update::errors::Error::Io(e)))?;
    Ok(())
}

fn sha256_file(path: &Path) -> Result<String, InstallError> {
    let read_error = |source| InstallError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(read_error)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(read_error)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
