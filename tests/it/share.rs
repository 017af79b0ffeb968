//! `coogle share` / `coogle unshare` on realistic client files: every stdio entry moves behind
//! the daemon with one upstream per distinct launch, secrets move into the 0600 config and off
//! every entry and argv, an unparsable file is refused untouched while the rest proceeds, a
//! second run changes nothing, and unshare (or uninstall) gives back the exact original bytes.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::{Value, json};
use support::*;

const TOKEN: &str = "sk-live-very-secret-token-1234";
const NOTES_KEY: &str = "notes-secret-key-5678";

/// A Claude Code user with user-scope entries (a stdio server with a secret, one named like
/// a project's, an http one) and two projects naming the same `notes` server with the same env
/// (two programs all the same: each runs in its own project).
fn claude_json(fake: &str, alpha: &str, beta: &str) -> Value {
    json!({
        "numStartups": 42,
        "installMethod": "native",
        "mcpServers": {
            "memory": {"type": "stdio", "command": fake, "args": ["memory"], "env": {}},
            "remote": {"type": "http", "url": "https://mcp.example.com/mcp"},
            "tokens": {"type": "stdio", "command": fake, "args": ["tokens"],
                       "env": {"API_TOKEN": TOKEN}},
        },
        "projects": {
            alpha: {
                "allowedTools": [],
                "mcpServers": {"notes": {"type": "stdio", "command": fake, "args": ["notes"],
                                         "env": {"NOTES_KEY": NOTES_KEY}}},
            },
            beta: {
                "allowedTools": ["Bash"],
                "mcpServers": {
                    "notes": {"type": "stdio", "command": fake, "args": ["notes"],
                              "env": {"NOTES_KEY": NOTES_KEY}},
                    "memory": {"type": "stdio", "command": fake, "args": ["memory"],
                               "env": {"MEMORY_FILE": "/home/ada/beta/memory.json"}},
                },
            },
        },
    })
}

struct Files {
    /// The two projects' directories, as `~/.claude.json` names them.
    alpha: String,
    beta: String,
    claude: PathBuf,
    desktop: PathBuf,
    cursor: PathBuf,
    state: PathBuf,
}

/// Write the client files: Claude Code's and Cursor's with the same launch as Claude Code's
/// `tokens` (Claude Desktop's is not there; [`break_desktop`] writes an unparsable one).
fn write_clients(env: &Env) -> Files {
    let fake = fake_mcp().to_string_lossy().into_owned();
    let claude = env.home.join(".claude.json");
    let desktop = env.home.join(".config/Claude/claude_desktop_config.json");
    let cursor = env.home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    let project = |name: &str| {
        let dir = env.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.to_string_lossy().into_owned()
    };
    let (alpha, beta) = (project("alpha"), project("beta"));
    std::fs::write(&claude, pretty(&claude_json(&fake, &alpha, &beta))).unwrap();
    let cursor_doc = json!({"mcpServers": {"api": {"command": fake, "args": ["tokens"],
                                                   "env": {"API_TOKEN": TOKEN}}}});
    // Written compactly, unlike coogle's own output: only a restore of the exact bytes gives
    // this file back.
    std::fs::write(&cursor, serde_json::to_vec(&cursor_doc).unwrap()).unwrap();
    Files {
        alpha,
        beta,
        claude,
        desktop,
        cursor,
        state: env.home.join(".config/coogle/setup-state.json"),
    }
}

/// An unparsable Claude Desktop config, which every command must refuse and leave untouched.
fn break_desktop(f: &Files) {
    std::fs::create_dir_all(f.desktop.parent().unwrap()).unwrap();
    std::fs::write(
        &f.desktop,
        b"{\"mcpServers\": {\"x\": {\"command\": \"y\",}\n",
    )
    .unwrap();
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).unwrap();
    b.push(b'\n');
    b
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn ok(out: &Output) {
    assert_eq!(out.status, Some(0), "{out}");
}

