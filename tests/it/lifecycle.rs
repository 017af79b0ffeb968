//! The daemon's life: one per socket, private socket and directory, auto-start from the shim,
//! graceful stop, and no orphans even after SIGKILL.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

#[test]
fn a_second_daemon_exits_0_saying_already_running() {
    let env = Env::with_fake(json!({}));
    let _first = env.daemon();
    let out = env.run(&["serve"]);
    assert_eq!(out.status, Some(0), "{out}");
    assert!(out.stderr.contains("already running"), "{out}");
    // The first one still serves.
    assert_eq!(
        control(&env.socket, "ping", Value::Null).unwrap()["pong"],
        true
    );
}

#[test]
fn socket_and_directory_are_private() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let dir = env.socket.parent().unwrap();
    assert_eq!(
        std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::metadata(&env.socket).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn a_socket_directory_owned_by_someone_else_or_a_symlink_is_refused() {
    let env = Env::with_fake(json!({}));
    let real = env.path("elsewhere");
    std::fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, env.path("run")).unwrap();
    let out = env.run(&["serve"]);
    assert_eq!(out.status, Some(2), "{out}");
    assert!(out.stderr.contains("symlink"), "{out}");

    // Another owner: only testable as root (chown needs it).
    if unsafe { libc::getuid() } == 0 {
        let env = Env::with_fake(json!({}));
        let dir = env.path("run");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let out = env.run(&["serve"]);
        assert_eq!(out.status, Some(2), "{out}");
        assert!(out.stderr.contains("owned by uid 65534"), "{out}");
        assert_eq!(std::fs::metadata(&dir).unwrap().uid(), 65534);
    }
}

#[test]
fn the_shim_starts_a_daemon_when_none_runs() {
    let env = Env::with_fake(json!({}));
    let mut s = env.shim();
    let init = s.initialize();
    assert_eq!(init["serverInfo"]["name"], "fake-mcp");
    assert_eq!(text(&s.call("echo", json!({"text": "auto"}))), "auto");
    let info = control(&env.socket, "info", Value::Null).unwrap();
    let daemon_pid = info["pid"].as_u64().unwrap() as u32;
    // It is detached from the shim: the shim exiting leaves it running.
    drop(s);
    std::thread::sleep(Duration::from_millis(200));
    assert!(pid_alive(daemon_pid));
    // `coogle stop` stops it and its child.
    let child_pid = control(&env.socket, "status", Value::Null).unwrap()["upstreams"][0]["pid"]
        .as_u64()
        .unwrap() as u32;
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    wait_gone("the daemon to exit", &[daemon_pid], Duration::from_secs(10));
    assert!(!pid_alive(child_pid));
    assert!(!env.socket.exists());
    // Its output went to the log file, not to the shim's stdout.
    assert!(
        std::fs::read_to_string(&env.log)
            .unwrap()
            .contains("coogle daemon listening")
    );
}

#[test]
fn ten_shims_at_once_start_exactly_one_daemon() {
    let env = Env::new();
    let spawns = env.path("spawns.txt");
    env.write_fake_config(json!({"env": {"FAKE_MCP_PID_FILE": spawns}}));
    let mut shims: Vec<Shim> = (0..10).map(|_| env.shim()).collect();
    let handles: Vec<_> = shims
        .drain(..)
        .map(|mut s| {
            std::thread::spawn(move || {
                s.initialize();
                let pid = text(&s.call("pid", json!({})));
                (s, pid)
            })
        })
        .collect();
    let results: Vec<(Shim, String)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let pids: std::collections::HashSet<&String> = results.iter().map(|r| &r.1).collect();
    assert_eq!(pids.len(), 1);
    assert_eq!(read_lines(&spawns).len(), 1);
    let daemons = processes_matching(&format!("{}", env.socket.display()));
    assert_eq!(daemons.len(), 1, "daemons serving this socket: {daemons:?}");
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(
        status["upstreams"][0]["sessions"].as_array().unwrap().len(),
        10
    );
    drop(results);
    let _ = env.run(&["stop"]);
}

#[test]
fn sigterm_stops_the_child_and_removes_the_socket() {
    let env = Env::with_fake(json!({}));
    let mut d = env.daemon();
    let status = env.wait_upstream_ready();
    let child = status["upstreams"][0]["pid"].as_u64().unwrap() as u32;
    let (code, _) = d.signal_and_wait(libc::SIGTERM);
    assert_eq!(code, Some(0));
    assert!(!pid_alive(child));
    assert!(!env.socket.exists());
}

