//! Patching MCP client configs: backup equal to the original bytes, atomic write that keeps
//! the mode, key order kept, refusal of unparsable files, re-read before the rename, and
//! idempotence; plus properties over generated documents (patch twice = once, revert undoes
//! exactly the patch, byte for byte in key order).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use coogle::fsutil::{FsError, Moment, Written};
use coogle::setup::client_config::{self, ClientKind, Shim, Upstream, patch, revert};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const CMD: &str = "/opt/homebrew/opt/coogle/bin/coogle";

fn shim() -> Shim {
    Shim::new(Upstream::Google, Path::new(CMD))
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/clients")
        .join(name)
}

fn copy_fixture(dir: &Path, name: &str, mode: u32) -> (PathBuf, Vec<u8>) {
    let bytes = fs::read(data(name)).unwrap();
    let path = dir.join(name);
    fs::write(&path, &bytes).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    (path, bytes)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn patch_backs_up_keeps_order_and_mode_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let (path, original) = copy_fixture(dir.path(), "claude.json", 0o600);
    let before: Value = serde_json::from_slice(&original).unwrap();

    let p = client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()).unwrap();
    let Written::Replaced { backup } = &p.written else {
        panic!("expected a replaced file, got {:?}", p.written)
    };
    assert_eq!(
        fs::read(backup).unwrap(),
        original,
        "backup = original bytes"
    );
    assert_eq!(mode(backup), 0o600);
    assert_eq!(mode(&path), 0o600, "mode kept");
    assert_eq!(p.changes.len(), 2, "{:?}", p.changes);

    let after: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(keys(&after), keys(&before), "top-level order kept");
    assert_eq!(keys(&after["mcpServers"]), keys(&before["mcpServers"]));
    assert_eq!(keys(&after["projects"]), keys(&before["projects"]));
    let entry = &after["mcpServers"]["google-workspace"];
    assert_eq!(entry["type"], "stdio");
    assert_eq!(entry["command"], CMD);
    assert_eq!(entry["args"], json!(["mcp"]));
    // The OAuth client and the rest of the env belong to the upstream, not the shim's entry.
    assert!(entry.get("env").is_none(), "{entry}");
    let project = &after["projects"]["/home/grace/src/mail-triage"];
    assert_eq!(project["mcpServers"]["gmail"]["command"], CMD);
    assert_eq!(
        project["mcpServers"]["linear"],
        before["projects"]["/home/grace/src/mail-triage"]["mcpServers"]["linear"]
    );
    assert_eq!(
        keys(project),
        keys(&before["projects"]["/home/grace/src/mail-triage"])
    );
    // Every key we did not write is as it was.
    for k in keys(&before) {
        if k != "mcpServers" && k != "projects" {
            assert_eq!(after[&k], before[&k], "{k}");
        }
    }
    let text = String::from_utf8(fs::read(&path).unwrap()).unwrap();
    assert!(
        !text.contains("GOCSPX"),
        "secrets removed from the client file"
    );

    // Twice changes nothing: same bytes, no new backup.
    let listing = files_in(dir.path());
    let bytes = fs::read(&path).unwrap();
    let again = client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()).unwrap();
    assert_eq!(again.written, Written::Unchanged);
    assert!(again.changes.is_empty());
    assert_eq!(fs::read(&path).unwrap(), bytes);
    assert_eq!(files_in(dir.path()), listing);

    // Revert puts the exact bytes back.
    let (w, _) =
        client_config::revert_file(&path, &p.changes, std::slice::from_ref(backup)).unwrap();
    assert!(matches!(w, Written::Replaced { .. }));
    assert_eq!(fs::read(&path).unwrap(), original);
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn looser_mode_is_kept_too() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = copy_fixture(dir.path(), "claude.json", 0o644);
    let p = client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()).unwrap();
    assert_eq!(mode(&path), 0o644);
    // The backup still holds the OAuth secret: it is private whatever the original's mode.
    let Written::Replaced { backup } = &p.written else {
        panic!("{:?}", p.written)
    };
    assert_eq!(mode(backup), 0o600);
}

