//! What the `coogle` tool keeps of background operations is bounded: a `start_call` refused at
//! once keeps nothing (its refusal is the answer), and finished results are bounded per session
//! in count and bytes, the oldest going first.

use crate::support;

use serde_json::{Value, json};
use support::*;

/// `MAX_FINISHED_PER_OWNER` and `MAX_FINISHED_BYTES_PER_OWNER` in `daemon::operations`, as the
/// README states them.
const PER_SESSION: usize = 64;
const PER_SESSION_BYTES: usize = 32 << 20;

fn start(s: &mut Shim, tool: &str, arguments: Value) -> Value {
    s.call(
        "coogle",
        json!({"action": "start_call", "tool": tool, "arguments": arguments}),
    )
}

fn operation(started: &Value) -> String {
    started["result"]["structuredContent"]["operation"]
        .as_str()
        .unwrap_or_else(|| panic!("no operation in {started}"))
        .to_string()
}

fn listed(s: &mut Shim) -> Vec<Value> {
    let list = s.call("coogle", json!({"action": "list_operations"}));
    list["result"]["structuredContent"]["operations"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .clone()
}

fn is_known(s: &mut Shim, op: &str) -> bool {
    let w = s.call("coogle", json!({"action": "wait", "operation": op}));
    w["result"]["isError"] != true
}

/// Regression (issue 18): a `start_call` refused at once (here: the session already has 256
/// calls waiting) was kept as an operation for 10 minutes; 60,000 of them grew the daemon by
/// 43 MB. Now the refusal is `start_call`'s answer and nothing is kept.
#[test]
fn refused_background_calls_are_not_kept() {
    let env = Env::with_fake(json!({"maxConcurrent": 1}));
    let _d = env.daemon();
    let mut s = env.shim();
    s.initialize();
    // One running and 256 waiting fill this session's share of the queue.
    let mut started = Vec::new();
    for _ in 0..257 {
        let r = start(&mut s, "sleep", json!({"ms": 60000}));
        assert_ne!(r["result"]["isError"], true, "{r}");
        started.push(operation(&r));
    }
    for _ in 0..1000 {
        let refused = start(&mut s, "echo", json!({"text": "x"}));
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert!(text(&refused).contains("calls waiting"), "{refused}");
        assert!(
            refused["result"].get("structuredContent").is_none(),
            "no operation id for a refused call: {refused}"
        );
    }
    let ops = listed(&mut s);
    assert_eq!(ops.len(), 257, "only the started operations are kept");
    assert!(ops.iter().all(|o| o["status"] == "running"));
}

/// Finished results are kept within a count and a byte bound per session; past them the oldest
/// goes, and `wait` says it is not there. Another session's results are not pushed out.
#[test]
fn finished_results_are_bounded_oldest_first() {
    let env = Env::with_fake(json!({"maxConcurrent": 1}));
    let _d = env.daemon();
    let mut a = env.shim();
    let mut b = env.shim();
    a.initialize();
    b.initialize();
    let b_op = operation(&start(&mut b, "echo", json!({"text": "b's"})));

    let ops: Vec<String> = (0..PER_SESSION + 6)
        .map(|i| operation(&start(&mut a, "echo", json!({"text": format!("r{i}")}))))
        .collect();
    let last = wait_text(&mut a, ops.last().unwrap());
    assert_eq!(last, format!("r{}", PER_SESSION + 5));
    assert_eq!(listed(&mut a).len(), PER_SESSION);
    for op in &ops[..6] {
        assert!(!is_known(&mut a, op), "{op}, among the oldest, was kept");
    }
    assert!(is_known(&mut a, &ops[6]));

    // Bytes: results of 3 MiB each (`large`), more than the bound holds.
    let each = 3 << 20;
    let n = PER_SESSION_BYTES / each + 2;
    let big: Vec<String> = (0..n)
        .map(|_| operation(&start(&mut a, "large", json!({"bytes": each}))))
        .collect();
    assert_eq!(wait_text(&mut a, big.last().unwrap()).len(), each);
    let kept = listed(&mut a);
    assert!(
        kept.len() * each <= PER_SESSION_BYTES && kept.len() >= PER_SESSION_BYTES / each - 1,
        "{} kept",
        kept.len()
    );
    assert!(
        !is_known(&mut a, &big[0]),
        "the oldest large result was kept"
    );
    assert!(is_known(&mut a, big.last().unwrap()));

    // B's result is still there.
    let theirs = b.call("coogle", json!({"action": "wait", "operation": b_op}));
    assert_eq!(text(&theirs), "b's", "{theirs}");
}

/// `wait` for an operation (up to 30 s); its result's text.
fn wait_text(s: &mut Shim, op: &str) -> String {
    let r = s.call(
        "coogle",
        json!({"action": "wait", "operation": op, "wait_ms": 30000}),
    );
    text(&r)
}
