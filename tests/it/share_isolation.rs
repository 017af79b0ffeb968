//! `coogle share --all` over a realistic setup of two projects and two clients, then each
//! rewritten entry run the way its client runs it: every agent reaches its own program, in its
//! own directory, with its own environment, and nothing of anyone else's. The rule of sharing:
//! a session through coogle sees exactly what it would see running the server from its own
//! client.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::*;

fn whoami_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/servers/whoami.py")
}

/// A project directory holding its own `server.py` and `secret.txt`.
fn project(env: &Env, name: &str) -> PathBuf {
    let dir = env.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(whoami_py(), dir.join("server.py")).unwrap();
    std::fs::write(dir.join("secret.txt"), format!("secret of {name}\n")).unwrap();
    dir.canonicalize().unwrap()
}

/// Run a client entry as its client does: its command and args, in `dir`, with the client's
/// environment plus `vars` (what a project's direnv or a terminal adds).
fn run_entry(env: &Env, entry: &Value, dir: &Path, vars: &[(&str, &str)]) -> Shim {
    let command = entry["command"].as_str().unwrap();
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mut cmd = env.sealed(command);
    cmd.current_dir(dir).env_remove("CLAUDE_PROJECT_DIR");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut s = env.stdio_server(cmd, &args);
    s.initialize();
    s
}

fn whoami(s: &mut Shim) -> Value {
    let r = s.call(
        "whoami",
        json!({"vars": ["CURSOR_TOKEN", "AWS_PROFILE", "DIRENV_SECRET"]}),
    );
    serde_json::from_str(&text(&r)).unwrap_or_else(|e| panic!("{e}: {r}"))
}

