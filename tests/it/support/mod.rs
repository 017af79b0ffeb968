//! Shared harness for the integration tests: a sealed environment per test (temp HOME and XDG
//! dirs, its own socket and config), the real `coogle` binary, the fake upstream, and small MCP
//! helpers. Every wait is bounded; a failure prints what the processes said.
#![allow(clippy::print_stderr)]

#[path = "../../../src/fake_executable/write.rs"]
mod fake_executable;
pub mod fake_github;
pub mod gemini_mock;
pub mod installed;
mod prerequisites;
pub mod pty;
pub mod report;
pub mod serve;
pub mod snapshot;
pub mod tls_front;
mod wait;

pub use fake_executable::{copy_executable, write_executable};
pub use prerequisites::*;
use report::Capture;
pub use wait::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const COOGLE: &str = env!("CARGO_BIN_EXE_coogle");

/// The fake MCP server example, built by `cargo test` beside the test binaries.
pub fn fake_mcp() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> → target/<profile>/examples/fake_mcp
    let profile_dir = exe.parent().and_then(Path::parent).expect("profile dir");
    let path = profile_dir.join("examples").join("fake_mcp");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--example", "fake_mcp"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build --example fake_mcp");
        assert!(status.success(), "building the fake MCP server failed");
    }
    assert!(path.exists(), "fake_mcp not found at {}", path.display());
    path
}

/// The bytes of a client-config fixture under `tests/data/clients` (`claude.json`, ...).
pub fn client_fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/clients")
            .join(name),
    )
    .unwrap()
}

/// The executable a running process was started from, resolved through links (Linux
/// `/proc/<pid>/exe`, macOS `proc_pidpath`).
pub fn exe_of(pid: u32) -> PathBuf {
    #[cfg(target_os = "macos")]
    {
        let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
        // SAFETY: proc_pidpath writes at most `buf.len()` bytes and returns how many.
        let n =
            unsafe { libc::proc_pidpath(pid as i32, buf.as_mut_ptr().cast(), buf.len() as u32) };
        assert!(n > 0, "proc_pidpath({pid}) failed");
        buf.truncate(n as usize);
        std::fs::canonicalize(String::from_utf8(buf).unwrap()).unwrap()
    }
    #[cfg(not(target_os = "macos"))]
    {
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
    }
}

