//! An upstream starts whoever started the daemon. After `coogle setup --yes --no-service`, the
//! client entry is run the way Claude Desktop runs it on macOS: an empty environment but HOME
//! and `PATH=/usr/bin:/bin`. The shim starts the daemon with that environment, and the daemon
//! still finds `uvx` (a stand-in, only on the PATH setup ran with) and gives it the PATH it
//! needs to find the server it starts, as `npx` needs `node`. Without the recorded `path` the
//! same start fails with a message that says which PATH was searched.

use crate::support;

use std::fs;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Env, control, fake_mcp, wait_status, wait_until};

/// The daemon's view of the upstream once it has settled (ready, or failed to start).
fn settled(env: &Env) -> Value {
    let s = wait_status(
        &env.socket,
        "the upstream to settle",
        Duration::from_secs(30),
        |s| {
            let u = &s["upstreams"][0];
            u["state"] == "ready" || u["state"] == "failed" || !u["lastError"].is_null()
        },
    );
    s["upstreams"][0].clone()
}

#[test]
fn a_shim_with_a_gui_apps_path_starts_the_upstream() {
    let env = Env::new();
    let bin = env.path("user-bin");
    fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(fake_mcp(), bin.join("coogle-fake-mcp")).unwrap();
    let uvx = bin.join("uvx");
    // Like uvx, it finds what it runs through the PATH it was given.
    support::write_executable(&uvx, "#!/bin/sh\nexec coogle-fake-mcp\n");
    fs::write(env.home.join(".claude.json"), b"{}").unwrap();

    let user_path = std::env::join_paths(std::iter::once(bin.clone()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut setup = env.cmd();
    setup.env("PATH", &user_path).env("CI", "true");
    let out = support::Output::of(
        setup,
        &[
            "setup",
            "--yes",
            "--no-service",
            "--credentials-source",
            "none",
            "--skip-test",
            "--skip-verify",
        ],
    );
    assert_eq!(out.status, Some(0), "{out}");
    assert!(
        out.stdout.contains("recorded the PATH the daemon searches"),
        "{out}"
    );
    let config: Value = serde_json::from_slice(&fs::read(&env.config).unwrap()).unwrap();
    assert_eq!(config["path"][0], json!(bin), "{config:#}");
    // The default upstream, `uvx workspace-mcp --tool-tier core`, is what will run.
    assert!(
        config.get("mcp").is_none() && config.get("servers").is_none(),
        "{config:#}"
    );

    let claude: Value =
        serde_json::from_slice(&fs::read(env.home.join(".claude.json")).unwrap()).unwrap();
    let entry = &claude["mcpServers"]["coogle"];
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let gui_app = || {
        let mut cmd = Command::new(entry["command"].as_str().unwrap());
        cmd.env_clear()
            .env("HOME", &env.home)
            .env("PATH", "/usr/bin:/bin");
        cmd
    };

    let mut shim = env.stdio_server(gui_app(), &args);
    let init = shim.initialize();
    assert!(init["serverInfo"].is_object(), "{init}");
    // The call is what starts the child (children start on demand).
    let answer = shim.call("echo", json!({"text": "from a minimal PATH"}));
    assert_eq!(
        answer["result"]["content"][0]["text"], "from a minimal PATH",
        "{answer}"
    );
    let upstream = settled(&env);
    assert_eq!(upstream["state"], "ready", "{upstream:#}");
    drop(shim);
    env.run(&["stop"]);
    wait_until(
        "the daemon to stop",
        Duration::from_secs(20),
        || match control(&env.socket, "ping", Value::Null) {
            Ok(v) => Err(format!("it still answers ping: {v}")),
            Err(_) => Ok(()),
        },
    );

    // The same start without the recorded PATH: the upstream cannot be found, and the status
    // says where it was looked for and where the fix is.
    let mut config = config;
    config.as_object_mut().unwrap().remove("path");
    env.write_config(&config);
    let mut shim = env.stdio_server(gui_app(), &args);
    shim.initialize();
    env.demand_start();
    let upstream = settled(&env);
    assert_ne!(upstream["state"], "ready", "{upstream:#}");
    let error = upstream["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("`uvx` is not in any directory of the daemon's PATH (/usr/bin:/bin:"),
        "{upstream:#}"
    );
    assert!(error.contains("coogle doctor"), "{upstream:#}");
}
