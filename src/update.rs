//! `coogle self-update`: standalone installs update themselves from GitHub releases through the
//! self_update crate.
//!
//! The updater is blocking and runs outside the async runtime. It refuses to touch a binary a
//! package manager owns (Homebrew: `brew upgrade coogle`). Nothing is replaced until the
//! archive's SHA-256 matches the release's `SHA256SUMS` and the new binary has run
//! `--version` and named the expected version; the swap is a rename in the binary's own
//! directory, so an interrupted update leaves the old binary whole. A daemon that was running
//! is restarted afterwards so the new version serves.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::GlobalPaths;
use crate::installed::managed_by;
use crate::output::{self, ExitCode};
use crate::{client, paths, wire};

const REPO_OWNER: &str = "coogle-dev";
const REPO_NAME: &str = "coogle";
const SUMS: &str = "SHA256SUMS";
/// Environment overrides: the GitHub API base (a mirror, or a test's loopback server) and the
/// binary to replace (tests; normally this executable).
const API_URL_VAR: &str = "COOGLE_UPDATE_API_URL";
const EXE_VAR: &str = "COOGLE_SELF_UPDATE_EXE";

#[derive(Debug, Clone, clap::Args)]
pub struct SelfUpdateArgs {
    /// Only say whether a newer version exists
    #[arg(long)]
    pub check: bool,
    /// Do not ask for confirmation
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Download and verify the new version, run it once, but replace nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Install this version instead of the newest (also older ones)
    #[arg(long, value_name = "X.Y.Z")]
    pub version: Option<String>,
}

/// `coogle self-update`: outside the async runtime (the updater blocks).
pub fn self_update(paths: &GlobalPaths, args: &SelfUpdateArgs) -> ExitCode {
    match update(paths, args) {
        Ok(code) => code,
        Err(e) => {
            output::error_text(&e.message, e.hint.as_deref());
            e.code
        }
    }
}

/// An updater failure: what to print and how to exit.
struct Failure {
    message: String,
    hint: Option<String>,
    code: ExitCode,
}

fn fail(code: ExitCode, message: impl Into<String>, hint: Option<&str>) -> Failure {
    Failure {
        message: message.into(),
        hint: hint.map(str::to_owned),
        code,
    }
}

fn target_exe() -> Result<PathBuf, Failure> {
    if let Some(p) = std::env::var_os(EXE_VAR).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| {
        fail(
            ExitCode::Usage,
            format!("could not find this executable: {e}"),
            None,
        )
    })?;
    Ok(std::fs::canonicalize(&exe).unwrap_or(exe))
}