/// The resident memory of a process in KiB (Linux `/proc/<pid>/status`, elsewhere `ps`).
pub fn rss_kib(pid: u32) -> u64 {
    if cfg!(target_os = "linux") {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap()
    } else {
        let out = Command::new("ps")
            .args(["-o", "rss=", "-p", &pid.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

/// One test's private world.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::Builder::new()
            .prefix("cg")
            .tempdir_in("/tmp")
            .unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".config/coogle")).unwrap();
        let socket = tmp.path().join("run").join("coogle.sock");
        let config = home.join(".config/coogle/config.json");
        let log = if cfg!(target_os = "macos") {
            home.join("Library/Logs/coogle/coogle.log")
        } else {
            home.join(".local/state/coogle/coogle.log")
        };
        Env {
            tmp,
            home,
            socket,
            config,
            log,
        }
    }

    /// An env whose single upstream `google` is the fake server, with `extra` merged into the
    /// server's config and `env` added to its environment.
    pub fn with_fake(server_extra: Value) -> Env {
        let env = Env::new();
        env.write_fake_config(server_extra);
        env
    }

    pub fn write_fake_config(&self, server_extra: Value) {
        let mut server = json!({
            "command": fake_mcp(),
            "args": [],
            "env": {},
            "credentials": {"source": "none"},
        });
        if let Value::Object(extra) = server_extra {
            for (k, v) in extra {
                server[k] = v;
            }
        }
        self.write_config(&json!({"servers": {"google": server}}));
    }

    pub fn write_config(&self, config: &Value) {
        std::fs::write(&self.config, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// The service file `coogle setup` installs on this OS: the systemd user unit, or the
    /// LaunchAgent on macOS.
    pub fn service_file(&self) -> PathBuf {
        if cfg!(target_os = "macos") {
            self.home
                .join("Library/LaunchAgents/dev.coogle.daemon.plist")
        } else {
            self.home.join(".config/systemd/user/coogle.service")
        }
    }

    /// `coogle` with this env's HOME, XDG dirs, config and socket. The rest of the environment
    /// is inherited (CA bundles, PATH, pyenv), and uv keeps using the real cache so third-party
    /// servers are not downloaded again for every temporary HOME.
    pub fn cmd(&self) -> Command {
        self.sealed(COOGLE)
    }

    /// Any program with this env's HOME, XDG dirs, config and socket (a client that starts
    /// `coogle mcp` itself, say), as [`Env::cmd`] runs coogle.
    pub fn sealed(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        if let Some(real_home) = std::env::var_os("HOME").map(PathBuf::from) {
            if std::env::var_os("UV_CACHE_DIR").is_none() {
                c.env("UV_CACHE_DIR", real_home.join(".cache/uv"));
            }
            let tools = real_home.join(".local/share/uv/tools");
            if std::env::var_os("UV_TOOL_DIR").is_none() && tools.is_dir() {
                c.env("UV_TOOL_DIR", tools);
            }
        }
        c.env_remove("XDG_RUNTIME_DIR")
            .env_remove("CLAUDE_CODE_SESSION_ID")
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("COOGLE_CONFIG", &self.config)
            .env("COOGLE_SOCKET", &self.socket)
            .env("RUST_LOG", "coogle=debug")
            // Never Claude Code's real CLI on a developer's PATH; tests that want one set it.
            .env("COOGLE_CLAUDE_CLI", "none")
            // Never the real service managers: on a Mac, `setup` would otherwise bootstrap the
            // test's LaunchAgent into the developer's own GUI session. Tests that want one
            // point these at a stand-in.
            .env("COOGLE_SYSTEMCTL", self.tmp.path().join("no-systemctl"))
            .env("COOGLE_LAUNCHCTL", self.tmp.path().join("no-launchctl"))
            // A developer's Gemini key would add the `search` upstream to every test daemon.
            .env_remove("GOOGLE_API_KEY")
            .env_remove("GEMINI_API_KEY")
            .stdin(Stdio::null());
        c
    }

    /// Run a CLI command to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        Output::of(self.cmd(), args)
    }

    /// Start `coogle serve` and wait until it answers.
    pub fn daemon(&self) -> Daemon {
        let mut serve = self.cmd();
        serve.args(["serve", "--log-stderr"]);
        self.daemon_of(serve)
    }

    /// Start a daemon as `serve` says (`coogle serve` under another program, say) and wait
    /// until it answers.
    pub fn daemon_of(&self, mut serve: Command) -> Daemon {
        let child = serve
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn coogle serve");
        let d = Daemon::new(child);
        self.wait_ready();
        d
    }

    /// The pid of the daemon serving this environment's socket (it answers `info`).
    #[track_caller]
    pub fn daemon_pid(&self) -> u32 {
        let pid = control(&self.socket, "info", Value::Null).unwrap()["pid"].as_u64();
        pid.and_then(|p| u32::try_from(p).ok())
            .unwrap_or_else(|| panic!("info named no pid"))
    }

    /// Wait until the daemon answers `ping`.
    #[track_caller]
    pub fn wait_ready(&self) {
        wait_control(
            &self.socket,
            "ping",
            "the daemon to answer",
            Duration::from_secs(20),
            |_| true,
        );
    }

    /// Ask for the (first) upstream's child to start, as a first uncached request would, without
    /// waiting: children start on demand. (The answer comes once the child is ready, or fails
    /// when it cannot start; `status` says which.)
    pub fn demand_start(&self) {
        demand_start(&self.socket, None);
    }

    /// Start the (first) upstream's child, as a first uncached request would, and wait until it
    /// is `ready`.
    #[track_caller]
    pub fn wait_upstream_ready(&self) -> Value {
        // A demand made before the daemon listens would be lost.
        self.wait_ready();
        self.demand_start();
        wait_status(
            &self.socket,
            "the upstream to be ready",
            Duration::from_secs(60),
            |s| s["upstreams"][0]["state"] == "ready",
        )
    }

    pub fn shim(&self) -> Shim {
        self.shim_with(&[])
    }

    /// A shim started by the Claude Code session `id` (its `CLAUDE_CODE_SESSION_ID`).
    pub fn shim_of_claude_session(&self, id: &str) -> Shim {
        let mut cmd = self.cmd();
        cmd.env("CLAUDE_CODE_SESSION_ID", id);
        self.stdio_server(cmd, &["mcp"])
    }

    pub fn shim_with(&self, extra: &[&str]) -> Shim {
        let mut args = vec!["mcp"];
        args.extend_from_slice(extra);
        self.stdio_server(self.cmd(), &args)
    }

    /// Any coogle mode that speaks MCP on stdio (`mcp`, `search-server`), driven as a client.
    pub fn stdio_server(&self, mut cmd: Command, args: &[&str]) -> Shim {
        let mut child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn coogle mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Shim {
            child,
            stdin: Some(stdin),
            rx,
            next_id: 1,
            stray: Vec::new(),
        }
    }
}

impl Drop for Env {
    /// Stop any daemon still serving this env's socket (one a shim started, say), even when the
    /// test failed, so no daemon or child outlives its test. When the test failed, show the log
    /// under this HOME: what a daemon a shim started said is nowhere else.
    fn drop(&mut self) {
        if self.socket.exists() {
            let _ = control(&self.socket, "shutdown", Value::Null);
        }
        if std::thread::panicking() && self.log.exists() {
            report::show_log_file("the log file under this test's HOME", &self.log);
        }
    }
}

pub struct Output {
    pub args: Vec<String>,
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Run `cmd` with `args` added, to completion, keeping what it said.
    pub fn of(mut cmd: Command, args: &[&str]) -> Output {
        let out = cmd.args(args).output().expect("run coogle");
        Output {
            args: args.iter().map(|s| s.to_string()).collect(),
            status: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "coogle {:?} exited {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.args, self.status, self.stdout, self.stderr
        )
    }
}

/// A `coogle serve` process, stopped when dropped (SIGTERM, then SIGKILL after 10 s). When the
/// test fails, its log (its stderr, with `--log-stderr`) is shown.
pub struct Daemon {
    pub child: Option<Child>,
    /// Its stderr (the log, with `--log-stderr`), drained as it comes: a daemon whose log pipe
    /// fills blocks in its logging, which is not what any test means to check.
    stderr: Option<Capture>,
}

impl Daemon {
    fn new(mut child: Child) -> Daemon {
        let stderr = child.stderr.take().map(Capture::spawn);
        Daemon {
            child: Some(child),
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Send a signal and wait for exit; returns the exit code and stderr.
    pub fn signal_and_wait(&mut self, sig: i32) -> (Option<i32>, String) {
        let child = self.child.as_ref().unwrap();
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        self.wait_exit()
    }

    pub fn wait_exit(&mut self) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        let status = wait_child(&mut child, Duration::from_secs(20));
        let err = self.stderr.take().map(Capture::finish).unwrap_or_default();
        (status, err)
    }
}

fn wait_child(child: &mut Child, timeout: Duration) -> Option<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("process {} did not exit within {timeout:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let pid = c.id();
        stop(&mut c);
        if std::thread::panicking()
            && let Some(stderr) = &mut self.stderr
        {
            let log = stderr.settle(Duration::from_secs(2));
            report::show_tail(&format!("coogle serve (pid {pid}), its log"), &log);
        }
    }
}

/// Stop a daemon: SIGTERM first so it stops its children too, SIGKILL after 10 s.
fn stop(c: &mut Child) {
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// A `coogle mcp` process driven as an MCP client.
pub struct Shim {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<String>,
    next_id: u64,
    /// Messages read while waiting for something else (notifications, other answers).
    pub stray: Vec<Value>,
}

impl Shim {
    pub fn send(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.rx.recv_timeout(timeout).ok()?;
        Some(
            serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the shim wrote a line that is not JSON ({e}): {line:?}")
            }),
        )
    }

    /// Wait for the answer to `id`, keeping anything else in `stray`.
    pub fn response(&mut self, id: &Value, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        if let Some(pos) = self
            .stray
            .iter()
            .position(|m| &m["id"] == id && m.get("method").is_none())
        {
            return self.stray.remove(pos);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.recv(left).unwrap_or_else(|| {
                panic!(
                    "no answer to id {id} within {timeout:?}; stray: {:?}",
                    self.stray
                )
            });
            if &msg["id"] == id && msg.get("method").is_none() {
                return msg;
            }
            self.stray.push(msg);
        }
    }

    /// Wait for a notification with this method.
    pub fn notification(&mut self, method: &str, timeout: Duration) -> Value {
        if let Some(pos) = self.stray.iter().position(|m| m["method"] == method) {
            return self.stray.remove(pos);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = self.recv(left).unwrap_or_else(|| {
                panic!("no {method} within {timeout:?}; stray: {:?}", self.stray)
            });
            if msg["method"] == method {
                return msg;
            }
            self.stray.push(msg);
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.response(&id, Duration::from_secs(30))
    }

    /// initialize + initialized; returns the initialize result.
    pub fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {}, "elicitation": {}},
                "clientInfo": {"name": "test-client", "version": "9.9.9"}
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        // A round trip, so the daemon has seen `initialized` (notifications go only to
        // initialized sessions) before the test goes on.
        self.request("ping", json!({}));
        r["result"].clone()
    }

    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    pub fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of a tool result's first content block.
