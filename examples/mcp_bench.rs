//! A benchmark driver that talks MCP to any stdio server command, so coogle (`coogle mcp`) and
//! the same server run directly are measured the same way. Used by `scripts/bench.sh`.
//!
//! ```text
//! mcp_bench latency    CALLS -- CMD ARGS…   sequential tools/call echo; per-call latency
//! mcp_bench pair       CALLS -- CMD A… -- CMD B…   the same, two ways call by call in turn
//! mcp_bench startup    RUNS  -- CMD ARGS…   spawn → initialize → tools/list answered
//! mcp_bench claude-start RUNS -- CMD ARGS…   spawn → Claude Code's `server/discover` probe →
//!                                            tools/list (or, on an error, initialize first)
//! mcp_bench throughput SESSIONS CALLS -- CMD ARGS…   SESSIONS processes calling at once
//! mcp_bench memory   SESSIONS [PID…] -- CMD ARGS…   start SESSIONS sessions, then sum the RSS
//!                                                 and PSS of them and of the given PIDs
//! ```
//! `latency` and `pair` speak the handshake era, or with `MCP_BENCH_ERA=2026-07-28` the era
//! Claude Code 2.1.328 speaks. Each prints one JSON object on stdout. A CMD of `unix:SOCKET`
//! talks to a coogle daemon's socket directly (hello, then MCP), to tell the daemon's cost from the shim's; `raw:SOCKET`
//! talks MCP to any socket at once (one `socat` listener: the one-hop floor beside it).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Option<Child>,
    stdin: Box<dyn Write + Send>,
    stdout: BufReader<Box<dyn Read + Send>>,
    next: u64,
    /// The envelope every request carries, in a 2026-07-28 session (see [`Server::open`]).
    meta: Option<Value>,
}