#[test]
fn unparsable_file_is_refused_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (path, original) = copy_fixture(dir.path(), "corrupt_claude.json", 0o600);
    let listing = files_in(dir.path());
    let err = client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()).unwrap_err();
    assert!(matches!(err, FsError::Parse { line: 5, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("corrupt_claude.json"), "{text}");
    assert!(!text.contains("GOCSPX"), "{text}");
    assert_eq!(fs::read(&path).unwrap(), original);
    assert_eq!(files_in(dir.path()), listing, "no backup, no temp file");

    // A top level that is not an object is refused the same way.
    fs::write(&path, b"[1, 2]").unwrap();
    let err = client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()).unwrap_err();
    assert!(matches!(err, FsError::NotAnObject { .. }), "{err:?}");
    assert_eq!(fs::read(&path).unwrap(), b"[1, 2]");
}

#[test]
fn a_write_by_another_program_before_the_rename_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = copy_fixture(dir.path(), "claude.json", 0o600);
    let mut calls = 0;
    let mut second_version = Vec::new();
    let p = client_config::patch_file_with_hook(
        &path,
        ClientKind::ClaudeCode,
        &shim(),
        &mut |moment, target| {
            if moment != Moment::BeforeRename {
                return;
            }
            calls += 1;
            if calls == 1 {
                // Claude Code rewrites the file meanwhile (a new startup count, a new key).
                let mut doc: Value = serde_json::from_slice(&fs::read(target).unwrap()).unwrap();
                doc["numStartups"] = json!(213);
                doc["writtenMeanwhile"] = json!(true);
                second_version = serde_json::to_vec_pretty(&doc).unwrap();
                fs::write(target, &second_version).unwrap();
            }
        },
    )
    .unwrap();
    assert_eq!(calls, 2, "retried once");
    let after: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(after["numStartups"], 213);
    assert_eq!(after["writtenMeanwhile"], true);
    assert_eq!(after["mcpServers"]["google-workspace"]["command"], CMD);
    let Written::Replaced { backup } = p.written else {
        panic!()
    };
    assert_eq!(
        fs::read(&backup).unwrap(),
        second_version,
        "backup of what was replaced"
    );
    let backups = files_in(dir.path())
        .into_iter()
        .filter(|f| f.contains("coogle-backup"))
        .count();
    assert_eq!(backups, 1, "the abandoned attempt's backup is removed");
    assert!(
        !files_in(dir.path())
            .iter()
            .any(|f| f.contains("coogle-tmp"))
    );
}

#[test]
fn a_file_that_never_settles_is_left_to_the_other_program() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = copy_fixture(dir.path(), "claude.json", 0o600);
    let mut n = 0;
    let err = client_config::patch_file_with_hook(
        &path,
        ClientKind::ClaudeCode,
        &shim(),
        &mut |moment, target| {
            if moment != Moment::BeforeRename {
                return;
            }
            n += 1;
            let mut doc: Value = serde_json::from_slice(&fs::read(target).unwrap()).unwrap();
            doc["numStartups"] = json!(1000 + n);
            fs::write(target, serde_json::to_vec(&doc).unwrap()).unwrap();
        },
    )
    .unwrap_err();
    assert!(matches!(err, FsError::Changed { .. }), "{err:?}");
    let last: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(last["numStartups"], 1000 + n);
    assert_eq!(last["mcpServers"]["google-workspace"]["command"], "uvx");
    assert!(!files_in(dir.path()).iter().any(|f| f.contains("coogle-")));
}

#[test]
fn missing_file_is_created_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude.json");
    let p = client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()).unwrap();
    assert_eq!(p.written, Written::Created);
    assert_eq!(mode(&path), 0o600);
    let doc: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        doc,
        json!({"mcpServers": {"coogle": {"type": "stdio", "command": CMD, "args": ["mcp"]}}})
    );
}

#[test]
fn symlinked_config_stays_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let (real, _) = copy_fixture(dir.path(), "claude.json", 0o600);
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    client_config::patch_file(&link, ClientKind::ClaudeCode, &shim()).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let doc: Value = serde_json::from_slice(&fs::read(&real).unwrap()).unwrap();
    assert_eq!(doc["mcpServers"]["google-workspace"]["command"], CMD);
}

