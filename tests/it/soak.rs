//! Memory stays bounded: 100,000 calls through one daemon leave its RSS within 10% of what it
//! was after warm-up, and 1,000 connections opened and dropped do not make it grow.

use crate::support;

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// `sessions` shims, each making `calls` pipelined echo calls (8 in flight per session).
fn drive(env: &Env, sessions: usize, calls: usize) {
    let handles: Vec<_> = (0..sessions)
        .map(|_| {
            let mut shim = env.shim();
            std::thread::spawn(move || {
                shim.initialize();
                let mut sent = 0;
                let mut done = 0;
                let send = |shim: &mut Shim, i: usize| {
                    shim.send(&json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"echo","arguments":{"text":"soak"}}}));
                };
                while sent < 8.min(calls) {
                    send(&mut shim, sent);
                    sent += 1;
                }
                while done < calls {
                    let m = shim.recv(Duration::from_secs(60)).expect("an answer");
                    if m.get("id").is_some() {
                        done += 1;
                        if sent < calls {
                            send(&mut shim, sent);
                            sent += 1;
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn a_hundred_thousand_calls_leave_memory_where_warm_up_left_it() {
    let env = Env::with_fake(json!({"maxConcurrent": 4}));
    let _d = env.daemon();
    let pid = env.daemon_pid();
    drive(&env, 8, 1_250); // 10,000 calls of warm-up
    let warm = rss_kib(pid);
    drive(&env, 8, 12_500); // 100,000 calls
    let end = rss_kib(pid);
    let status = control(&env.socket, "status", Value::Null).unwrap();
    assert_eq!(status["upstreams"][0]["stats"]["calls"], 110_000);
    assert!(
        end as f64 <= warm as f64 * 1.10,
        "daemon RSS grew from {warm} KiB after warm-up to {end} KiB"
    );
}

#[test]
fn a_thousand_dropped_connections_do_not_grow_the_daemon() {
    let env = Env::with_fake(json!({}));
    let _d = env.daemon();
    env.wait_upstream_ready();
    let pid = env.daemon_pid();
    let churn = || {
        for i in 0..1000 {
            // A full accept backlog (a loaded machine) is not what this test measures.
            let mut s = connect_patiently(&env.socket).unwrap();
            if i % 2 == 0 {
                let _ = s.write_all(b"{\"coogle\":1,\"mode\":\"mcp\",\"version\":\"x\"}\n");
            }
        }
        // Let the daemon notice every close.
        wait_status(
            &env.socket,
            "sessions to close",
            Duration::from_secs(10),
            |s| s["upstreams"][0]["sessions"].as_array().unwrap().is_empty(),
        );
    };
    // The allocator's high-water mark wanders by most of a MiB from one burst to the next, so
    // compare the highest RSS of three bursts after warm-up with that of three more: a leak
    // grows it with every burst, noise does not.
    let peak = || {
        (0..3)
            .map(|_| {
                churn();
                rss_kib(pid)
            })
            .max()
            .unwrap()
    };
    let warm = peak();
    let end = peak();
    assert!(
        end <= warm + 1024,
        "daemon RSS grew from {warm} KiB to {end} KiB over 3,000 more connections"
    );
}