impl Server {
    fn spawn(cmd: &[String]) -> Server {
        let socket = cmd[0].strip_prefix("unix:").map(|s| (s, true));
        if let Some((socket, hello)) = socket.or(cmd[0].strip_prefix("raw:").map(|s| (s, false))) {
            let stream = std::os::unix::net::UnixStream::connect(socket)
                .unwrap_or_else(|e| panic!("could not connect to {socket}: {e}"));
            let mut w = stream.try_clone().unwrap();
            let mut stdout: BufReader<Box<dyn Read + Send>> = BufReader::new(Box::new(stream));
            if hello {
                w.write_all(b"{\"coogle\":1,\"mode\":\"mcp\",\"version\":\"bench\"}\n")
                    .unwrap();
                let mut reply = String::new();
                stdout.read_line(&mut reply).unwrap();
                assert!(reply.contains("\"ok\":true"), "hello refused: {reply}");
            }
            return Server {
                child: None,
                stdin: Box::new(w),
                stdout,
                next: 1,
                meta: None,
            };
        }
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {cmd:?}: {e}"));
        let stdin: Box<dyn Write + Send> = Box::new(child.stdin.take().unwrap());
        let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
        let stdout = BufReader::new(stdout);
        Server {
            child: Some(child),
            stdin,
            stdout,
            next: 1,
            meta: None,
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let mut line =
            serde_json::to_vec(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
                .unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
        self.read_answer(&json!(id))
    }

    /// The next answer to request `id`, skipping notifications and other answers.
    fn read_answer(&mut self, id: &Value) -> Value {
        let mut buf = String::new();
        loop {
            buf.clear();
            assert!(
                self.stdout.read_line(&mut buf).unwrap() > 0,
                "server closed stdout"
            );
            let v: Value = serde_json::from_str(&buf).unwrap();
            if v["id"] == *id && v.get("method").is_none() {
                return v;
            }
        }
    }

    fn initialize(&mut self) {
        self.request(
            "initialize",
            json!({"protocolVersion":"2025-11-25","capabilities":{"roots":{},"elicitation":{}},
                   "clientInfo":{"name":"mcp-bench","version":"1"}}),
        );
        self.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
    }

    /// Start the session in the era `MCP_BENCH_ERA` names: `2026-07-28` as Claude Code 2.1.328
    /// does (its `server/discover` probe, then every request with the envelope in `_meta`), or
    /// else the handshake (`initialize`).
    fn open(&mut self) {
        if std::env::var("MCP_BENCH_ERA").as_deref() != Ok("2026-07-28") {
            return self.initialize();
        }
        self.stdin.write_all(CLAUDE_PROBE.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        let answer = self.read_answer(&json!("server-discover-probe-1"));
        assert!(
            answer.get("result").is_some(),
            "the server did not take the 2026-07-28 era: {answer}"
        );
        self.meta = Some(claude_envelope());
    }

    /// One `tools/call` of echo, in the session's era.
    fn call(&mut self, i: u64) -> Value {
        let mut params = echo_args(i);
        if let Some(meta) = &self.meta {
            params["_meta"] = meta.clone();
        }
        self.request("tools/call", params)
    }

    fn rss_kib(&self) -> u64 {
        self.child.as_ref().map_or(0, |c| rss_kib(c.id()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(c) = &mut self.child else {
            return;
        };
        // MCP_BENCH_GRACEFUL=1: close stdin and give the server a few seconds to exit by
        // itself, as a client ending a session does, so a server run under a profiler
        // (`valgrind --tool=callgrind`, `strace -c`) gets to write its report; SIGKILL after.
        if std::env::var_os("MCP_BENCH_GRACEFUL").is_some() {
            self.stdin = Box::new(std::io::sink());
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Proportional set size: shared pages (the same binary in ten shims) counted once in total.
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The given processes and every process below them (uvx's python, say).
fn with_descendants(roots: &[u32]) -> Vec<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut all: Vec<u32> = roots.to_vec();
    let mut i = 0;
    while i < all.len() {
        let p = all[i];
        all.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    all
}

/// Start `sessions` sessions (each lists tools), then measure them and `others` together.
fn memory(sessions: u64, others: &[u32], cmd: &[String]) -> Value {
    let mut servers: Vec<Server> = (0..sessions).map(|_| Server::spawn(cmd)).collect();
    for s in &mut servers {
        s.initialize();
        s.request("tools/list", json!({}));
    }
    let roots: Vec<u32> = servers
        .iter()
        .filter_map(|s| s.child.as_ref().map(Child::id))
        .collect();
    let session_pids = with_descendants(&roots);
    let sum = |f: fn(u32) -> u64, pids: &[u32]| pids.iter().map(|p| f(*p)).sum::<u64>();
    json!({
        "sessions": sessions,
        "sessions_rss_kib": sum(rss_kib, &session_pids),
        "sessions_pss_kib": sum(pss_kib, &session_pids),
        "others_rss_kib": sum(rss_kib, others),
        "others_pss_kib": sum(pss_kib, others),
    })
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((q / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn echo_args(i: u64) -> Value {
    json!({"name":"echo","arguments":{"text": format!("bench-{i}"), "message": format!("bench-{i}")}})
}

fn latency(calls: u64, cmd: &[String]) -> Value {
    let mut s = Server::spawn(cmd);
    s.open();
    for i in 0..(calls / 10).max(20) {
        s.call(i);
    }
    let mut samples = Vec::with_capacity(calls as usize);
    for i in 0..calls {
        let t = Instant::now();
        let r = s.call(i);
        samples.push(t.elapsed());
        assert!(r.get("result").is_some(), "call failed: {r}");
    }
    samples.sort();
    json!({
        "calls": calls,
        "p50_us": percentile(&samples, 50.0),
        "p99_us": percentile(&samples, 99.0),
        "rss_kib": s.rss_kib(),
    })
}

/// Two ways measured call by call in turn, A then B, then B then A: whatever this machine does
/// to one call (a quick or a slow spell, a neighbour's burst, the CPU's clock) it does to the
/// call of the other way beside it. Runs measured one after another differ by more than the 5%
/// the goal asks about on noise alone here; calls side by side much less.
///
/// Work a way does after its answer (a runtime going back to sleep, bookkeeping after the
/// write) runs into the next call, which is the other way's half the time. `MCP_BENCH_GAP_US`
/// waits that long, untimed, before each call, so each starts with the machine quiet: a result
/// that moves with the gap is one such work was moving.
fn pair(calls: u64, a: &[String], b: &[String]) -> Value {
    let gap = std::env::var("MCP_BENCH_GAP_US")
        .ok()
        .and_then(|g| g.parse().ok())
        .map(Duration::from_micros);
    let mut ways = [Server::spawn(a), Server::spawn(b)];
    for s in &mut ways {
        s.open();
    }
    for i in 0..(calls / 10).max(20) {
        for s in &mut ways {
            s.call(i);
        }
    }
    let mut samples = [
        Vec::with_capacity(calls as usize),
        Vec::with_capacity(calls as usize),
    ];
    for i in 0..calls {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for w in order {
            if let Some(gap) = gap {
                std::thread::sleep(gap);
            }
            let t = Instant::now();
            let r = ways[w].call(i);
            samples[w].push(t.elapsed());
            assert!(r.get("result").is_some(), "call failed: {r}");
        }
    }
    let [a, b] = samples.map(|mut s| {
        s.sort();
        json!({"p50_us": percentile(&s, 50.0), "p99_us": percentile(&s, 99.0)})
    });
    json!({"calls": calls, "a": a, "b": b})
}

fn startup(runs: u64, cmd: &[String]) -> Value {
    let mut samples = Vec::new();
    let mut tools = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let mut s = Server::spawn(cmd);
        s.initialize();
        let r = s.request("tools/list", json!({}));
        samples.push(t.elapsed());
        tools = r["result"]["tools"].as_array().map_or(0, Vec::len);
    }
    samples.sort();
    json!({"runs": runs, "median_ms": percentile(&samples, 50.0) / 1000.0, "tools": tools})
}

/// The first line Claude Code 2.1.328 writes to every stdio server.
const CLAUDE_PROBE: &str = r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.328"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}}"#;

/// The envelope Claude Code 2.1.328 puts in every request's `_meta`: its probe's.
fn claude_envelope() -> Value {
    let probe: Value = serde_json::from_str(CLAUDE_PROBE).unwrap();
    probe["params"]["_meta"].clone()
}

/// A session started the way Claude Code starts one: probe, then `tools/list` in the era the
/// probe said (a DiscoverResult: 2026-07-28; an error: `initialize` first).
fn claude_start(runs: u64, cmd: &[String]) -> Value {
    let meta = claude_envelope();
    let (mut total, mut first) = (Vec::new(), Vec::new());
    let (mut tools, mut era) = (0, "");
    for _ in 0..runs {
        let t = Instant::now();
        let mut s = Server::spawn(cmd);
        s.stdin.write_all(CLAUDE_PROBE.as_bytes()).unwrap();
        s.stdin.write_all(b"\n").unwrap();
        s.stdin.flush().unwrap();
        let answer = s.read_answer(&json!("server-discover-probe-1"));
        first.push(t.elapsed());
        let listed = if answer.get("result").is_some() {
            era = "2026-07-28";
            s.request("tools/list", json!({"_meta": meta}))
        } else {
            era = "handshake";
            s.initialize();
            s.request("tools/list", json!({}))
        };
        total.push(t.elapsed());
        tools = listed["result"]["tools"].as_array().map_or(0, Vec::len);
    }
    total.sort();
    first.sort();
    json!({
        "runs": runs,
        "median_ms": percentile(&total, 50.0) / 1000.0,
        "probe_ms": percentile(&first, 50.0) / 1000.0,
        "tools": tools,
        "era": era,
    })
}

fn throughput(sessions: u64, calls: u64, cmd: &[String]) -> Value {
    let mut servers: Vec<Server> = (0..sessions).map(|_| Server::spawn(cmd)).collect();
    for s in &mut servers {
        s.initialize();
        s.request("tools/call", echo_args(0));
    }
    let t = Instant::now();
    let handles: Vec<_> = servers
        .into_iter()
        .map(|mut s| {
            std::thread::spawn(move || {
                for i in 0..calls {
                    let r = s.request("tools/call", echo_args(i));
                    assert!(r.get("result").is_some(), "call failed: {r}");
                }
                s
            })
        })
        .collect();
    let servers: Vec<Server> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let elapsed = t.elapsed().as_secs_f64();
    let shim_rss: Vec<u64> = servers.iter().map(Server::rss_kib).collect();
    json!({
        "sessions": sessions,
        "calls": sessions * calls,
        "calls_per_s": (sessions * calls) as f64 / elapsed,
        "session_rss_kib": shim_rss,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dash = args
        .iter()
        .position(|a| a == "--")
        .expect("usage: mcp_bench MODE N… -- CMD ARGS…");
    let (head, cmd) = (&args[..dash], &args[dash + 1..]);
    let n = |i: usize| -> u64 { head[i].parse().expect("a number") };
    let out = match head[0].as_str() {
        "latency" => latency(n(1), cmd),
        "pair" => {
            let split = cmd
                .iter()
                .position(|a| a == "--")
                .expect("usage: mcp_bench pair CALLS -- CMD A… -- CMD B…");
            pair(n(1), &cmd[..split], &cmd[split + 1..])
        }
        "startup" => startup(n(1), cmd),
        "claude-start" => claude_start(n(1), cmd),
        "throughput" => throughput(n(1), n(2), cmd),
        "rss" => json!({"rss_kib": rss_kib(n(1) as u32), "pss_kib": pss_kib(n(1) as u32)}),
        "memory" => {
            let others: Vec<u32> = (2..head.len()).map(|i| n(i) as u32).collect();
            memory(n(1), &others, cmd)
        }
        other => panic!("unknown mode {other}"),
    };
    println!("{out}");
}