pub fn text(result: &Value) -> String {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
        .to_string()
}

/// One control request over a fresh connection, as `nc -U` would send it.
pub fn control(socket: &Path, method: &str, params: Value) -> Result<Value, String> {
    let line = raw_exchange(
        socket,
        &serde_json::to_vec(&json!({"id": "t", "method": method, "params": params})).unwrap(),
    )?;
    let v: Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
    if v["ok"] == true {
        Ok(v["result"].clone())
    } else {
        Err(v["error"].to_string())
    }
}

/// Ask the daemon on `socket` to start `server`'s child (the first one's without a name), as a
/// first uncached request would, without waiting for it: children start on demand.
pub fn demand_start(socket: &Path, server: Option<&str>) {
    let socket = socket.to_owned();
    let params = server.map_or(Value::Null, |s| json!({"server": s}));
    std::thread::spawn(move || {
        let _ = control(&socket, "start_child", params);
    });
}

/// Connect, waiting out a full accept backlog (EAGAIN on a loaded machine) for up to 5 s: the
/// tests that use this check answers, not how fast a busy daemon accepts.
pub fn connect_patiently(socket: &Path) -> std::io::Result<UnixStream> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match UnixStream::connect(socket) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// Send bytes plus a newline on a fresh connection and read one line back.
pub fn raw_exchange(socket: &Path, bytes: &[u8]) -> Result<String, String> {
    let mut s = connect_patiently(socket).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // The daemon may answer and close before it has read everything (a line over its cap):
    // the answer is then already here, and our write's broken pipe is not the outcome.
    let wrote = s.write_all(bytes).and_then(|()| s.write_all(b"\n"));
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let read = r.read_line(&mut line);
    if line.is_empty() {
        return Err(match (wrote, read) {
            (Err(e), _) | (_, Err(e)) => e.to_string(),
            _ => "connection closed without an answer".into(),
        });
    }
    Ok(line)
}