#[test]
fn desktop_and_cursor_files() {
    let dir = tempfile::tempdir().unwrap();
    let (desktop, original) = copy_fixture(dir.path(), "claude_desktop_config.json", 0o644);
    let p = client_config::patch_file(&desktop, ClientKind::ClaudeDesktop, &shim()).unwrap();
    let doc: Value = serde_json::from_slice(&fs::read(&desktop).unwrap()).unwrap();
    assert_eq!(
        doc["mcpServers"]["workspace"],
        json!({"command": CMD, "args": ["mcp"]})
    );
    assert_eq!(keys(&doc["mcpServers"]), ["workspace", "memory"]);
    assert_eq!(doc["globalShortcut"], "Ctrl+Space");
    let Written::Replaced { backup } = &p.written else {
        panic!()
    };
    client_config::revert_file(&desktop, &p.changes, std::slice::from_ref(backup)).unwrap();
    assert_eq!(fs::read(&desktop).unwrap(), original);

    let (cursor, _) = copy_fixture(dir.path(), "cursor_mcp.json", 0o644);
    client_config::patch_file(&cursor, ClientKind::Cursor, &shim()).unwrap();
    let doc: Value = serde_json::from_slice(&fs::read(&cursor).unwrap()).unwrap();
    assert_eq!(keys(&doc["mcpServers"]), ["playwright", "coogle"]);
    assert_eq!(
        doc["mcpServers"]["coogle"],
        json!({"command": CMD, "args": ["mcp"]})
    );
}

#[test]
fn revert_leaves_entries_edited_since_alone() {
    let doc: Value = serde_json::from_slice(&fs::read(data("claude.json")).unwrap()).unwrap();
    let (mut patched, changes) = patch(&doc, ClientKind::ClaudeCode, &shim());
    patched["mcpServers"]["google-workspace"]["args"] = json!(["mcp", "--server", "other"]);
    patched["newKey"] = json!(1);
    let (back, report) = revert(&patched, &changes);
    assert!(
        report
            .iter()
            .any(|r| matches!(r, client_config::Reverted::Skipped(_)))
    );
    assert_eq!(
        back["mcpServers"]["google-workspace"]["args"],
        json!(["mcp", "--server", "other"])
    );
    assert_eq!(back["newKey"], 1);
    assert_eq!(
        back["projects"]["/home/grace/src/mail-triage"]["mcpServers"]["gmail"],
        doc["projects"]["/home/grace/src/mail-triage"]["mcpServers"]["gmail"]
    );
}

// --- properties -------------------------------------------------------------------------------

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-zé☃ ]{0,6}".prop_map(Value::from),
    ]
}

fn key() -> impl Strategy<Value = String> {
    "[a-zA-Z_ ☃/.-]{1,8}"
}

fn entry() -> impl Strategy<Value = Value> {
    (
        0..4u8,
        "[a-z/]{1,10}",
        proptest::collection::vec("[a-z-]{1,6}", 0..3),
    )
        .prop_map(|(kind, command, args)| match kind {
            0 => json!({"command": command, "args": args, "env": {
                "GOOGLE_OAUTH_CLIENT_ID": "id", "GOOGLE_OAUTH_CLIENT_SECRET": "s", "OTHER": "x"}}),
            1 => json!({"type": "stdio", "command": command, "args": args}),
            2 => json!({"type": "http", "url": format!("https://{command}")}),
            _ => json!({"command": CMD, "args": ["mcp"]}),
        })
}

fn servers() -> impl Strategy<Value = Value> {
    proptest::collection::vec((key(), entry()), 0..4)
        .prop_map(|v| Value::Object(v.into_iter().collect::<Map<String, Value>>()))
}

fn document() -> impl Strategy<Value = Value> {
    (
        proptest::collection::vec((key(), scalar()), 0..5),
        proptest::option::of(servers()),
        proptest::collection::vec((key(), proptest::option::of(servers()), scalar()), 0..3),
        0..6usize,
    )
        .prop_map(|(extra, top, projects, at)| {
            let mut root = Map::new();
            for (k, v) in extra {
                root.insert(format!("x{k}"), v);
            }
            let projects: Map<String, Value> = projects
                .into_iter()
                .map(|(k, servers, other)| {
                    let mut p = Map::new();
                    p.insert("allowedTools".into(), json!([]));
                    if let Some(s) = servers {
                        p.insert("mcpServers".into(), s);
                    }
                    p.insert("other".into(), other);
                    (format!("/home/{k}"), Value::Object(p))
                })
                .collect();
            let mut pairs: Vec<(String, Value)> = root.into_iter().collect();
            let at = at.min(pairs.len());
            if let Some(top) = top {
                pairs.insert(at, ("mcpServers".into(), top));
            }
            pairs.push(("projects".into(), Value::Object(projects)));
            Value::Object(pairs.into_iter().collect())
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn patch_is_idempotent_and_revert_is_exact(doc in document()) {
        let shim = shim();
        let (once, changes) = patch(&doc, ClientKind::ClaudeCode, &shim);
        let (twice, more) = patch(&once, ClientKind::ClaudeCode, &shim);
        prop_assert!(more.is_empty(), "second patch changed {:?}", more);
        prop_assert_eq!(serde_json::to_string(&twice).unwrap(), serde_json::to_string(&once).unwrap());

        // No Google entry is left, and coogle's entry exists somewhere.
        prop_assert!(client_config::google_entries(&once, ClientKind::ClaudeCode).is_empty());
        prop_assert!(client_config::entries(&once, ClientKind::ClaudeCode)
            .iter().any(|(_, e)| shim.is_exact(e)));

        // The top-level key order is the original's (mcpServers may be appended).
        let before = keys(&doc);
        let after = keys(&once);
        prop_assert_eq!(&after[..before.len()], &before[..]);
        prop_assert!(after.len() <= before.len() + 1);

        // Reverting gives back the same document, in the same order.
        let (back, _) = revert(&once, &changes);
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), serde_json::to_string(&doc).unwrap());
    }
}

