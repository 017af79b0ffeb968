//! The disk cache keeps only what may be shared, keeps it private, and a bad cache file costs
//! speed, never service.
//!
//! Regressions (adversarial reviews): a `tools/list` marked `cacheScope: "private"` was written
//! to the cache and, after a daemon restart, served to new sessions of both eras; the cache
//! directory was 0755 and its files 0644; a FIFO in a cache file's place hung the whole daemon,
//! and a symlink to `/dev/zero` was read until the OOM killer stopped it.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn cache_dir(env: &Env) -> PathBuf {
    if cfg!(target_os = "macos") {
        env.home.join("Library/Caches/coogle")
    } else {
        env.home.join(".cache/coogle")
    }
}

/// The upstream's cache file, once the daemon wrote one.
fn cache_file(env: &Env) -> PathBuf {
    let mut found = None;
    wait_for("the upstream cache file", Duration::from_secs(20), || {
        found = std::fs::read_dir(cache_dir(env)).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "json"))
        });
        found.is_some()
    });
    found.unwrap()
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

/// A 2026-07-28 session's `tools/list`, its envelope naming the client.
fn modern_list(s: &mut Shim, client: &str) -> Value {
    s.request(
        "tools/list",
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }}),
    )
}

/// The clients whose `tools/list` reached the child, from its event log.
fn lists_asked_by(events: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("tools/list "))
        .filter_map(|l| l.split(" client=").nth(1).map(String::from))
        .collect()
}

#[test]
fn a_private_tool_list_is_never_written_down_nor_served_to_another_session() {
    // The fake marks its lists private, as both SDKs do by default.
    let (env, events) = Env::with_fake_events(json!({}));
    {
        let mut d = env.daemon();
        let mut a = env.shim();
        let listed = modern_list(&mut a, "session-a");
        assert!(listed["result"]["tools"].is_array(), "{listed}");
        assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
        drop(a);
        // The era and discover answer are written down (what every session is told of the
        // server); the private list is not.
        let file = cache_file(&env);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("\"era\""), "{text}");
        assert!(!text.contains("\"echo\""), "a private list on disk: {text}");
        let (code, _) = d.signal_and_wait(libc::SIGTERM);
        assert_eq!(code, Some(0));
    }
    // A new daemon: two new sessions, one of each era, each get the list from the child, asked
    // for them, never another session's from the disk.
    let _d = env.daemon();
    let mut b = env.shim();
    let listed = modern_list(&mut b, "session-b");
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let mut c = env.shim();
    c.initialize();
    let listed = c.request("tools/list", json!({}));
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    let asked = lists_asked_by(&events);
    for client in ["session-b", "test-client"] {
        assert!(
            asked.iter().any(|a| a == client),
            "{client}'s list was not asked of the child: {asked:?}"
        );
    }
    let text = std::fs::read_to_string(cache_file(&env)).unwrap();
    assert!(!text.contains("\"echo\""), "a private list on disk: {text}");
}

#[test]
fn the_cache_is_the_users_alone_also_when_an_older_coogle_left_it_open() {
    let env = Env::with_fake(json!({}));
    // What an older coogle left: the directory 0755 and a file 0644.
    let dir = cache_dir(&env);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    {
        let mut d = env.daemon();
        env.wait_upstream_ready();
        let file = cache_file(&env);
        let (code, _) = d.signal_and_wait(libc::SIGTERM);
        assert_eq!(code, Some(0));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let _d = env.daemon();
    env.wait_upstream_ready();
    let file = cache_file(&env);
    wait_for("the cache to be tightened", Duration::from_secs(10), || {
        mode(&dir) == 0o700 && mode(&file) == 0o600
    });
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
    }
}

/// What replaces the cache file between two daemon runs.
fn with_cache_replaced(replace: impl FnOnce(&std::path::Path)) {
    let env = Env::with_fake(json!({}));
    let file = {
        let mut d = env.daemon();
        env.wait_upstream_ready();
        let file = cache_file(&env);
        let (code, _) = d.signal_and_wait(libc::SIGTERM);
        assert_eq!(code, Some(0));
        file
    };
    std::fs::remove_file(&file).unwrap();
    replace(&file);
    let d = env.daemon();
    let before = rss_kib(d.pid());
    let mut s = env.shim();
    s.initialize();
    assert_eq!(text(&s.call("echo", json!({"text": "served"}))), "served");
    assert!(control(&env.socket, "ping", Value::Null).is_ok());
    let after = rss_kib(d.pid());
    assert!(
        after < before + 64 * 1024,
        "the daemon grew from {before} to {after} KiB"
    );
    let log = std::fs::read_to_string(&env.log).unwrap();
    assert!(log.contains("ignoring the upstream cache"), "{log}");
}

#[test]
fn a_fifo_in_place_of_the_cache_costs_only_the_cache() {
    with_cache_replaced(|file| {
        let path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    });
}

#[test]
fn a_symlink_to_dev_zero_in_place_of_the_cache_costs_only_the_cache() {
    with_cache_replaced(|file| std::os::unix::fs::symlink("/dev/zero", file).unwrap());
}

#[test]
fn an_oversized_cache_file_is_not_read() {
    with_cache_replaced(|file| {
        let f = std::fs::File::create(file).unwrap();
        f.set_len(1 << 30).unwrap();
    });
}