#[test]
fn after_share_all_every_agent_reaches_its_own_program_in_its_own_place() {
    if require_program("python3").is_none() {
        return;
    }
    let env = Env::new();
    let (a, b) = (project(&env, "alpha"), project(&env, "beta"));
    let shared_py = whoami_py().display().to_string();
    let cursor_env = env.path("cursor.env");
    std::fs::write(&cursor_env, "CURSOR_TOKEN=cursor-only-token\n").unwrap();
    let claude = json!({
        "numStartups": 7,
        "mcpServers": {
            // The same program for everyone: absolute path.
            "who": {"type": "stdio", "command": "python3", "args": [shared_py]},
            // A user-scope entry that runs "here": Claude Code runs it in each session's
            // directory.
            "here": {"type": "stdio", "command": "python3", "args": ["server.py"]},
        },
        "projects": {
            a.display().to_string(): {"mcpServers": {
                "local": {"type": "stdio", "command": "python3", "args": ["server.py"]},
            }},
            b.display().to_string(): {"mcpServers": {
                "local": {"type": "stdio", "command": "python3", "args": ["server.py"]},
            }},
        },
    });
    let claude_path = env.home.join(".claude.json");
    std::fs::write(&claude_path, serde_json::to_vec_pretty(&claude).unwrap()).unwrap();
    let cursor_path = env.home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor_path.parent().unwrap()).unwrap();
    let cursor = json!({"mcpServers": {
        "cur": {"command": "python3", "args": [shared_py, "cursor"],
                "envFile": cursor_env.display().to_string()},
    }});
    std::fs::write(&cursor_path, serde_json::to_vec(&cursor).unwrap()).unwrap();
    let cursor0 = std::fs::read(&cursor_path).unwrap();

    let out = env.run(&["share", "--all", "--yes"]);
    assert_eq!(out.status, Some(0), "{out}");

    // config.json: the look-alike project entries are two upstreams, each in its project;
    // the user-scope relative one runs per project; Cursor's envFile belongs to its upstream.
    let config: Value = serde_json::from_slice(&std::fs::read(&env.config).unwrap()).unwrap();
    let servers = &config["servers"];
    let local_a = &servers["local"];
    let local_b = &servers["local-2"];
    assert_eq!(local_a["cwd"], a.display().to_string(), "{config:#}");
    assert_eq!(local_b["cwd"], b.display().to_string(), "{config:#}");
    assert_eq!(servers["here"]["sharing"], "per-project", "{config:#}");
    assert_eq!(servers["who"]["sharing"], "shared");
    assert_eq!(servers["cur"]["envFile"], cursor_env.display().to_string());
    let doc: Value = serde_json::from_slice(&std::fs::read(&claude_path).unwrap()).unwrap();
    let cursor_doc: Value = serde_json::from_slice(&std::fs::read(&cursor_path).unwrap()).unwrap();
    assert!(
        cursor_doc["mcpServers"]["cur"].get("envFile").is_none(),
        "the shim must not load it: {cursor_doc}"
    );
    let entry_of = |dir: &Path, name: &str| -> Value {
        doc["projects"][dir.display().to_string()]["mcpServers"][name].clone()
    };

    // Cursor's session starts the daemon, with what its envFile used to put in its
    // environment, and a terminal's AWS_PROFILE.
    let mut cur = run_entry(
        &env,
        &cursor_doc["mcpServers"]["cur"],
        &env.home,
        &[("CURSOR_TOKEN", "leaked"), ("AWS_PROFILE", "prod")],
    );
    let got = whoami(&mut cur);
    assert_eq!(got["env"]["CURSOR_TOKEN"], "cursor-only-token", "{got}");
    assert_eq!(got["env"]["AWS_PROFILE"], Value::Null, "{got}");

    // Claude Code in alpha and in beta, each with its project's direnv secret.
    for (dir, other) in [(&a, &b), (&b, &a)] {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let direnv = format!("direnv of {name}");
        let vars = [("DIRENV_SECRET", direnv.as_str())];
        let mut local = run_entry(&env, &entry_of(dir, "local"), dir, &vars);
        let mut here = run_entry(&env, &doc["mcpServers"]["here"], dir, &vars);
        let mut who = run_entry(&env, &doc["mcpServers"]["who"], dir, &vars);
        for (what, s) in [("local", &mut local), ("here", &mut here)] {
            let got = whoami(s);
            assert_eq!(got["cwd"], dir.display().to_string(), "{what}: {got}");
            assert_eq!(got["secret"], format!("secret of {name}"), "{what}: {got}");
            assert_eq!(
                got["file"],
                dir.join("server.py").display().to_string(),
                "{what} in {name} ran {}'s program: {got}",
                other.display()
            );
            for var in ["CURSOR_TOKEN", "AWS_PROFILE", "DIRENV_SECRET"] {
                assert_eq!(got["env"][var], Value::Null, "{what}: {var} leaked: {got}");
            }
        }
        let got = whoami(&mut who);
        assert_eq!(got["cwd"], env.home.display().to_string(), "{got}");
        assert_eq!(got["env"]["CURSOR_TOKEN"], Value::Null, "{got}");
    }

    // The real Claude Code, in alpha, connects to alpha's entry.
    if let Some(claude) = claude_cli() {
        let out = env
            .sealed(&claude)
            .current_dir(&a)
            .args(["mcp", "list"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let local = text
            .lines()
            .find(|l| l.starts_with("local:"))
            .unwrap_or_default();
        assert!(local.contains("Connected"), "{text}");
    }

    // Undo gives back every entry (Claude Code itself wrote keys of its own meanwhile), and
    // Cursor's file byte for byte.
    drop((cur,));
    let out = env.run(&["unshare", "--all"]);
    assert_eq!(out.status, Some(0), "{out}");
    let back: Value = serde_json::from_slice(&std::fs::read(&claude_path).unwrap()).unwrap();
    assert_eq!(back["mcpServers"], claude["mcpServers"]);
    assert_eq!(back["projects"], claude["projects"]);
    assert!(std::fs::read(&cursor_path).unwrap() == cursor0);
}