/// A child starts with room for 256 descriptors, as from a client with many open: Linux grows
/// a threaded process's table only after an RCU grace period, which cost a Node server 15-20 ms
/// of its start when the daemon (few descriptors open) started it (`os::roomy_descriptor_table`).
/// And it gets none of the daemon's own: here the daemon is given a stray descriptor, 77, as a
/// leaky client would give it to the shim that starts the daemon; the child must not get it.
#[cfg(target_os = "linux")]
#[test]
fn a_child_starts_with_room_for_256_descriptors_and_none_of_the_daemons() {
    let env = Env::with_fake(json!({}));
    let mut serve = env.cmd();
    serve.args(["serve", "--log-stderr"]);
    give_only_a_stray(&mut serve);
    let _d = env.daemon_of(serve);
    let status = env.wait_upstream_ready();
    let child = status["upstreams"][0]["pid"].as_u64().unwrap() as u32;
    let proc_status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    let slots: u32 = proc_status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no FDSize in {proc_status}"));
    // Without the room: 128, what the daemon's highest open descriptor (77) makes.
    assert!(slots >= 256, "the child's table has {slots} slots");
    let open = open_descriptors(child);
    assert!(
        !open.contains(&77),
        "the child got the daemon's stray: {open:?}"
    );
    // The descriptor that made the room was closed at exec, too.
    assert!(open.iter().all(|&fd| fd < 64), "open descriptors: {open:?}");
    let _ = env.run(&["stop"]);
}

/// The daemon a shim starts gets none of what the shim's client leaked to the shim (a pipe's
/// end kept open by a daemon that outlives the client would keep the client's reader from
/// seeing end-of-file).
#[cfg(target_os = "linux")]
#[test]
fn a_daemon_a_shim_starts_gets_none_of_the_shims_strays() {
    let env = Env::with_fake(json!({}));
    let mut shim = env.cmd();
    give_only_a_stray(&mut shim);
    let mut s = env.stdio_server(shim, &["mcp"]);
    s.initialize();
    let daemon = env.daemon_pid();
    let open = open_descriptors(daemon);
    assert!(
        !open.contains(&77),
        "the daemon got the shim's stray: {open:?}"
    );
    drop(s);
    let _ = env.run(&["stop"]);
}

/// The descriptors process `pid` has open.
#[cfg(target_os = "linux")]
fn open_descriptors(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Start `command` with no descriptor above stderr but a stray one, 77 (`/dev/null`, not
/// close-on-exec), as a leaky client gives it: the test runner's own strays would hide a fault.
#[cfg(target_os = "linux")]
fn give_only_a_stray(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls: close_range, open, dup2.
    unsafe {
        command.pre_exec(|| {
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if null < 0 || libc::dup2(null, 77) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(null);
            Ok(())
        });
    }
}

#[test]
fn sigkilled_daemon_leaves_no_child_behind_after_the_next_start() {
    let env = Env::with_fake(json!({"env": {"FAKE_MCP_IGNORE_SIGTERM": "1"}}));
    let mut d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let child: u32 = text(&s.call("pid", json!({}))).parse().unwrap();
    let grandchild: u32 = text(&s.call("spawn_grandchild", json!({})))
        .parse()
        .unwrap();
    assert!(pid_alive(grandchild));
    // A call in flight when the daemon dies.
    s.send(&json!({"jsonrpc":"2.0","id":"inflight","method":"tools/call","params":{"name":"sleep","arguments":{"ms":30000}}}));
    std::thread::sleep(Duration::from_millis(100));
    d.signal_and_wait(libc::SIGKILL);
    // PR_SET_PDEATHSIG takes the direct child down with the daemon. macOS has no such thing:
    // there the next daemon reaps the child with the rest of its group, below.
    #[cfg(target_os = "linux")]
    wait_gone(
        "the child to die with the daemon",
        &[child],
        Duration::from_secs(5),
    );
    // The shim answers the in-flight call with an error, reconnects (starting a new daemon),
    // and the new daemon reaps the grandchild the old group left behind.
    let failed = s.response(&json!("inflight"), Duration::from_secs(10));
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert_eq!(text(&s.call("echo", json!({"text": "again"}))), "again");
    wait_gone(
        "the old group to be reaped",
        &[grandchild, child],
        Duration::from_secs(10),
    );
    // Closed first: a shim still connected would start a new daemon once this one is gone.
    drop(s);
    let _ = env.run(&["stop"]);
}

/// Regression (hardening review): a grandchild that called setsid() escaped the process-group
/// kill, survived its child's crash and `coogle stop`, and lived on as an orphan.
#[cfg(target_os = "linux")]
#[test]
fn a_detached_grandchild_outlives_neither_its_child_nor_the_daemon() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    let detached = |s: &mut Shim| -> u32 {
        text(&s.call("spawn_grandchild", json!({"detach": true})))
            .parse()
            .unwrap()
    };
    // The child crashes: what it detached goes with it, seen or not by a scan.
    let early = detached(&mut s);
    std::thread::sleep(Duration::from_millis(3500));
    let late = detached(&mut s);
    assert!(pid_alive(early) && pid_alive(late));
    s.send(&json!({"jsonrpc":"2.0","id":"boom","method":"tools/call","params":{"name":"crash","arguments":{}}}));
    s.response(&json!("boom"), Duration::from_secs(10));
    wait_gone(
        "the detached grandchildren to go with their child",
        &[early, late],
        Duration::from_secs(10),
    );
    // The daemon stops: what the new child detached goes too.
    wait_status(&env.socket, "the respawn", Duration::from_secs(15), |st| {
        st["upstreams"][0]["state"] == "ready"
    });
    let orphan = detached(&mut s);
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    wait_gone(
        "the detached grandchild to go with the daemon",
        &[orphan],
        Duration::from_secs(10),
    );
}

/// The children of the daemon's own process, zombies included, by `/proc`'s `stat`.
#[cfg(target_os = "linux")]
fn children_of(parent: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let mut rest = stat
            .rsplit_once(')')
            .map_or("", |(_, r)| r)
            .split_whitespace();
        let state = rest.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if rest.next().and_then(|p| p.parse().ok()) == Some(parent) {
            out.push((pid, state));
        }
    }
    out
}

