//! A `socketPath` in a directory coogle did not create (the user's home, say) never has that
//! directory's mode changed: it is used as it is, or refused when others can write in it.
//! Only coogle's own socket directory is tightened to 0700.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;
use support::serve::Serve;
use support::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Regression: `"socketPath": "~/coogle.sock"` chmodded $HOME to 0700.
#[test]
fn a_socket_path_in_home_leaves_homes_mode_alone() {
    let env = Env::new();
    env.write_config(&json!({
        "socketPath": "~/coogle.sock",
        "servers": {"google": {"command": fake_mcp(), "credentials": {"source": "none"}}},
    }));
    let cmd = || {
        let mut c = env.cmd();
        c.env_remove("COOGLE_SOCKET");
        c
    };
    let socket = env.home.join("coogle.sock");
    std::fs::set_permissions(&env.home, std::fs::Permissions::from_mode(0o755)).unwrap();

    let daemon = Serve::spawn(cmd());
    wait_control(
        &socket,
        "ping",
        "the daemon to answer",
        Duration::from_secs(20),
        |_| true,
    );
    support::demand_start(&socket, None);
    wait_status(
        &socket,
        "the upstream to be ready",
        Duration::from_secs(20),
        |s| s["upstreams"][0]["state"] == "ready",
    );
    assert_eq!(mode(&env.home), 0o755, "the daemon changed $HOME's mode");
    // Clients accept it as it is (theirs, not writable by others) and change nothing either.
    let out = Output::of(cmd(), &["status"]);
    assert_eq!(out.status, Some(0), "{out}");
    let out = Output::of(cmd(), &["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    drop(daemon);
    assert_eq!(mode(&env.home), 0o755);

    // Writable by the group: refused by the daemon, and still not changed.
    std::fs::set_permissions(&env.home, std::fs::Permissions::from_mode(0o775)).unwrap();
    let out = Output::of(cmd(), &["serve"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("other users can write in it"), "{out}");
    assert_eq!(mode(&env.home), 0o775);
    assert!(!socket.exists());
}