fn update(paths: &GlobalPaths, args: &SelfUpdateArgs) -> Result<ExitCode, Failure> {
    crate::tls::install();
    let exe = target_exe()?;
    if let Some((manager, how)) = managed_by(&exe) {
        return Err(fail(
            ExitCode::Usage,
            format!(
                "{} is managed by {manager}; coogle self-update does not replace it",
                exe.display()
            ),
            Some(&format!("run `{how}`")),
        ));
    }
    let current = wire::VERSION;
    let api = std::env::var(API_URL_VAR)
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "https://api.github.com".to_owned());
    let token = ["GH_TOKEN", "GITHUB_TOKEN"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|t| !t.is_empty()));
    let target = self_update::get_target();
    let asset_name = |version: &str| format!("coogle-{version}-{target}.tar.gz");

    // Releases, newest first; the one to install.
    let mut list = self_update::backends::github::ReleaseList::configure();
    list.repo_owner(REPO_OWNER)
        .repo_name(REPO_NAME)
        .api_base_url(&api);
    if let Some(t) = &token {
        list.auth_token(t);
    }
    let releases = list
        .build()
        .and_then(|l| l.fetch())
        .map_err(|e| {
            fail(
                ExitCode::Failure,
                format!("could not list coogle's releases from {api}: {e}"),
                Some("check the network; set GH_TOKEN if GitHub's rate limit was hit"),
            )
        })?
        .into_vec();
    let ours: Vec<&self_update::update::Release> = releases
        .iter()
        .filter(|r| {
            r.assets()
                .iter()
                .any(|a| a.name() == asset_name(r.version()))
        })
        .collect();
    let wanted = match &args.version {
        Some(v) => {
            let v = v.trim_start_matches('v');
            ours.iter()
                .find(|r| r.version() == v)
                .copied()
                .ok_or_else(|| {
                    fail(
                        ExitCode::Failure,
                        format!("no release {v} with a build for {target}"),
                        None,
                    )
                })?
        }
        None => {
            let newest = ours.iter().copied().max_by(|a, b| {
                self_update::version::cmp_versions(a.version(), b.version())
                    .unwrap_or(std::cmp::Ordering::Less)
            });
            let Some(newest) = newest else {
                return Err(fail(
                    ExitCode::Failure,
                    format!("no release has a build for {target}"),
                    Some(
                        "build from source: cargo install --git https://github.com/coogle-dev/coogle",
                    ),
                ));
            };
            let newer =
                self_update::version::bump_is_greater(current, newest.version()).unwrap_or(false);
            if !newer {
                output::out(&format!(
                    "coogle {current} is up to date (newest release: {})",
                    newest.version()
                ));
                return Ok(ExitCode::Success);
            }
            newest
        }
    };
    let version = wanted.version().to_owned();
    if args.check {
        output::out(&format!(
            "coogle {version} is available (this is {current}); `coogle self-update` installs it"
        ));
        return Ok(ExitCode::Success);
    }
    if version == current && args.version.is_some() {
        output::out(&format!("coogle {current} is already installed"));
        return Ok(ExitCode::Success);
    }
    if !args.yes && !args.dry_run {
        if !std::io::stdin().is_terminal() {
            return Err(fail(
                ExitCode::Usage,
                format!("replacing {} needs confirmation", exe.display()),
                Some("run `coogle self-update --yes`"),
            ));
        }
        let ok = dialoguer::Confirm::new()
            .with_prompt(format!(
                "Update coogle {current} → {version} at {}?",
                exe.display()
            ))
            .default(true)
            .interact()
            .unwrap_or(false);
        if !ok {
            output::out("nothing changed");
            return Ok(ExitCode::Success);
        }
    }

    // Download the archive and the sums into a private temporary directory.
    let work = TempDir::new()?;
    let find = |name: &str| {
        wanted
            .assets()
            .iter()
            .find(|a| a.name() == name)
            .map(|a| a.download_url().to_owned())
    };
    let archive_url = find(&asset_name(&version)).expect("filtered on it");
    let archive = work.path.join(asset_name(&version));
    // The token goes only where the release list came from (the API's asset URLs), never to
    // another host an asset might point at.
    let token_for = |url: &str| token.as_deref().filter(|_| same_origin(url, &api));
    download(&archive_url, &archive, token_for(&archive_url))?;
    let expected = match find(SUMS) {
        Some(url) => {
            let sums = work.path.join(SUMS);
            download(&url, &sums, token_for(&url))?;
            let text = std::fs::read_to_string(&sums).unwrap_or_default();
            match self_update::Checksum::from_sums_file(&text, &asset_name(&version)) {
                Ok(self_update::Checksum::Sha256(hex)) => hex.trim().to_ascii_lowercase(),
                _ => {
                    return Err(fail(
                        ExitCode::Failure,
                        format!(
                            "{SUMS} of release {version} has no SHA-256 for {}; nothing was replaced",
                            asset_name(&version)
                        ),
                        None,
                    ));
                }
            }
        }
        None => {
            return Err(fail(
                ExitCode::Failure,
                format!(
                    "release {version} publishes no {SUMS}, so its archive cannot be verified; nothing was replaced"
                ),
                None,
            ));
        }
    };
    let actual = sha256_file(&archive)?;
    if actual != expected {
        return Err(fail(
            ExitCode::Failure,
            format!(
                "checksum mismatch for {}: {SUMS} says {expected}, the download is {actual}; nothing was replaced",
                asset_name(&version)
            ),
            Some("try again later; if it persists, report it"),
        ));
    }
    output::out(&format!(
        "verified {} (sha256 {actual})",
        asset_name(&version)
    ));

    let unpacked = work.path.join("unpacked");
    self_update::Extract::from_source(&archive)
        .archive(self_update::ArchiveKind::Tar(Some(
            self_update::Compression::Gz,
        )))
        .extract_into(&unpacked)
        .map_err(|e| {
            fail(
                ExitCode::Failure,
                format!("could not unpack {}: {e}", asset_name(&version)),
                None,
            )
        })?;
    let new_bin = find_binary(&unpacked).ok_or_else(|| {
        fail(
            ExitCode::Failure,
            format!(
                "{} holds no `coogle` binary; nothing was replaced",
                asset_name(&version)
            ),
            None,
        )
    })?;
    let said = run_version(&new_bin)?;
    if !said.split_whitespace().any(|w| w == version) {
        return Err(fail(
            ExitCode::Failure,
            format!(
                "the downloaded binary says {said:?}, not coogle {version}; nothing was replaced"
            ),
            None,
        ));
    }
    output::out(&format!("the new binary runs: {said}"));
    if args.dry_run {
        output::out(&format!(
            "dry run: would replace {} with coogle {version}",
            exe.display()
        ));
        return Ok(ExitCode::Success);
    }
    swap(&new_bin, &exe)?;
    output::out(&format!(
        "updated {} from {current} to {version}",
        exe.display()
    ));
    restart_daemon(paths, &exe);
    Ok(ExitCode::Success)
}

