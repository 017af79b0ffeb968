//! The installer is a transaction: `share`, `setup`, `unshare` and `uninstall` are killed
//! (SIGKILL, through the crash points `COOGLE_CRASH_AT` names) at every write step in turn.
//! After each kill every client file is whole (its original, or all of that file's changes),
//! the temp files left are private (0600), and the next run of any of them puts the record,
//! the client files and config.json back in agreement: a re-run shares what was not shared,
//! and `unshare`/`uninstall` then give back the original bytes, removing every upstream they
//! added, with no temp file or lock left behind.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "sk-live-crash-test-token-1234";
const NOTES_KEY: &str = "notes-crash-secret-5678";

/// Claude Code's file (user-scope and project entries, one holding a secret) and Cursor's.
struct World {
    env: Env,
    claude: PathBuf,
    cursor: PathBuf,
    claude0: Vec<u8>,
    cursor0: Vec<u8>,
    config0: Vec<u8>,
}

fn world() -> World {
    let env = Env::new();
    let fake = fake_mcp().to_string_lossy().into_owned();
    env.write_config(&json!({"servers": {"google": {"command": fake,
        "credentials": {"source": "none"}}}}));
    let claude = env.home.join(".claude.json");
    let cursor = env.home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    let doc = json!({
        "numStartups": 7,
        "mcpServers": {
            "memory": {"type": "stdio", "command": fake, "args": ["memory"], "env": {}},
            "tokens": {"type": "stdio", "command": fake, "args": ["tokens"],
                       "env": {"API_TOKEN": TOKEN}},
        },
        "projects": {"/home/ada/alpha": {"mcpServers": {
            "notes": {"type": "stdio", "command": fake, "args": ["notes"],
                      "env": {"NOTES_KEY": NOTES_KEY}}}}},
    });
    let mut bytes = serde_json::to_vec_pretty(&doc).unwrap();
    bytes.push(b'\n');
    std::fs::write(&claude, &bytes).unwrap();
    // 0644, as Claude Code leaves it: a leftover temp file must not be that open.
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cursor_doc = json!({"mcpServers": {"api": {"command": fake, "args": ["cursor"],
                                                   "env": {"API_TOKEN": TOKEN}}}});
    std::fs::write(&cursor, serde_json::to_vec(&cursor_doc).unwrap()).unwrap();
    World {
        claude0: bytes,
        cursor0: std::fs::read(&cursor).unwrap(),
        config0: std::fs::read(&env.config).unwrap(),
        env,
        claude,
        cursor,
    }
}

/// The entries of the world's client files, by where they are.
const ENTRIES: [(&str, &[&str]); 4] = [
    ("claude", &["mcpServers", "memory"]),
    ("claude", &["mcpServers", "tokens"]),
    (
        "claude",
        &["projects", "/home/ada/alpha", "mcpServers", "notes"],
    ),
    ("cursor", &["mcpServers", "api"]),
];

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{} is not whole JSON ({e}): {}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        )
    })
}

fn at<'a>(doc: &'a Value, loc: &[&str]) -> &'a Value {
    loc.iter().fold(doc, |v, k| &v[*k])
}

fn runs_coogle(entry: &Value) -> bool {
    entry["command"] == COOGLE
}

impl World {
    fn file(&self, which: &str) -> &Path {
        if which == "claude" {
            &self.claude
        } else {
            &self.cursor
        }
    }

    fn run(&self, args: &[&str], crash_at: Option<&str>) -> Output {
        let mut cmd = self.env.cmd();
        if let Some(n) = crash_at {
            cmd.env("COOGLE_CRASH_AT", n);
        }
        Output::of(cmd, args)
    }

    /// Each client file is whole and all-or-nothing: none of its entries shared, or all.
    fn assert_files_whole(&self, after: &str) {
        for which in ["claude", "cursor"] {
            let doc = read_json(self.file(which));
            let shared: Vec<bool> = ENTRIES
                .iter()
                .filter(|(w, _)| *w == which)
                .map(|(_, loc)| runs_coogle(at(&doc, loc)))
                .collect();
            assert!(
                shared.iter().all(|s| *s) || shared.iter().all(|s| !*s),
                "{which} is half changed {after}: {doc}"
            );
        }
    }