/// The unparsable Claude Desktop file is a failure, said once (exit 1), and left untouched;
/// the other files are shared all the same.
#[test]
fn share_all_gives_one_upstream_per_launch_and_unshare_gives_the_bytes_back() {
    let env = Env::new();
    let f = write_clients(&env);
    break_desktop(&f);
    let (claude0, desktop0, cursor0) = (
        std::fs::read(&f.claude).unwrap(),
        std::fs::read(&f.desktop).unwrap(),
        std::fs::read(&f.cursor).unwrap(),
    );
    let out = env.run(&["share", "--all"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(
        out.stdout.contains("✗ Claude Desktop: could not parse")
            && out.stdout.contains("it was left unchanged"),
        "{out}"
    );
    // Regression (issue 20, item 10): "…; it was left unchanged; left untouched".
    assert!(!out.stdout.contains("left untouched"), "said twice: {out}");
    assert_eq!(
        out.stdout.matches("left unchanged").count(),
        1,
        "said once: {out}"
    );
    assert_eq!(
        std::fs::read(&f.desktop).unwrap(),
        desktop0,
        "refused file untouched"
    );

    // config.json: one upstream per distinct launch (the same text in two projects is two
    // launches, each in its project), google kept, secrets there, 0600.
    let config = read_json(&env.config);
    let names: Vec<&String> = config["servers"].as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        ["google", "memory", "tokens", "notes", "notes-2", "memory-2"],
        "{config}"
    );
    assert_eq!(config["servers"]["notes"]["cwd"], f.alpha.as_str());
    assert_eq!(config["servers"]["notes-2"]["cwd"], f.beta.as_str());
    assert_eq!(config["servers"]["memory-2"]["cwd"], f.beta.as_str());
    assert!(config["servers"]["memory"].get("cwd").is_none());
    let servers = &config["servers"];
    assert_eq!(servers["tokens"]["env"]["API_TOKEN"], TOKEN);
    assert_eq!(servers["notes"]["env"]["NOTES_KEY"], NOTES_KEY);
    assert_eq!(
        servers["memory-2"]["env"]["MEMORY_FILE"],
        "/home/ada/beta/memory.json"
    );
    assert_eq!(servers["notes"]["sharing"], "shared");
    let mode = std::fs::metadata(&env.config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // The entries run coogle's shim, with no env; the http entry and other keys are kept.
    let doc = read_json(&f.claude);
    let socket = env.socket.to_string_lossy().into_owned();
    let shim = |server: &str| json!(["mcp", "--server", server, "--socket", socket]);
    let user = &doc["mcpServers"];
    assert_eq!(user["memory"]["command"], COOGLE);
    assert_eq!(user["memory"]["args"], shim("memory"));
    assert_eq!(user["tokens"]["args"], shim("tokens"));
    assert_eq!(
        user["remote"],
        claude_json("x", "a", "b")["mcpServers"]["remote"]
    );
    let alpha = &doc["projects"][&f.alpha]["mcpServers"]["notes"];
    let beta = &doc["projects"][&f.beta]["mcpServers"];
    assert_eq!(alpha["args"], shim("notes"));
    assert_eq!(
        beta["notes"]["args"],
        shim("notes-2"),
        "the look-alike in another project is another program"
    );
    assert_eq!(beta["memory"]["args"], shim("memory-2"));
    assert_eq!(doc["numStartups"], 42);
    assert_eq!(doc["projects"][&f.beta]["allowedTools"], json!(["Bash"]));
    assert_eq!(
        read_json(&f.cursor)["mcpServers"]["api"]["args"],
        shim("tokens")
    );
    for path in [&f.claude, &f.cursor] {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(!text.contains(TOKEN) && !text.contains(NOTES_KEY), "{text}");
        assert!(!text.contains("\"env\""), "{text}");
    }

    // A second run changes nothing, byte for byte.
    let (claude1, cursor1, config1) = (
        std::fs::read(&f.claude).unwrap(),
        std::fs::read(&f.cursor).unwrap(),
        std::fs::read(&env.config).unwrap(),
    );
    std::fs::remove_file(&f.desktop).unwrap();
    let again = env.run(&["share", "--all"]);
    ok(&again);
    assert!(again.stdout.contains("nothing to share"), "{again}");
    assert_eq!(std::fs::read(&f.claude).unwrap(), claude1);
    assert_eq!(std::fs::read(&f.cursor).unwrap(), cursor1);
    assert_eq!(std::fs::read(&env.config).unwrap(), config1);

    // unshare --all: the original bytes of every file only coogle touched.
    let back = env.run(&["unshare", "--all"]);
    ok(&back);
    assert_eq!(std::fs::read(&f.claude).unwrap(), claude0, "{back}");
    assert_eq!(std::fs::read(&f.cursor).unwrap(), cursor0, "{back}");
    let config = read_json(&env.config);
    let names: Vec<&String> = config["servers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["google"], "{config}");
    assert!(!f.state.exists(), "nothing left recorded");
}

/// The rewritten entry, started as a client would, reaches its server through the daemon with
/// the env that moved into config.json, and the secret is on no argv.
#[test]
fn a_shared_entry_runs_its_server_through_the_daemon() {
    let env = Env::new();
    let f = write_clients(&env);
    ok(&env.run(&["share", "--all"]));
    let _d = env.daemon();
    let doc = read_json(&f.claude);
    let entry = |e: &Value| -> Vec<String> {
        assert_eq!(e["command"], COOGLE);
        let args = e["args"].as_array().unwrap();
        args.iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect()
    };
    let notes = entry(&doc["projects"][&f.alpha]["mcpServers"]["notes"]);
    let memory2 = entry(&doc["projects"][&f.beta]["mcpServers"]["memory"]);
    let mut a = env.stdio_server(
        env.cmd(),
        &notes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
    );
    let mut b = env.stdio_server(
        env.cmd(),
        &memory2.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
    );
    a.initialize();
    b.initialize();
    let r = a.call("env", json!({"name": "NOTES_KEY"}));
    assert_eq!(text(&r), NOTES_KEY, "{r}");
    let r = b.call("env", json!({"name": "MEMORY_FILE"}));
    assert_eq!(text(&r), "/home/ada/beta/memory.json", "{r}");
    let r = b.call("env", json!({"name": "NOTES_KEY"}));
    assert_eq!(text(&r), "<unset>", "each upstream has its own env: {r}");
    for pid in [a.child.id(), b.child.id()] {
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv = String::from_utf8_lossy(&argv);
        assert!(
            !argv.contains(NOTES_KEY) && !argv.contains("memory.json"),
            "{argv}"
        );
    }
    let status = control(&env.socket, "status", Value::Null).unwrap();
    let running: Vec<&str> = status["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["state"] == "ready")
        .map(|u| u["name"].as_str().unwrap())
        .collect();
    assert_eq!(running, ["notes", "memory-2"], "{status}");
}

/// Regression: `share` used to stop the running daemon (the daemon read config.json only at
/// start), cutting every other session's calls short. Now it asks the daemon to `reload`: a
/// call in flight gets its answer, the daemon keeps its pid, and the new upstreams are served.
#[test]
fn share_reloads_a_running_daemon_and_no_call_is_lost() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp(),
        "credentials": {"source": "none"}}}}));
    let f = write_clients(&env);
    let d = env.daemon();
    let mut g = env.shim();
    g.initialize();
    let long = json!("long");
    g.send(
        &json!({"jsonrpc": "2.0", "id": long, "method": "tools/call",
                   "params": {"name": "sleep", "arguments": {"ms": 3000}}}),
    );
    wait_status(
        &env.socket,
        "the call to be in flight",
        std::time::Duration::from_secs(20),
        |s| s["upstreams"][0]["inFlight"] == 1,
    );

    let out = env.run(&["share", "--all"]);
    ok(&out);
    assert!(
        out.stdout.contains("reloaded its config without stopping"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("added: memory, tokens, notes, notes-2, memory-2"),
        "{out}"
    );
    let r = g.response(&long, std::time::Duration::from_secs(20));
    assert_eq!(text(&r), "slept 3000 ms", "{r}");
    let pid = |env: &Env| control(&env.socket, "info", Value::Null).unwrap()["pid"].as_u64();
    assert_eq!(pid(&env), Some(d.pid() as u64), "the same daemon serves on");

    let doc = read_json(&f.claude);
    let args: Vec<String> = doc["projects"][&f.alpha]["mcpServers"]["notes"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let mut notes = env.stdio_server(
        env.cmd(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    notes.initialize();
    let r = notes.call("env", json!({"name": "NOTES_KEY"}));
    assert_eq!(text(&r), NOTES_KEY, "{r}");

    // Unshare removes the upstreams from config.json; the daemon only reports them removed
    // (a session may still be using one) and keeps running.
    let out = env.run(&["unshare", "--all"]);
    ok(&out);
    assert!(
        out.stdout
            .contains("removed: memory, tokens, notes, notes-2, memory-2"),
        "{out}"
    );
    assert_eq!(pid(&env), Some(d.pid() as u64));
    assert_eq!(text(&g.call("echo", json!({"text": "on"}))), "on");
}

/// Regression: `share --all --yes` on an unparsable `~/.claude.json` said "✓ nothing to
/// share" and exited 0. The failure is said once, the exit is 1, and the file is untouched.
#[test]
fn share_on_an_unparsable_claude_json_fails_and_says_it_once() {
    let env = Env::new();
    let f = write_clients(&env);
    std::fs::remove_file(&f.cursor).unwrap();
    let broken = b"{\"mcpServers\": {\"memory\": {\"command\": \"x\",}}\n";
    std::fs::write(&f.claude, broken).unwrap();
    let out = env.run(&["share", "--all", "--yes"]);
    assert_eq!(out.status, Some(1), "{out}");
    assert!(!out.stdout.contains("✓ nothing to share"), "{out}");
    assert_eq!(out.stdout.matches("could not parse").count(), 1, "{out}");
    assert!(out.stdout.contains("✗ Claude Code"), "{out}");
    assert_eq!(std::fs::read(&f.claude).unwrap(), broken);
    let strays: Vec<_> = std::fs::read_dir(&env.home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".coogle-"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
}

/// `unshare --dry-run` says what it would give back and what config.json would lose, and
/// changes nothing.
#[test]
fn unshare_dry_run_changes_nothing() {
    let env = Env::new();
    let f = write_clients(&env);
    ok(&env.run(&["share", "--all"]));
    let before = |f: &Files| {
        (
            std::fs::read(&f.claude).unwrap(),
            std::fs::read(&f.cursor).unwrap(),
            std::fs::read(&env.config).unwrap(),
            std::fs::read(&f.state).unwrap(),
        )
    };
    let was = before(&f);
    let out = env.run(&["unshare", "--all", "--dry-run"]);
    ok(&out);
    assert!(
        out.stdout.contains(&format!(
            "would give back projects[\"{}\"].mcpServers.notes",
            f.alpha
        )),
        "{out}"
    );
    assert!(
        out.stdout.contains("would remove upstream memory-2"),
        "{out}"
    );
    assert!(out.stdout.contains("dry run: nothing changed"), "{out}");
    assert!(was == before(&f), "a dry run changed a file: {out}");
    let out = env.run(&["unshare", "--all"]);
    ok(&out);
    assert!(!f.state.exists(), "{out}");
}

#[test]
fn share_without_a_terminal_needs_to_be_told_which() {
    let env = Env::new();
    let f = write_clients(&env);
    let before = std::fs::read(&f.claude).unwrap();
    let out = env.run(&["share"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(
        out.stderr.contains("--all") && out.stderr.contains("NAME"),
        "{out}"
    );
    let out = env.run(&["share", "nosuch"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(
        out.stderr.contains("nosuch") && out.stderr.contains("notes"),
        "{out}"
    );
    let out = env.run(&["share", "--dry-run", "--all"]);
    ok(&out);
    assert!(
        out.stdout.contains("would run behind upstream memory-2"),
        "{out}"
    );
    assert_eq!(std::fs::read(&f.claude).unwrap(), before);
    assert!(!env.config.exists());
}

/// Sharing one name shares it everywhere; unshare leaves an entry the user edited since, and
/// the upstream it still runs.
#[test]
fn unshare_leaves_an_edited_entry_and_its_upstream() {
    let env = Env::new();
    let f = write_clients(&env);
    let out = env.run(&["share", "notes", "tokens"]);
    ok(&out);
    let mut doc = read_json(&f.claude);
    assert_eq!(
        doc["mcpServers"]["memory"]["command"],
        fake_mcp().to_str().unwrap()
    );
    doc["projects"][&f.alpha]["mcpServers"]["notes"]["timeout"] = json!(5000);
    std::fs::write(&f.claude, pretty(&doc)).unwrap();
    let out = env.run(&["unshare", "--all"]);
    ok(&out);
    assert!(
        out.stdout
            .contains("was changed since it was shared; left alone"),
        "{out}"
    );
    let doc = read_json(&f.claude);
    let original = claude_json(fake_mcp().to_str().unwrap(), &f.alpha, &f.beta);
    assert_eq!(
        doc["projects"][&f.alpha]["mcpServers"]["notes"]["timeout"],
        5000
    );
    assert_eq!(
        doc["projects"][&f.beta]["mcpServers"]["notes"],
        original["projects"][&f.beta]["mcpServers"]["notes"]
    );
    assert_eq!(
        doc["mcpServers"]["tokens"],
        original["mcpServers"]["tokens"]
    );
    let config = read_json(&env.config);
    assert!(
        config["servers"]["notes"].is_object(),
        "still used: {config}"
    );
    assert!(config["servers"].get("notes-2").is_none(), "{config}");
    assert!(config["servers"].get("tokens").is_none(), "{config}");
}

#[test]
fn uninstall_also_unshares() {
    let env = Env::new();
    let f = write_clients(&env);
    let claude0 = std::fs::read(&f.claude).unwrap();
    ok(&env.run(&["share", "--all"]));
    let out = env.run(&["uninstall", "--yes", "--keep-service"]);
    ok(&out);
    assert_eq!(std::fs::read(&f.claude).unwrap(), claude0, "{out}");
}

/// Claude Code itself, after `coogle share` registered the user-scope entry through its CLI,
/// starts the shared server and sees it connected.
#[test]
fn claude_code_connects_to_a_shared_server() {
    let Some(claude) = claude_cli() else {
        return;
    };
    let env = Env::new();
    let fake = fake_mcp();
    let entry =
        json!({"type": "stdio", "command": fake, "args": ["x"], "env": {"API_TOKEN": TOKEN}});
    let run = |args: &[&str]| env.run_claude(&claude, args);
    let (code, text) = run(&[
        "mcp",
        "add-json",
        "--scope",
        "user",
        "fakeserver",
        &entry.to_string(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    let claude_json = env.home.join(".claude.json");
    let before = read_json(&claude_json)["mcpServers"]["fakeserver"].clone();
    let mut cmd = env.cmd();
    cmd.env("COOGLE_CLAUDE_CLI", &claude);
    let out = Output::of(cmd, &["share", "--all"]);
    ok(&out);
    assert!(out.stdout.contains("claude mcp add-json"), "{out}");
    let stored = read_json(&claude_json)["mcpServers"]["fakeserver"].clone();
    assert_eq!(stored["command"], COOGLE, "{stored}");
    assert!(!stored.to_string().contains(TOKEN), "{stored}");
    let (code, text) = run(&["mcp", "list"]);
    assert_eq!(code, Some(0), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("fakeserver"))
        .unwrap_or("");
    assert!(line.contains("Connected"), "{text}");
    ok(&env.run(&["unshare", "fakeserver"]));
    assert_eq!(read_json(&claude_json)["mcpServers"]["fakeserver"], before);
}

/// `setup --yes` leaves other servers alone; `--share-all` shares them as `coogle share --all`
/// does, and doctor then finds every shared entry's upstream.
#[test]
fn setup_shares_with_share_all_and_doctor_checks_the_upstreams() {
    let env = Env::new();
    env.write_config(&json!({"servers": {"google": {"command": fake_mcp(),
        "credentials": {"source": "none"}}}}));
    let f = write_clients(&env);
    let setup = |extra: &[&str]| {
        let mut args = vec![
            "setup",
            "--yes",
            "--credentials-source",
            "none",
            "--no-service",
            "--skip-test",
            "--skip-verify",
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let out = setup(&[]);
    ok(&out);
    assert!(out.stdout.contains("[7/9] Share other servers"), "{out}");
    let doc = read_json(&f.claude);
    assert_eq!(
        doc["mcpServers"]["tokens"]["command"],
        fake_mcp().to_str().unwrap()
    );
    let out = setup(&["--share-all"]);
    ok(&out);
    let doc = read_json(&f.claude);
    assert_eq!(doc["mcpServers"]["tokens"]["command"], COOGLE, "{out}");
    let config = read_json(&env.config);
    assert_eq!(config["servers"]["tokens"]["env"]["API_TOKEN"], TOKEN);

    let doctor = env.run(&["doctor"]);
    assert!(doctor.stdout.contains("client entries shared"), "{doctor}");
    assert!(
        !doctor.stdout.contains("which config.json does not have"),
        "{doctor}"
    );
    // An upstream removed by hand: doctor names the entry and the fix.
    let mut config = read_json(&env.config);
    config["servers"]
        .as_object_mut()
        .unwrap()
        .shift_remove("notes");
    env.write_config(&config);
    let doctor = env.run(&["doctor"]);
    assert_eq!(doctor.status, Some(1), "{doctor}");
    assert!(
        doctor.stdout.contains(
            &format!("projects[\"{}\"].mcpServers.notes runs upstream notes, which config.json does not have", f.alpha)
        ),
        "{doctor}"
    );
    assert!(doctor.stdout.contains("coogle unshare notes"), "{doctor}");
}
