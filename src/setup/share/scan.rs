//! Finding what `coogle share` could share: every stdio entry of every client config file
//! (Claude Code's top level and projects, Claude Desktop's, Cursor's). It only reads; a file
//! that does not parse is reported and skipped, never written.

use std::path::PathBuf;

use serde_json::Value;

use super::launch::{Launch, NotShared};
use crate::fsutil::{self, FsError};
use crate::setup::client_config::{self, ClientKind, describe};

/// One client entry that can be shared.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub kind: ClientKind,
    pub path: PathBuf,
    pub location: Vec<String>,
    pub entry: Value,
    pub launch: Launch,
}

impl Candidate {
    /// The entry's name in its `mcpServers`.
    pub fn name(&self) -> &str {
        self.location.last().map_or("", String::as_str)
    }

    /// `Claude Code projects["/p"].mcpServers.memory`, for people.
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind.label(), describe(&self.location))
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub struct Scan {
    pub candidates: Vec<Candidate>,
    /// Files that exist but could not be read or parsed: left untouched.
    pub refused: Vec<(ClientKind, FsError)>,
    /// Entries left alone and why (`url`/http/sse entries are only counted).
    pub unsupported: Vec<(String, String)>,
    pub not_stdio: usize,
    pub already_shared: usize,
}

/// Read every client file (missing ones are skipped).
pub fn scan(files: &[(ClientKind, PathBuf)]) -> Scan {
    let mut out = Scan::default();
    for (kind, path) in files {
        let path = fsutil::resolve(path);
        let doc = match fsutil::read_optional(&path) {
            Ok(None) => continue,
            Ok(Some(bytes)) => match fsutil::parse_json(&bytes, &path) {
                Ok(doc) if doc.is_object() => doc,
                Ok(_) => {
                    out.refused
                        .push((*kind, FsError::NotAnObject { path: path.clone() }));
                    continue;
                }
                Err(e) => {
                    out.refused.push((*kind, e));
                    continue;
                }
            },
            Err(e) => {
                out.refused.push((*kind, e));
                continue;
            }
        };
        for (location, entry) in client_config::entries(&doc, *kind) {
            // `projects["/p"].mcpServers.x`: the client runs it in /p.
            let project = match location.as_slice() {
                [p, dir, ..] if p == "projects" => Some(dir.as_str()),
                _ => None,
            };
            match Launch::of_entry(entry).map(|l| match project {
                Some(dir) => l.in_project(dir),
                None => l,
            }) {
                Ok(launch) => out.candidates.push(Candidate {
                    kind: *kind,
                    path: path.clone(),
                    location,
                    entry: entry.clone(),
                    launch,
                }),
                Err(NotShared::NotStdio) => out.not_stdio += 1,
                Err(NotShared::Coogle) => out.already_shared += 1,
                Err(NotShared::Unsupported(why)) => out
                    .unsupported
                    .push((format!("{} {}", kind.label(), describe(&location)), why)),
            }
        }
    }
    out
}