    /// Every temp file coogle left is private.
    fn assert_temp_files_private(&self, after: &str) {
        for t in self.leftovers(".coogle-tmp-") {
            let mode = std::fs::metadata(&t).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} is {mode:o} {after}", t.display());
        }
    }

    /// Files whose name contains `infix` beside the files coogle writes.
    fn leftovers(&self, infix: &str) -> Vec<PathBuf> {
        let dirs = [
            self.env.home.clone(),
            self.cursor.parent().unwrap().to_path_buf(),
            self.env.config.parent().unwrap().to_path_buf(),
        ];
        dirs.iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(infix))
            .collect()
    }

    /// Nothing a killed run left stays after a finished one: no temp file, no lock.
    fn assert_nothing_left(&self, after: &str) {
        let temps = self.leftovers(".coogle-tmp-");
        assert!(temps.is_empty(), "temp files left {after}: {temps:?}");
        let locks = self.leftovers(".lock");
        assert!(locks.is_empty(), "locks left {after}: {locks:?}");
    }

    /// Every entry runs coogle, behind an upstream config.json has, holding its env.
    fn assert_all_shared(&self, after: &str) {
        let config = read_json(&self.env.config);
        for (which, loc) in ENTRIES {
            let doc = read_json(self.file(which));
            let entry = at(&doc, loc);
            assert!(runs_coogle(entry), "{loc:?} not shared {after}: {doc}");
            let server = entry["args"][2].as_str().unwrap();
            assert!(
                config["servers"][server].is_object(),
                "{loc:?} runs upstream {server}, which config.json lacks {after}: {config}"
            );
        }
        assert_eq!(config["servers"]["tokens"]["env"]["API_TOKEN"], TOKEN);
    }

    /// Everything as before coogle touched it.
    fn assert_original(&self, after: &str, out: &Output) {
        assert_eq!(
            String::from_utf8_lossy(&std::fs::read(&self.claude).unwrap()),
            String::from_utf8_lossy(&self.claude0),
            "~/.claude.json {after}\n{out}"
        );
        assert_eq!(
            std::fs::read(&self.cursor).unwrap(),
            self.cursor0,
            "Cursor's file {after}\n{out}"
        );
        let mode = std::fs::metadata(&self.claude)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o644, "the file keeps its mode {after}");
    }

    fn assert_config_original(&self, after: &str, out: &Output) {
        let config = read_json(&self.env.config);
        let names: Vec<&String> = config["servers"].as_object().unwrap().keys().collect();
        assert_eq!(names, ["google"], "{after}\n{out}");
        assert_eq!(
            config["servers"]["google"],
            read_json_bytes(&self.config0)["servers"]["google"]
        );
    }

    fn state_file(&self) -> PathBuf {
        self.env.home.join(".config/coogle/setup-state.json")
    }
}

fn read_json_bytes(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap()
}

fn killed(out: &Output) -> bool {
    // Killed by a signal: no exit code.
    out.status.is_none()
}

/// Run `prepare` then `args` killed at crash point n = 1, 2, … until a run finishes; after each
/// kill, check the files and hand the world to `recover`. Returns how many points there were.
fn sweep(args: &[&str], prepare: impl Fn(&World), recover: impl Fn(&World, &str)) -> u32 {
    for n in 1..200u32 {
        let w = world();
        prepare(&w);
        let out = w.run(args, Some(&n.to_string()));
        if !killed(&out) {
            assert_eq!(out.status, Some(0), "{out}");
            return n - 1;
        }
        let after = format!(
            "after `coogle {}` was killed at crash point {n}",
            args.join(" ")
        );
        w.assert_files_whole(&after);
        w.assert_temp_files_private(&after);
        recover(&w, &after);
    }
    panic!("coogle {args:?} never finished");
}

const SHARE: &[&str] = &["share", "--all", "--yes"];
const UNSHARE: &[&str] = &["unshare", "--all", "--yes"];

/// Regression: a `share` killed after `~/.claude.json` was renamed and before the state file
/// recorded it left entries a re-run took for already shared, and `unshare --all` then removed
/// their upstreams from config.json, leaving Claude Code's entries pointing at nothing.
#[test]
fn share_killed_at_any_write_is_finished_by_the_next_run() {
    let points = sweep(
        SHARE,
        |_| {},
        |w, after| {
            let again = w.run(SHARE, None);
            assert_eq!(again.status, Some(0), "re-run {after}: {again}");
            w.assert_all_shared(after);
            w.assert_nothing_left(after);
            let back = w.run(UNSHARE, None);
            assert_eq!(back.status, Some(0), "unshare {after}: {back}");
            w.assert_original(after, &back);
            w.assert_config_original(after, &back);
            assert!(!w.state_file().exists(), "nothing left recorded {after}");
            w.assert_nothing_left(after);
        },
    );
    assert!(points >= 12, "only {points} crash points were reached");
}