/// Regression (session 13's review): once its child had exited and been parked, a detached
/// chain whose links ignore SIGTERM came to the daemon one link at a time, each as the one
/// above it was stopped, and outlived its child; with no child alive the daemon no longer
/// scanned, so each link's end would have stayed a zombie, and the links after the last
/// scan lived on. Each process of its own that ends now brings a scan, which stops the next.
#[cfg(target_os = "linux")]
#[test]
fn a_chain_left_by_a_parked_child_is_stopped_link_by_link_and_reaped() {
    let env = Env::with_fake(json!({}));
    let chain = env.tmp.path().join("chain-link.sh");
    // Each link ignores SIGTERM (as its children do: an ignored signal stays ignored across
    // exec), starts the next, and waits on a sleep of its own.
    // Its sleep's length names this test's run: what another run left is not counted (a
    // command line's words are NUL-separated, so the length alone is looked for).
    let sleep = format!("9{}", std::process::id());
    std::fs::write(
        &chain,
        format!("#!/bin/sh\ntrap '' TERM\nif [ \"$1\" -gt 0 ]; then \"$0\" $(($1 - 1)) & fi\nsleep {sleep} &\nwait\n"),
    )
    .unwrap();
    std::fs::set_permissions(&chain, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The chain starts only once the child has exited (no scan saw it below the child), from a
    // waiter that ignores SIGTERM too: stopped as an orphan at that exit, it lives its grace.
    let script = format!(
        "setsid sh -c 'trap \"\" TERM; p=$PPID; while kill -0 $p 2>/dev/null; do sleep 0.02; done; exec {} 4' \
         </dev/null >/dev/null 2>&1 & exec {}",
        chain.display(),
        fake_mcp().display()
    );
    env.write_fake_config(
        json!({"command": "/bin/sh", "args": ["-c", script], "idleStopMs": 1000}),
    );
    let _d = env.daemon();
    let daemon = env.daemon_pid();
    let mut s = env.shim();
    s.initialize();
    let child: u32 = text(&s.call("pid", json!({}))).parse().unwrap();
    wait_gone("the parked child", &[child], Duration::from_secs(30));
    let needle = chain.display().to_string();
    let links = || processes_matching(&needle).len() + processes_matching(&sleep).len();
    wait_until(
        "the chain to start",
        Duration::from_secs(10),
        || match links() {
            0 => Err("no link yet".to_string()),
            n => Ok(n),
        },
    );
    wait_until(
        "every link of the chain stopped and reaped",
        Duration::from_secs(60),
        || match (links(), children_of(daemon)) {
            (0, left) if left.is_empty() => Ok(()),
            (n, left) => Err(format!("{n} links alive; the daemon's children: {left:?}")),
        },
    );
}

/// Regression (session 14): when a child exited, which parking makes frequent, every process
/// reparented to the daemon that no scan had seen below a live child was stopped. A live
/// server's own double-forked helper is reparented at once and never seen below its server, so
/// one server's park took another's helper (a browser, an agent) with it; and (the review of
/// the first fix) one detached less than a scan's period before the park went even then. A
/// helper that started after a live child did may be that child's: it lives while that child
/// does, and goes once it is gone.
#[cfg(target_os = "linux")]
#[test]
fn a_live_servers_detached_helpers_outlive_another_servers_park() {
    let env = Env::new();
    // Their sleeps' lengths name this test's run (a command line's words are NUL-separated).
    let (early, late) = (
        format!("9{}2", std::process::id()),
        format!("9{}3", std::process::id()),
    );
    // Each subshell starts a helper in a session of its own and exits, so the helper is
    // reparented to the daemon before any scan can see it below its server: one at once, one
    // 3 s on (just before the other server's park).
    let keeper = format!(
        "(setsid sleep {early} </dev/null >/dev/null 2>&1 &); \
         (sleep 3; setsid sleep {late} </dev/null >/dev/null 2>&1 &) </dev/null >/dev/null 2>&1 & \
         exec {}",
        fake_mcp().display()
    );
    env.write_config(&json!({"servers": {
        "keeper": {"command": "/bin/sh", "args": ["-c", keeper], "credentials": {"source": "none"}},
        "parker": {"command": fake_mcp(), "idleStopMs": 500, "credentials": {"source": "none"}},
    }}));
    let _d = env.daemon();
    let daemon = env.daemon_pid();
    let mut k = env.shim_with(&["--server", "keeper"]);
    k.initialize();
    k.call("pid", json!({}));
    let helper = |name: &str| {
        wait_until(name, Duration::from_secs(15), || {
            match processes_matching(name)[..] {
                [pid] if children_of(daemon).iter().any(|(c, _)| *c == pid) => Ok(pid),
                ref other => Err(format!("{other:?}")),
            }
        })
    };
    let helpers = [helper(&early), helper(&late)];
    let mut p = env.shim_with(&["--server", "parker"]);
    p.initialize();
    let parked: u32 = text(&p.call("pid", json!({}))).parse().unwrap();
    wait_gone("the parker's child", &[parked], Duration::from_secs(30));
    // Its exit is dealt with (and a stop would have ended the helpers) within a grace.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        helpers.iter().all(|h| pid_alive(*h)),
        "the keeper's helpers {helpers:?} were stopped when the parker's child exited"
    );
    // The keeper's child crashes, the last alive: now nothing can want the helpers.
    k.send(&json!({"jsonrpc":"2.0","id":"boom","method":"tools/call","params":{"name":"crash","arguments":{}}}));
    k.response(&json!("boom"), Duration::from_secs(10));
    wait_gone(
        "the helpers, once no child is alive",
        &helpers,
        Duration::from_secs(15),
    );
}

