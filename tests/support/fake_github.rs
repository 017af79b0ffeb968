//! A fake GitHub releases API and download server on 127.0.0.1: `GET
//! /repos/<owner>/<name>/releases` lists the releases given, each asset's `url` points back at
//! `/assets/<tag>/<name>`, which serves its bytes. Every request is recorded (path and
//! Authorization header) so tests can check what was asked for.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
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
}

impl FakeGithub {
    pub fn start(releases: Vec<Release>) -> FakeGithub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let releases = Arc::new(releases);
        let (log, url) = (requests.clone(), base.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (log, releases, url) = (log.clone(), releases.clone(), url.clone());
                std::thread::spawn(move || serve(stream, &log, &releases, &url));
            }
        });
        FakeGithub { base, requests }
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