/// Killed at any point, an `unshare` is finished by the next one: every entry back, byte for
/// byte, and every upstream share added gone from config.json.
#[test]
fn unshare_killed_at_any_write_is_finished_by_the_next_run() {
    let prepare = |w: &World| {
        let out = w.run(SHARE, None);
        assert_eq!(out.status, Some(0), "{out}");
    };
    let points = sweep(UNSHARE, prepare, |w, after| {
        let back = w.run(UNSHARE, None);
        assert_eq!(back.status, Some(0), "unshare {after}: {back}");
        w.assert_original(after, &back);
        w.assert_config_original(after, &back);
        assert!(!w.state_file().exists(), "nothing left recorded {after}");
        w.assert_nothing_left(after);
    });
    assert!(points >= 6, "only {points} crash points were reached");
}

const SETUP: &[&str] = &[
    "setup",
    "--yes",
    "--credentials-source",
    "none",
    "--no-service",
    "--skip-test",
    "--skip-verify",
    "--client",
    "claude-code",
    "--client",
    "cursor",
    "--share-all",
];

/// Regression: a `setup` killed between its client-file write and its record left
/// `mcpServers.coogle` behind after a re-run and `uninstall`. Killed at any point, a re-run of
/// setup finishes the job and `uninstall` gives back the original bytes.
#[test]
fn setup_killed_at_any_write_is_finished_by_the_next_run() {
    let points = sweep(
        SETUP,
        |_| {},
        |w, after| {
            let again = w.run(SETUP, None);
            assert_eq!(again.status, Some(0), "re-run {after}: {again}");
            w.assert_all_shared(after);
            let doc = read_json(&w.claude);
            assert!(runs_coogle(&doc["mcpServers"]["coogle"]), "{after}: {doc}");
            w.assert_nothing_left(after);
            let back = w.run(&["uninstall", "--yes"], None);
            assert_eq!(back.status, Some(0), "uninstall {after}: {back}");
            w.assert_original(after, &back);
            w.assert_config_original(after, &back);
            assert!(!w.state_file().exists(), "nothing left recorded {after}");
            w.assert_nothing_left(after);
        },
    );
    assert!(points >= 12, "only {points} crash points were reached");
}

/// Killed at any point, an `uninstall` is finished by the next one.
#[test]
fn uninstall_killed_at_any_write_is_finished_by_the_next_run() {
    let prepare = |w: &World| {
        let out = w.run(SETUP, None);
        assert_eq!(out.status, Some(0), "{out}");
    };
    let points = sweep(&["uninstall", "--yes"], prepare, |w, after| {
        let back = w.run(&["uninstall", "--yes"], None);
        assert_eq!(back.status, Some(0), "uninstall {after}: {back}");
        w.assert_original(after, &back);
        w.assert_config_original(after, &back);
        assert!(!w.state_file().exists(), "nothing left recorded {after}");
        w.assert_nothing_left(after);
    });
    assert!(points >= 6, "only {points} crash points were reached");
}

/// Through Claude Code's CLI, `share` removes an entry (`claude mcp remove`) before it adds
/// coogle's (`add-json`): killed in between, the entry is gone from the file. The next run puts
/// the original back and shares it, and `unshare` gives back the original bytes.
#[test]
fn share_killed_between_the_clis_remove_and_add_loses_nothing() {
    support::find_program("python3").expect("python3 runs the stand-in claude CLI");
    let fake_claude = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake-claude");
    for point in ["cli-removed", "cli-removed:2", "cli-added"] {
        let w = world();
        let run = |args: &[&str], crash: Option<&str>| {
            let mut cmd = w.env.cmd();
            cmd.env("COOGLE_CLAUDE_CLI", &fake_claude);
            if let Some(c) = crash {
                cmd.env("COOGLE_CRASH_AT", c);
            }
            Output::of(cmd, args)
        };
        let out = run(SHARE, Some(point));
        assert!(killed(&out), "{point}: {out}");
        let doc = read_json(&w.claude);
        if point.starts_with("cli-removed") {
            let gone = ["memory", "tokens"]
                .iter()
                .any(|n| doc["mcpServers"].get(*n).is_none());
            assert!(gone, "the kill at {point} left an entry removed: {doc}");
        }
        let again = run(SHARE, None);
        assert_eq!(again.status, Some(0), "{point}: {again}");
        w.assert_all_shared(point);
        let back = run(UNSHARE, None);
        assert_eq!(back.status, Some(0), "{point}: {back}");
        assert_eq!(
            read_json(&w.claude),
            read_json_bytes(&w.claude0),
            "{point}: {back}"
        );
        w.assert_config_original(point, &back);
        assert!(!w.state_file().exists(), "{point}");
    }
}