/// True while `pid` runs; a zombie is not alive for our purposes.
#[cfg(target_os = "linux")]
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | Some(Some('X')))
        }
        Err(_) => false,
    }
}

/// Every live process whose command line mentions `needle`.
#[cfg(target_os = "linux")]
pub fn processes_matching(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmd).contains(needle)
            && pid_alive(pid)
        {
            out.push(pid);
        }
    }
    out
}

/// Without /proc (macOS): what `ps` says. Its `stat` column starts with `Z` for a zombie.
#[cfg(not(target_os = "linux"))]
pub fn pid_alive(pid: u32) -> bool {
    let out = Command::new("ps")
        .args(["-o", "stat=", "-p", &pid.to_string()])
        .output()
        .unwrap();
    let stat = String::from_utf8_lossy(&out.stdout);
    let stat = stat.trim();
    !stat.is_empty() && !stat.starts_with('Z')
}

#[cfg(not(target_os = "linux"))]
pub fn processes_matching(needle: &str) -> Vec<u32> {
    let out = Command::new("ps")
        .args(["-axww", "-o", "pid=,command="])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .filter(|&pid| pid_alive(pid))
        .collect()
}

pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// A tools/list result without the `coogle` tool the daemon adds, and that tool (which must be
/// the last one).
pub fn split_coogle_tool(result: &Value) -> (Value, Value) {
    let mut r = result.clone();
    let tools = r["tools"].as_array_mut().expect("a tool list");
    let last = tools.pop().expect("at least the coogle tool");
    assert_eq!(
        last["name"], "coogle",
        "the coogle tool comes last: {result}"
    );
    assert!(
        tools.iter().all(|t| t["name"] != "coogle"),
        "the coogle tool appears once"
    );
    (r, last)
}

/// Run `tests/it/py/era_client.py` (the official Python SDK as the client) against
/// `coogle mcp` in this env; its JSON report, or a failure naming what it printed.
pub fn py_client(env: &Env, mode: &str, extra: &[&str], shim_args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/py/era_client.py");
    let mut cmd = env.sealed("python3");
    cmd.arg(&script)
        .args(["--mode", mode])
        .args(extra)
        .arg("--")
        .arg(COOGLE)
        .arg("mcp");
    cmd.args(shim_args);
    let out = cmd.output().expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "era_client.py printed no JSON ({e}); status {:?}\n--- stdout\n{stdout}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// How many lines of the fake server's event log start with `prefix` (a method name).
pub fn count_events(log: &Path, prefix: &str) -> usize {
    read_lines(log)
        .iter()
        .filter(|l| l.starts_with(prefix))
        .count()
}

impl Env {
    /// An env whose fake upstream logs every message it receives to the returned file.
    pub fn with_fake_events(mut server_extra: Value) -> (Env, PathBuf) {
        let env = Env::new();
        let events = env.path("events.log");
        let mut vars = server_extra
            .get("env")
            .cloned()
            .unwrap_or_else(|| json!({}));
        vars["FAKE_MCP_EVENT_LOG"] = json!(events);
        server_extra["env"] = vars;
        env.write_fake_config(server_extra);
        (env, events)
    }
}

impl Env {
    /// Run Claude Code's `claude` with this env's HOME: its exit code and all it printed.
    pub fn run_claude(&self, claude: &Path, args: &[&str]) -> (Option<i32>, String) {
        let out = self.sealed(claude).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    }
}

/// Say that a test, or a part of it, did not run here, and why (CI fails instead: see its
/// callers).
pub fn skipped(why: &str) {
    eprintln!("SKIPPED: {why}");
}