/// Linux-only: it connects as another user through util-linux's `setpriv`.
#[cfg(target_os = "linux")]
#[test]
fn a_peer_of_another_uid_is_refused_even_if_the_socket_is_reachable() {
    // Needs root to connect as someone else.
    if unsafe { libc::getuid() } != 0 || !std::path::Path::new("/usr/bin/setpriv").exists() {
        return;
    }
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    // Loosen every permission on the way, as a careless admin might.
    use std::os::unix::fs::PermissionsExt;
    for (p, mode) in [
        (env.tmp.path().to_path_buf(), 0o755),
        (env.socket.parent().unwrap().to_path_buf(), 0o755),
        (env.socket.clone(), 0o666),
    ] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let script = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); s.settimeout(5)\n\
         try:\n    s.sendall(b'{{\"id\":\"1\",\"method\":\"status\"}}\\n')\n    print(repr(s.recv(4096)))\n\
         except (ConnectionResetError, BrokenPipeError):\n    print('reset')",
        env.socket.display().to_string()
    );
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        matches!(stdout.trim(), "b''" | "reset"),
        "the daemon must answer nothing to another uid: {stdout}"
    );
    // The owner is still served.
    assert_eq!(
        control(&env.socket, "ping", Value::Null).unwrap()["pong"],
        true
    );
}