/// What a file holds before the patcher sees it: a valid document in some formatting, the
/// same bytes damaged (cut short or with a stray byte), or JSON that is not an object.
fn file_bytes() -> impl Strategy<Value = Vec<u8>> {
    fn formatted() -> impl Strategy<Value = Vec<u8>> {
        (document(), 0..3u8).prop_map(|(doc, style)| match style {
            0 => serde_json::to_vec(&doc).unwrap(),
            1 => serde_json::to_vec_pretty(&doc).unwrap(),
            _ => serde_json::to_string_pretty(&doc)
                .unwrap()
                .replace("  ", "\t")
                .into_bytes(),
        })
    }
    prop_oneof![
        4 => formatted(),
        2 => (formatted(), any::<prop::sample::Index>()).prop_map(|(b, at)| {
            let cut = at.index(b.len().max(1));
            b[..cut].to_vec()
        }),
        2 => (formatted(), any::<prop::sample::Index>(), prop::sample::select(&b"{}[],:\"\\x\xff"[..]))
            .prop_map(|(mut b, at, byte)| {
                let i = at.index(b.len() + 1);
                b.insert(i, byte);
                b
            }),
        1 => prop::sample::select(vec![
            b"[]".to_vec(), b"null".to_vec(), b"\"x\"".to_vec(), b"42".to_vec(), Vec::new(),
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any file either round-trips (patched to a valid document with coogle's entry, and the
    /// recorded revert gives back the exact original bytes) or is refused untouched (same bytes,
    /// same mode, no backup or temp file left beside it).
    #[test]
    fn any_file_round_trips_or_is_refused_untouched(bytes in file_bytes()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude.json");
        fs::write(&path, &bytes).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let parsed_as_object = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .is_some_and(|v| v.is_object());
        match client_config::patch_file(&path, ClientKind::ClaudeCode, &shim()) {
            Err(e) => {
                prop_assert!(!parsed_as_object, "a valid document was refused: {e}");
                prop_assert!(
                    matches!(e, FsError::Parse { .. } | FsError::NotAnObject { .. }),
                    "unexpected error {e:?}"
                );
                prop_assert_eq!(fs::read(&path).unwrap(), bytes);
                prop_assert_eq!(mode(&path), 0o640);
                prop_assert_eq!(files_in(dir.path()), vec![".claude.json".to_owned()]);
            }
            Ok(p) => {
                prop_assert!(parsed_as_object, "an invalid document was patched");
                let doc: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
                prop_assert!(client_config::entries(&doc, ClientKind::ClaudeCode)
                    .iter().any(|(_, e)| shim().is_exact(e)));
                prop_assert_eq!(mode(&path), 0o640);
                let backups: Vec<PathBuf> = match &p.written {
                    Written::Replaced { backup } => {
                        prop_assert_eq!(&fs::read(backup).unwrap(), &bytes);
                        vec![backup.clone()]
                    }
                    Written::Unchanged => {
                        prop_assert_eq!(&fs::read(&path).unwrap(), &bytes);
                        vec![]
                    }
                    Written::Created => unreachable!("the file existed"),
                };
                client_config::revert_file(&path, &p.changes, &backups).unwrap();
                prop_assert_eq!(fs::read(&path).unwrap(), bytes);
            }
        }
    }
}
