//! A fake GitHub releases API and download server on 127.0.0.1: `GET
//! /repos/<owner>/<name>/releases` lists the releases given, each asset's `url` points back at
//! `/assets/<tag>/<name>`, which serves its bytes; `/download/<tag>/<name>` and
//! `/latest/download/<name>` (the first release) serve them as github.com's download links do. Every request is recorded (path and
//! Authorization header) so tests can check what was asked for.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub struct Asset {
    pub name: String,
    pub bytes: Vec<u8>,
}

pub struct Release {
    pub tag: String,
    pub assets: Vec<Asset>,
}

#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub authorization: Option<String>,
}

pub struct FakeGithub {
    pub base: String,
    requests: Arc<Mutex<Vec<Request>>>,
    /// The origin the listing's asset links name: `base`, or a front's (see [`Self::advertise`]).
    advertised: Arc<Mutex<String>>,
}

impl FakeGithub {
    pub fn start(releases: Vec<Release>) -> FakeGithub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let releases = Arc::new(releases);
        let advertised = Arc::new(Mutex::new(base.clone()));
        let (log, url) = (requests.clone(), advertised.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (log, releases) = (log.clone(), releases.clone());
                let url = url.lock().unwrap().clone();
                std::thread::spawn(move || serve(stream, &log, &releases, &url));
            }
        });
        FakeGithub {
            base,
            requests,
            advertised,
        }
    }

    /// Name `origin` (an HTTPS front's, say) in the asset links of listings asked for from now on.
    pub fn advertise(&self, origin: &str) {
        *self.advertised.lock().unwrap() = origin.to_owned();
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn listing(releases: &[Release], base: &str) -> Value {
    Value::Array(
        releases
            .iter()
            .map(|r| {
                json!({
                    "tag_name": r.tag,
                    "name": format!("coogle {}", r.tag),
                    "created_at": "2026-11-01T00:00:00Z",
                    "html_url": format!("{base}/releases/{}", r.tag),
                    "body": "notes",
                    "assets": r.assets.iter().map(|a| json!({
                        "name": a.name,
                        "url": format!("{base}/assets/{}/{}", r.tag, a.name),
                        "browser_download_url": format!("{base}/download/{}/{}", r.tag, a.name),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Request>>, releases: &[Release], base: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut authorization = None;
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.to_ascii_lowercase().as_str() {
                    "authorization" => authorization = Some(v.trim().to_owned()),
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        let _ = reader.read_exact(&mut body);
        log.lock().unwrap().push(Request {
            path: path.clone(),
            authorization,
        });
        let bare = path.split('?').next().unwrap_or("");
        let (status, ctype, bytes) = if bare.ends_with("/releases") && bare.starts_with("/repos/") {
            (
                200,
                "application/json",
                listing(releases, base).to_string().into_bytes(),
            )
        } else if let Some(name) = bare.strip_prefix("/latest/download/") {
            match releases
                .first()
                .and_then(|r| r.assets.iter().find(|a| a.name == name))
            {
                Some(a) => (200, "application/octet-stream", a.bytes.clone()),
                None => (404, "text/plain", b"not found".to_vec()),
            }
        } else if let Some(rest) = bare
            .strip_prefix("/assets/")
            .or_else(|| bare.strip_prefix("/download/"))
        {
            let found = rest.split_once('/').and_then(|(tag, name)| {
                releases
                    .iter()
                    .find(|r| r.tag == tag)?
                    .assets
                    .iter()
                    .find(|a| a.name == name)
            });
            match found {
                Some(a) => (200, "application/octet-stream", a.bytes.clone()),
                None => (404, "text/plain", b"not found".to_vec()),
            }
        } else {
            (404, "text/plain", b"not found".to_vec())
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n",
            bytes.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&bytes).is_err() {
            return;
        }
    }
}

/// This machine's release target, as scripts/install.sh and self-update name it.
pub fn target() -> String {
    let os = if cfg!(target_os = "macos") {
        "apple-darwin"
    } else {
        "unknown-linux-gnu"
    };
    format!("{}-{os}", std::env::consts::ARCH)
}

/// The "new" coogle: a script that answers `--version` as `version` and otherwise runs the
/// real binary (so the daemon it starts is real), logging each call.
fn new_binary(version: &str, log: &Path) -> String {
    format!(
        "#!/bin/sh\necho \"$*\" >> '{}'\nif [ \"$1\" = --version ]; then echo 'coogle {version} (test build)'; exit 0; fi\nexec '{}' \"$@\"\n",
        log.display(),
        super::COOGLE
    )
}

/// The newer version a real build is patched to say: the package version with every digit a
/// 9, so it has the same length ("0.1.0" → "9.9.9").
pub fn patched_version() -> String {
    env!("CARGO_PKG_VERSION")
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect()
}

/// A real coogle that says it is [`patched_version`]: the binary under test (stripped when
/// `strip` exists, to pack and unpack faster) with each copy of its version string replaced
/// byte for byte. Every version coogle reports (`--version`, the daemon's `info` and
/// `status`, the handshake) comes from those constants, so this is what the next release's
/// build would report, and none of coogle's code differs. A production override of the
/// version (an environment variable) would be a back door; this needs none.
pub fn patched_coogle(dir: &Path) -> Vec<u8> {
    let stripped = dir.join("coogle-stripped");
    let bytes = match Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(super::COOGLE)
        .status()
    {
        Ok(s) if s.success() => fs::read(&stripped).unwrap(),
        _ => fs::read(super::COOGLE).unwrap(),
    };
    let (old, new) = (env!("CARGO_PKG_VERSION").as_bytes(), patched_version());
    assert_ne!(old, new.as_bytes(), "the package version is all nines");
    let mut out = Vec::with_capacity(bytes.len());
    let (mut i, mut replaced) = (0, 0);
    while i < bytes.len() {
        if bytes[i..].starts_with(old) {
            out.extend_from_slice(new.as_bytes());
            i += old.len();
            replaced += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    assert!(replaced > 0, "no version string found in {}", super::COOGLE);
    resign(dir, out)
}

/// On macOS a binary whose bytes changed no longer matches its (ad-hoc) code signature, and
/// Apple silicon kills it at exec: sign the patched copy again, ad hoc, as the linker did.
#[cfg(target_os = "macos")]
fn resign(dir: &Path, bytes: Vec<u8>) -> Vec<u8> {
    let f = dir.join("coogle-patched");
    fs::write(&f, &bytes).unwrap();
    let ok = Command::new("codesign")
        .args(["--force", "--sign", "-"])
        .arg(&f)
        .status()
        .unwrap();
    assert!(ok.success(), "codesign --sign - failed");
    fs::read(&f).unwrap()
}

#[cfg(not(target_os = "macos"))]
fn resign(_dir: &Path, bytes: Vec<u8>) -> Vec<u8> {
    bytes
}

/// `coogle-<version>-<target>.tar.gz` holding `coogle-<version>-<target>/coogle` = `binary`,
/// and beside it a stand-in `coogle-mcp` (a script naming the version) that self-update
/// installs too.
fn archive(dir: &Path, version: &str, binary: &[u8]) -> (String, Vec<u8>) {
    let name = format!("coogle-{version}-{}", target());
    let stage = dir.join(format!("stage-{version}"));
    fs::create_dir_all(stage.join(&name)).unwrap();
    let bin = stage.join(&name).join("coogle");
    fs::write(&bin, binary).unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(
        stage.join(&name).join("coogle-mcp"),
        format!("#!/bin/sh\n# coogle-mcp {version}\n"),
    )
    .unwrap();
    let tar = dir.join(format!("{name}.tar"));
    let ok = Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&stage)
        .arg(&name)
        .status()
        .unwrap();
    assert!(ok.success());
    // Fast compression: the real binary is tens of megabytes.
    let ok = Command::new("gzip")
        .args(["-1", "-f"])
        .arg(&tar)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = dir.join(format!("{name}.tar.gz"));
    (format!("{name}.tar.gz"), fs::read(out).unwrap())
}

fn sha256(bytes: &[u8], _dir: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A release `v<version>` whose archive holds a script that answers `--version` as `version`
/// and runs the real binary otherwise, with a SHA256SUMS (wrong, with `corrupt_sum`).
pub fn release(dir: &Path, version: &str, log: &Path, corrupt_sum: bool) -> Release {
    release_of(
        dir,
        version,
        new_binary(version, log).as_bytes(),
        corrupt_sum,
    )
}

/// A release `v<version>` whose archive holds `binary`, with a SHA256SUMS (wrong, with
/// `corrupt_sum`).
pub fn release_of(dir: &Path, version: &str, binary: &[u8], corrupt_sum: bool) -> Release {
    let (name, bytes) = archive(dir, version, binary);
    let mut sum = sha256(&bytes, dir);
    if corrupt_sum {
        let flipped = if sum.starts_with('0') { "1" } else { "0" };
        sum.replace_range(..1, flipped);
    }
    Release {
        tag: format!("v{version}"),
        assets: vec![
            Asset {
                name: "SHA256SUMS".into(),
                bytes: format!("{sum}  {name}\n").into_bytes(),
            },
            Asset { name, bytes },
        ],
    }
}