#[test]
fn a_daemon_whose_socket_is_removed_stops_with_its_child() {
    stops_with_its_child_once_its_socket(Env::with_fake(json!({})), |env| {
        std::fs::remove_file(&env.socket).unwrap()
    });
}

/// Another socket renamed onto the daemon's path: nobody can reach this daemon again either.
#[test]
fn a_daemon_whose_socket_is_replaced_stops_with_its_child() {
    stops_with_its_child_once_its_socket(Env::with_fake(json!({})), |env| {
        let other = env.path("other.sock");
        // Bound, then left: only the file matters.
        drop(std::os::unix::net::UnixListener::bind(&other).unwrap());
        std::fs::rename(&other, &env.socket).unwrap();
    });
}

/// A directory two above the socket renamed: the socket is no longer where anyone looks.
#[test]
fn a_daemon_whose_socket_directory_above_is_renamed_stops_with_its_child() {
    let mut env = Env::with_fake(json!({}));
    std::fs::create_dir(env.path("above")).unwrap();
    env.socket = env.path("above/run/coogle.sock");
    stops_with_its_child_once_its_socket(env, |env| {
        std::fs::rename(env.path("above"), env.path("moved")).unwrap()
    });
}

/// A symlink on the way to the socket re-pointed: the path leads to another directory.
#[test]
fn a_daemon_whose_socket_path_symlink_is_repointed_stops_with_its_child() {
    let mut env = Env::with_fake(json!({}));
    for d in ["one", "two"] {
        std::fs::create_dir(env.path(d)).unwrap();
    }
    std::os::unix::fs::symlink(env.path("one"), env.path("link")).unwrap();
    env.socket = env.path("link/run/coogle.sock");
    stops_with_its_child_once_its_socket(env, |env| {
        std::os::unix::fs::symlink(env.path("two"), env.path("link.new")).unwrap();
        std::fs::rename(env.path("link.new"), env.path("link")).unwrap();
    });
}

/// A directory on the way moved aside and a symlink to it put in its place (two steps, as a
/// deploy does): the socket is gone for a moment only, and the daemon stays. It then watches
/// the new way: the symlink re-pointed later is seen at once.
#[test]
fn a_daemon_whose_socket_path_is_swapped_for_a_symlink_stays_and_watches_the_new_way() {
    let mut env = Env::with_fake(json!({}));
    std::fs::create_dir(env.path("app")).unwrap();
    std::fs::create_dir(env.path("app-v2")).unwrap();
    env.socket = env.path("app/run/coogle.sock");
    let mut d = env.daemon();
    std::fs::rename(env.path("app"), env.path("app-v1")).unwrap();
    // Long enough for the daemon to wake and see no socket, well inside its grace.
    std::thread::sleep(Duration::from_millis(50));
    std::os::unix::fs::symlink(env.path("app-v1"), env.path("app")).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        control(&env.socket, "ping", Value::Null).unwrap()["pong"],
        true,
        "the daemon stays once its socket is back"
    );
    std::os::unix::fs::symlink(env.path("app-v2"), env.path("app.new")).unwrap();
    std::fs::rename(env.path("app.new"), env.path("app")).unwrap();
    let (code, err) = d.wait_exit();
    assert_eq!(code, Some(0), "{err}");
}

/// The daemon is told at once by the OS, where it can be (looking for itself where it is told,
/// it would look once a minute: past the 20 s this waits), and leaves a replacement alone.
fn stops_with_its_child_once_its_socket(env: Env, change: impl FnOnce(&Env)) {
    let mut d = env.daemon();
    let status = env.wait_upstream_ready();
    let child = status["upstreams"][0]["pid"].as_u64().unwrap() as u32;
    let ours = std::fs::symlink_metadata(&env.socket).unwrap().ino();
    let changed = std::time::Instant::now();
    change(&env);
    let left = std::fs::symlink_metadata(&env.socket).map(|m| m.ino()).ok();
    let (code, err) = d.wait_exit();
    assert_eq!(code, Some(0));
    // Told by the OS on Linux, not found by a look (every 2 s where the path cannot be
    // watched, as on macOS); a bound on the time as a sanity check only.
    if cfg!(target_os = "linux") {
        assert!(
            err.contains("the socket is not where it was (told by the OS)"),
            "{err}"
        );
        assert!(changed.elapsed() < Duration::from_secs(5));
    }
    assert!(!pid_alive(child));
    assert_eq!(
        std::fs::symlink_metadata(&env.socket).map(|m| m.ino()).ok(),
        left.filter(|i| *i != ours),
        "a replacement is left where it is"
    );
}