/// A directory under the system temp dir, removed when dropped.
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> Result<TempDir, Failure> {
        use std::os::unix::fs::DirBuilderExt;
        let path = std::env::temp_dir().join(format!(
            "coogle-update-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| {
                fail(
                    ExitCode::Failure,
                    format!("could not create {}: {e}", path.display()),
                    None,
                )
            })?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
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

fn download(url: &str, to: &Path, token: Option<&str>) -> Result<(), Failure> {
    let file = std::fs::File::create(to).map_err(|e| {
        fail(
            ExitCode::Failure,
            format!("could not create {}: {e}", to.display()),
            None,
        )
    })?;
    let mut d = self_update::Download::from_url(url);
    d.request_header(
        self_update::http::header::ACCEPT,
        self_update::http::HeaderValue::from_static("application/octet-stream"),
    )
    .timeout(Duration::from_secs(300));
    if let Some(t) = token
        && let Ok(v) = self_update::http::HeaderValue::from_str(&format!("token {t}"))
    {
        d.request_header(self_update::http::header::AUTHORIZATION, v);
    }
    d.download_to(file).map_err(|e| {
        fail(
            ExitCode::Failure,
            format!("could not download {url}: {e}"),
            None,
        )
    })
}

fn sha256_file(path: &Path) -> Result<String, Failure> {
    let mut f = std::fs::File::open(path).map_err(|e| {
        fail(
            ExitCode::Failure,
            format!("could not read {}: {e}", path.display()),
            None,
        )
    })?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf).map_err(|e| {
            fail(
                ExitCode::Failure,
                format!("could not read {}: {e}", path.display()),
                None,
            )
        })?;
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
fn run_version(bin: &Path) -> Result<String, Failure> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(bin, std::fs::Permissions::from_mode(0o755));
    let mut child = Process::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            fail(
                ExitCode::Failure,
                format!("the downloaded binary does not run: {e}; nothing was replaced"),
                None,
            )
        })?;
    let Some(status) = crate::process::wait_or_kill(&mut child, Duration::from_secs(20)) else {
        return Err(fail(
            ExitCode::Failure,
            "the downloaded binary did not answer --version; nothing was replaced",
            None,
        ));
    };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if !status.success() {
        return Err(fail(
            ExitCode::Failure,
            format!("the downloaded binary failed --version ({status}); nothing was replaced"),
            None,
        ));
    }
    Ok(out.lines().next().unwrap_or("").trim().to_owned())
}

/// Put `new` in place of `exe`: a copy beside it (same filesystem), synced, then a rename, so
/// `exe` is always either the old binary or the whole new one.
fn swap(new: &Path, exe: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
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
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(
            ExitCode::Failure,
            format!(
                "could not replace {}: {e}; the old binary is unchanged",
                exe.display()
            ),
            Some("check that you can write to that directory"),
        )
    })
}

/// Restart a running daemon so the new version serves: through the service manager when a
/// service is installed, else stop it (in-flight calls finish within the grace period) and
/// start the new binary detached.
fn restart_daemon(global: &GlobalPaths, exe: &Path) {
    let socket = global.socket_loading_config();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let running = rt
        .block_on(client::control(&socket, "info", Value::Null))
        .ok();
    let Some(info) = running else {
        output::out("no daemon was running; the next `coogle mcp` starts the new version");
        return;
    };
    let old_pid = info["pid"].as_u64().unwrap_or(0);
    if let Some(how) = crate::service_manager::restart_installed() {
        match how {
            Ok(what) => {
                output::out(&format!("restarted the daemon through {what}"));
                return;
            }
            Err(e) => output::warn(&format!(
                "the service manager could not restart it ({e}); restarting it directly"
            )),
        }
    }
    let _ = rt.block_on(client::control(&socket, "shutdown", Value::Null));
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline
        && rt
            .block_on(client::control(&socket, "ping", Value::Null))
            .is_ok()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let starter = client::Starter {
        exe: exe.to_path_buf(),
        config: global.config.clone(),
        socket: socket.clone(),
        log_file: paths::log_file(),
    };
    match starter.spawn() {
        Ok(()) => {
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(i) = rt.block_on(client::control(&socket, "info", Value::Null))
                    && i["pid"].as_u64() != Some(old_pid)
                {
                    output::out(&format!(
                        "restarted the daemon (pid {old_pid} → {}) on {}",
                        i["pid"],
                        socket.display()
                    ));
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            output::warn(
                "the new daemon did not answer yet; `coogle status` shows it when it does",
            );
        }
        Err(e) => output::warn(&format!(
            "could not start the new daemon: {e}; the next `coogle mcp` starts it"
        )),
    }
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
