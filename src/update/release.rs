//! Which release to install: coogle's GitHub releases (newest first, through self_update's
//! GitHub backend), keeping only those with an archive for this platform, and the one asked
//! for or the newest.
//!
//! The token (`GH_TOKEN`/`GITHUB_TOKEN`) is sent only to the API the releases came from, never
//! to another host an asset might point at.

use std::sync::Arc;

use self_update::http_client::HttpClient;

use super::http::Http;
use crate::error::InstallError;
use crate::wire;

const REPO_OWNER: &str = "coogle-dev";
const REPO_NAME: &str = "coogle";
/// The release asset that holds the archives' SHA-256 sums.
pub(super) const SUMS: &str = "SHA256SUMS";
/// The GitHub API base: a mirror, or a test's loopback server.
const API_URL_VAR: &str = "COOGLE_UPDATE_API_URL";

/// Where releases come from, for which platform, and the client that asks.
pub(super) struct Github {
    pub api: String,
    token: Option<String>,
    pub target: &'static str,
    pub http: Arc<dyn HttpClient>,
}

/// The release chosen, with what is needed to fetch and check it.
pub(super) struct Release {
    pub version: String,
    /// `coogle-<version>-<target>.tar.gz`.
    pub asset: String,
    pub archive_url: String,
    pub sums_url: Option<String>,
}

/// What [`choose`] decided.
pub(super) enum Choice {
    Install(Release),
    /// Nothing newer than this binary; the newest release's version.
    UpToDate(String),
}

impl Github {
    pub fn from_env() -> Result<Github, InstallError> {
        Ok(Github {
            api: std::env::var(API_URL_VAR)
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "https://api.github.com".to_owned()),
            token: ["GH_TOKEN", "GITHUB_TOKEN"]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|t| !t.is_empty())),
            target: self_update::get_target(),
            http: Http::client()?,
        })
    }

    pub fn asset_name(&self, version: &str) -> String {
        format!("coogle-{version}-{}.tar.gz", self.target)
    }

    /// The token, for `url` only when it is on the API's origin.
    pub fn token_for(&self, url: &str) -> Option<&str> {
        self.token
            .as_deref()
            .filter(|_| same_origin(url, &self.api))
    }

    fn list(&self) -> Result<Vec<self_update::update::Release>, InstallError> {
        let mut list = self_update::backends::github::ReleaseList::configure();
        list.repo_owner(REPO_OWNER)
            .repo_name(REPO_NAME)
            .api_base_url(&self.api)
            .http_client(self.http.clone());
        if let Some(t) = &self.token {
            list.auth_token(t);
        }
        list.build()
            .and_then(|l| l.fetch())
            .map(|releases| releases.into_vec())
            .map_err(|source| InstallError::ListReleases {
                api: self.api.clone(),
                source,
            })
    }
}

/// `wanted` (any version, older ones too), else the newest when it is newer than this binary.
pub(super) fn choose(github: &Github, wanted: Option<&str>) -> Result<Choice, InstallError> {
    let releases = github.list()?;
    let ours: Vec<&self_update::update::Release> = releases
        .iter()
        .filter(|r| {
            r.assets()
                .iter()
                .any(|a| a.name() == github.asset_name(r.version()))
        })
        .collect();
    let chosen = match wanted {
        Some(v) => {
            let v = v.trim_start_matches('v');
            ours.iter()
                .find(|r| r.version() == v)
                .copied()
                .ok_or_else(|| InstallError::NoSuchRelease {
                    version: v.to_owned(),
                    target: github.target.to_owned(),
                })?
        }
        None => {
            let newest = ours.iter().copied().max_by(|a, b| {
                self_update::version::cmp_versions(a.version(), b.version())
                    .unwrap_or(std::cmp::Ordering::Less)
            });
            let newest = newest.ok_or_else(|| InstallError::NoBuild {
                target: github.target.to_owned(),
            })?;
            if !self_update::version::bump_is_greater(wire::VERSION, newest.version())
                .unwrap_or(false)
            {
                return Ok(Choice::UpToDate(newest.version().to_owned()));
            }
            newest
        }
    };
    let url = |name: &str| {
        chosen
            .assets()
            .iter()
            .find(|a| a.name() == name)
            .map(|a| a.download_url().to_owned())
    };
    let asset = github.asset_name(chosen.version());
    Ok(Choice::Install(Release {
        version: chosen.version().to_owned(),
        archive_url: url(&asset).expect("filtered on it"),
        sums_url: url(SUMS),
        asset,
    }))
}

/// Same scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    let origin = |u: &str| {
        u.parse::<self_update::http::Uri>().ok().and_then(|u| {
            Some((
                u.scheme_str()?.to_owned(),
                u.authority()?.as_str().to_owned(),
            ))
        })
    };
    origin(a).is_some_and(|o| Some(o) == origin(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_stays_with_the_api() {
        let api = "https://api.github.com";
        assert!(same_origin(
            "https://api.github.com/repos/coogle-dev/coogle/releases/assets/1",
            api
        ));
        assert!(!same_origin(
            "https://objects.example.com/coogle.tar.gz",
            api
        ));
        assert!(!same_origin("http://api.github.com/x", api));
        assert!(same_origin(
            "http://127.0.0.1:4000/assets/x",
            "http://127.0.0.1:4000"
        ));
        assert!(!same_origin(
            "http://127.0.0.1:4001/assets/x",
            "http://127.0.0.1:4000"
        ));
        assert!(!same_origin("not a url", api));
    }
}