/// A file system mounted over the socket's directory, in the daemon's own mount namespace (so
/// nothing else on the machine sees it): the path leads into the new file system, where there
/// is no socket. Told by the mount table, at once.
#[test]
fn a_daemon_whose_socket_directory_is_mounted_over_stops_with_its_child() {
    if !can_enter_its_mount_namespace() {
        return;
    }
    let env = Env::with_fake(json!({}));
    let mut serve = env.sealed("/usr/bin/unshare");
    serve.args([
        "-m",
        "--propagation",
        "private",
        COOGLE,
        "serve",
        "--log-stderr",
    ]);
    let mut d = env.daemon_of(serve);
    let status = env.wait_upstream_ready();
    let child = status["upstreams"][0]["pid"].as_u64().unwrap() as u32;
    let run = env.socket.parent().unwrap();
    let changed = std::time::Instant::now();
    let mounted = std::process::Command::new("/usr/bin/nsenter")
        .args([
            "--target",
            &d.pid().to_string(),
            "--mount",
            "mount",
            "-t",
            "tmpfs",
            "tmpfs",
        ])
        .arg(run)
        .status()
        .unwrap();
    assert!(mounted.success());
    let (code, err) = d.wait_exit();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("the socket was removed or replaced"), "{err}");
    // Told by the mount table, not found by a look every 2 s.
    assert!(
        err.contains("the socket is not where it was (told by the OS)"),
        "{err}"
    );
    assert!(changed.elapsed() < Duration::from_secs(5));
    assert!(!pid_alive(child));
}

/// Regression: stopping a daemon with live sessions polled a finished session writer again
/// ("JoinHandle polled after completion", a panic in a runtime worker, seen on `coogle stop`).
/// Raw mcp-mode connections stand in for agents (shims would start a new daemon afterwards):
/// three have initialized, three are connected but silent.
#[test]
fn stopping_with_live_sessions_panics_nowhere() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::with_fake(json!({}));
    let mut daemon = env.daemon();
    let mut sessions = Vec::new();
    for i in 0..6 {
        let mut conn = std::os::unix::net::UnixStream::connect(&env.socket).unwrap();
        let mut lines = format!(
            "{{\"coogle\":1,\"mode\":\"mcp\",\"server\":\"google\",\"version\":\"{}\",\"pid\":1}}\n",
            env!("CARGO_PKG_VERSION")
        );
        if i < 3 {
            lines.push_str(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
            lines.push('\n');
            lines.push_str(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
            lines.push('\n');
        }
        conn.write_all(lines.as_bytes()).unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut hello = String::new();
        reader.read_line(&mut hello).unwrap();
        assert!(hello.contains("\"ok\":true"), "{hello}");
        sessions.push((conn, reader));
    }
    wait_status(&env.socket, "six sessions", Duration::from_secs(10), |s| {
        s["upstreams"][0]["sessions"]
            .as_array()
            .is_some_and(|a| a.len() == 6)
    });
    let out = env.run(&["stop"]);
    assert_eq!(out.status, Some(0), "{out}");
    let (code, stderr) = daemon.wait_exit();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(sessions);
}

/// Regression: a daemon saving its tool cache after its HOME was deleted (a test's temporary
/// HOME, a removed account) recreated the whole tree, littering /tmp.
#[test]
fn a_deleted_home_is_not_recreated_by_the_tool_cache() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    env.wait_upstream_ready();
    // The daemon may be writing in there right now: retry until the tree is gone.
    wait_until(
        "HOME removed",
        Duration::from_secs(10),
        || match std::fs::remove_dir_all(&env.home) {
            Ok(()) if !env.home.exists() => Ok(()),
            Ok(()) => Err("it was back after its removal".into()),
            Err(e) => Err(format!("removing it: {e}")),
        },
    );
    control(&env.socket, "restart_child", Value::Null).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    env.wait_upstream_ready();
    assert!(
        !env.home.exists(),
        "the daemon recreated {}",
        env.home.display()
    );
}
