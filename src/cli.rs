//! The command line: clap definitions and each command's run function and output.
//!
//! Commands that talk to a running daemon use control mode (`status`, `restart`, `stop`) or an
//! rmcp client in mcp mode (`tools`, `call`), so the CLI exercises the same path an agent does.
//! Exit codes are [`ExitCode`]: 0 success, 1 the operation failed, 2 usage or environment.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};
use rmcp::model::{CallToolRequestParams, ContentBlock};
use serde_json::{Value, json};

use crate::client::{self, ClientError, Starter};
use crate::config::{self, Config};
use crate::output::{self, ExitCode};
use crate::{daemon, logging, paths, shim, wire};

/// `coogle --version`: the package version, then the git revision and commit date when built
/// from a git checkout (`0.1.0 (abc1234 2026-11-22)`).
pub const VERSION_LINE: &str = if env!("COOGLE_GIT_REV").is_empty() {
    env!("CARGO_PKG_VERSION")
} else {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (",
        env!("COOGLE_GIT_REV"),
        " ",
        env!("COOGLE_GIT_DATE"),
        ")"
    )
};

#[derive(Debug, Parser)]
#[command(
    name = "coogle",
    version = crate::cli::VERSION_LINE,
    about = "Share one stdio MCP server among many AI-agent sessions",
    long_about = "coogle runs one daemon per user that owns the MCP server child process(es) \
                  (by default Google Workspace MCP) and multiplexes every agent session onto \
                  them. Point Claude Code at `coogle mcp` instead of the server itself."
)]
pub struct Cli {
    /// Config file (default: $XDG_CONFIG_HOME/coogle/config.json)
    #[arg(long, global = true, env = "COOGLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Daemon socket (default: config socketPath, else $XDG_RUNTIME_DIR/coogle/coogle.sock)
    #[arg(long, global = true, env = "COOGLE_SOCKET")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground
    Serve {
        /// Also log to stderr when it is not a terminal
        #[arg(long)]
        log_stderr: bool,
    },
    /// The stdio MCP server an agent starts: a pump to the daemon (starts one if needed)
    Mcp {
        /// Which upstream to serve (default: the only one, or `google`)
        #[arg(long)]
        server: Option<String>,
    },
    /// Show the daemon, its upstreams and sessions
    Status {
        /// Print JSON for scripts
        #[arg(long)]
        json: bool,
    },
    /// List the upstream's tools (through the daemon, as an agent sees them)
    Tools {
        #[arg(long)]
        server: Option<String>,
        /// Print the full tool definitions as JSON
        #[arg(long)]
        json: bool,
    },
    /// Call a tool: `coogle call TOOL '{"arg":"value"}'`
    Call {
        /// The tool's name
        tool: String,
        /// Arguments as a JSON object (default `{}`); `-` reads them from stdin
        arguments: Option<String>,
        #[arg(long)]
        server: Option<String>,
        /// Print the whole result as JSON
        #[arg(long)]
        json: bool,
    },
    /// Restart the upstream child process
    Restart {
        #[arg(long)]
        server: Option<String>,
    },
    /// Stop the daemon
    Stop,
    /// The built-in ask_google MCP server (Gemini with Google Search grounding), on stdio
    SearchServer(crate::search_server::Args),
    /// Guided setup: credentials, config, service, client config
    Setup(crate::setup::SetupArgs),
    /// Check the installation and say how to fix what is wrong
    Doctor(crate::setup::DoctorArgs),
    /// Remove the service and restore the client configs coogle changed
    Uninstall(crate::setup::UninstallArgs),
    /// Print the macOS LaunchAgent plist for this machine
    GeneratePlist,
    /// Print the systemd user unit for this machine
    GenerateUnit,
    /// Update a standalone install to the newest release (not for Homebrew installs)
    SelfUpdate(crate::update::SelfUpdateArgs),
    /// Print shell completions: `coogle completions bash|zsh|fish|elvish|powershell`
    Completions(crate::update::CompletionsArgs),
    /// Show the daemon's log
    Logs {
        /// Keep printing as the log grows
        #[arg(short, long)]
        follow: bool,
        /// How many lines from the end
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
}

/// Everything a command needs that comes from flags and config.
struct Context {
    config_flag: Option<PathBuf>,
    config: Config,
    socket: PathBuf,
}

impl Context {
    fn load(cli: &Cli) -> Result<Context, config::ConfigError> {
        let config = Config::load(cli.config.as_deref())?;
        let socket = cli
            .socket
            .clone()
            .or_else(|| config.socket_path.clone())
            .unwrap_or_else(paths::default_socket);
        Ok(Context {
            config_flag: cli.config.clone(),
            config,
            socket,
        })
    }

    fn starter(&self) -> Starter {
        Starter {
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("coogle")),
            config: self.config_flag.clone(),
            socket: self.socket.clone(),
            log_file: paths::log_file(),
        }
    }
}

/// `coogle mcp`: the pump runs on plain threads, outside any async runtime.
/// `coogle mcp`'s own options, read without clap: the shim starts once per agent session, and
/// building clap's whole command tree pages in a good part of the binary for a process that
/// then only pumps bytes. Only the plain forms are taken (`mcp`, `--server`, and the global
/// `--config`/`--socket`, as `--flag value` or `--flag=value`, and their `COOGLE_*`
/// variables); anything else (`--help`, unknown flags, non-UTF-8, an empty variable) returns
/// `None` and goes to clap, so behaviour never differs.
pub fn fast_mcp(
    args: &[std::ffi::OsString],
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<Cli> {
    let mut config: Option<PathBuf> = None;
    let mut socket: Option<PathBuf> = None;
    let mut server: Option<String> = None;
    let mut seen_mcp = false;
    let mut it = args.iter().map(|a| a.to_str());
    while let Some(arg) = it.next() {
        let arg = arg?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg, None),
        };
        let mut value = || -> Option<String> {
            let v = match inline {
                Some(v) => v.to_owned(),
                None => it.next()??.to_owned(),
            };
            (!v.is_empty() && !v.starts_with('-')).then_some(v)
        };
        match flag {
            "mcp" if !seen_mcp && inline.is_none() => seen_mcp = true,
            "--config" if config.is_none() => config = Some(PathBuf::from(value()?)),
            "--socket" if socket.is_none() => socket = Some(PathBuf::from(value()?)),
            "--server" if seen_mcp && server.is_none() => server = Some(value()?),
            _ => return None,
        }
    }
    if !seen_mcp {
        return None;
    }
    let from_env = |name: &str| -> Option<Option<PathBuf>> {
        match env(name) {
            None => Some(None),
            Some(v) if v.is_empty() => None,
            Some(v) => Some(Some(PathBuf::from(v))),
        }
    };
    if config.is_none() {
        config = from_env("COOGLE_CONFIG")?;
    }
    if socket.is_none() {
        socket = from_env("COOGLE_SOCKET")?;
    }
    Some(Cli {
        config,
        socket,
        command: Command::Mcp { server },
    })
}

pub fn mcp(cli: &Cli, server: Option<String>) -> ExitCode {
    logging::init_stderr("coogle=warn,rmcp=warn");
    let ctx = match Context::load(cli) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::Usage;
        }
    };
    let opts = shim::Options {
        socket: ctx.socket.clone(),
        server,
        starter: ctx.starter(),
        max_line_bytes: ctx.config.max_line_bytes,
    };
    match shim::run(opts) {
        Ok(()) => ExitCode::Success,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::Usage
        }
    }
}

/// Every other command, inside the async runtime.
pub async fn run(cli: Cli) -> ExitCode {
    match &cli.command {
        Command::Serve { log_stderr } => {
            let ctx = match Context::load(&cli) {
                Ok(c) => c,
                Err(e) => return config_error(&e),
            };
            serve(ctx, *log_stderr).await
        }
        Command::Logs { follow, lines } => logs(&paths::log_file(), *lines, *follow).await,
        Command::SearchServer(args) => {
            crate::search_server::run(args.clone(), cli.config.clone()).await
        }
        _ => {
            logging::init_stderr("coogle=warn,rmcp=warn");
            let ctx = match Context::load(&cli) {
                Ok(c) => c,
                Err(e) => return config_error(&e),
            };
            let result = match &cli.command {
                Command::Status { json } => status(&ctx, *json).await,
                Command::Tools { server, json } => tools(&ctx, server.clone(), *json).await,
                Command::Call {
                    tool,
                    arguments,
                    server,
                    json,
                } => call(&ctx, server.clone(), tool, arguments.as_deref(), *json).await,
                Command::Restart { server } => restart(&ctx, server.clone()).await,
                Command::Stop => stop(&ctx).await,
                Command::Serve { .. }
                | Command::Mcp { .. }
                | Command::Logs { .. }
                | Command::SearchServer(_)
                | Command::Setup(_)
                | Command::Doctor(_)
                | Command::Uninstall(_)
                | Command::GeneratePlist
                | Command::GenerateUnit
                | Command::SelfUpdate(_)
                | Command::Completions(_) => {
                    unreachable!("handled above or in main")
                }
            };
            match result {
                Ok(code) => code,
                Err(e) => client_error(&e),
            }
        }
    }
}

fn config_error(e: &config::ConfigError) -> ExitCode {
    output::error(
        e,
        Some("fix the file, or move it aside to use the defaults"),
    );
    ExitCode::Usage
}

fn client_error(e: &ClientError) -> ExitCode {
    output::error(e, e.hint().as_deref());
    match e {
        ClientError::Remote(_) | ClientError::Mcp(_) => ExitCode::Failure,
        _ => ExitCode::Usage,
    }
}

async fn serve(ctx: Context, log_stderr: bool) -> ExitCode {
    let log_file = paths::log_file();
    if let Err(e) = logging::init_daemon(&log_file, &ctx.config.log_level, log_stderr) {
        output::error_text(
            &format!("could not open the log file {}: {e}", log_file.display()),
            None,
        );
        return ExitCode::Usage;
    }
    let options = daemon::Options {
        socket: ctx.socket.clone(),
        handle_signals: true,
        log_file: Some(log_file),
    };
    match daemon::run(ctx.config, options).await {
        Ok(daemon::Outcome::Stopped) => ExitCode::Success,
        Ok(daemon::Outcome::AlreadyRunning) => {
            output::note(&format!(
                "coogle daemon already running on {}",
                ctx.socket.display()
            ));
            ExitCode::Success
        }
        Err(e) => {
            tracing::error!("{e}");
            output::error(&e, None);
            ExitCode::Usage
        }
    }
}

fn fmt_duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

fn fmt_stats(stats: &Value) -> String {
    let n = |k: &str| stats.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut s = format!(
        "{} calls ({} ok, {} errors, {} timeouts, {} cancelled)",
        n("calls"),
        n("ok"),
        n("errors"),
        n("timeouts"),
        n("cancelled")
    );
    if let (Some(p50), Some(p99)) = (
        stats.get("p50Ms").and_then(Value::as_f64),
        stats.get("p99Ms").and_then(Value::as_f64),
    ) {
        s.push_str(&format!(" · p50 {p50:.1} ms · p99 {p99:.1} ms"));
    }
    s
}

/// The human form of `status`.
pub fn render_status(status: &Value) -> String {
    let d = &status["daemon"];
    let mut out = format!(
        "coogle daemon {} · pid {} · up {} · {}\n",
        d["version"].as_str().unwrap_or("?"),
        d["pid"],
        fmt_duration_ms(d["uptimeMs"].as_u64().unwrap_or(0)),
        d["socket"].as_str().unwrap_or("?"),
    );
    for u in status["upstreams"].as_array().into_iter().flatten() {
        let mut line = format!(
            "\n{} · {}",
            u["name"].as_str().unwrap_or("?"),
            u["state"].as_str().unwrap_or("?")
        );
        if let Some(pid) = u["pid"].as_u64() {
            line.push_str(&format!(" · pid {pid}"));
        }
        if let Some(up) = u["uptimeMs"].as_u64() {
            line.push_str(&format!(" · up {}", fmt_duration_ms(up)));
        }
        if let Some(t) = u["tools"].as_u64() {
            line.push_str(&format!(" · {t} tool{}", if t == 1 { "" } else { "s" }));
        }
        out.push_str(&line);
        out.push('\n');
        out.push_str(&format!(
            "  command: {}\n",
            u["command"].as_str().unwrap_or("")
        ));
        out.push_str(&format!(
            "  queue {} · in flight {}/{} · restarts {}",
            u["queue"], u["inFlight"], u["maxConcurrent"], u["restarts"]
        ));
        if let Some(next) = u["nextRestartInMs"].as_u64() {
            out.push_str(&format!(
                " · next start in {:.1}s (failures in a row: {})",
                next as f64 / 1000.0,
                u["consecutiveFailures"]
            ));
        }
        out.push('\n');
        out.push_str(&format!("  {}\n", fmt_stats(&u["stats"])));
        if let Some(e) = u["lastError"].as_str() {
            out.push_str(&format!("  last error: {e}\n"));
        }
        for s in u["signIn"].as_array().into_iter().flatten() {
            let account = s["account"].as_str().filter(|a| !a.is_empty());
            out.push_str(&format!(
                "  sign-in required{}: {}\n",
                account.map(|a| format!(" for {a}")).unwrap_or_default(),
                s["url"].as_str().unwrap_or("?")
            ));
        }
        let sessions = u["sessions"].as_array().cloned().unwrap_or_default();
        out.push_str(&format!("  sessions: {}\n", sessions.len()));
        for s in sessions {
            let client = s["clientInfo"]["name"]
                .as_str()
                .or(s["client"].as_str())
                .unwrap_or("unknown client");
            let version = s["clientInfo"]["version"].as_str().unwrap_or("");
            let mut line = format!("    #{} {client} {version}", s["id"]);
            if let Some(pid) = s["pid"].as_u64() {
                line.push_str(&format!(" · pid {pid}"));
            }
            if let Some(cs) = s["claudeSessionId"].as_str() {
                line.push_str(&format!(" · session {cs}"));
            }
            line.push_str(&format!(
                " · up {} · queued {} · in flight {} · {}",
                fmt_duration_ms(s["uptimeMs"].as_u64().unwrap_or(0)),
                s["queued"],
                s["inFlight"],
                fmt_stats(&s["stats"])
            ));
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out
}

async fn status(ctx: &Context, as_json: bool) -> Result<ExitCode, ClientError> {
    let status = client::control(&ctx.socket, "status", Value::Null).await?;
    if as_json {
        output::json(&status);
    } else {
        output::out(&render_status(&status));
    }
    let healthy = status["upstreams"]
        .as_array()
        .is_some_and(|u| u.iter().all(|u| u["state"] == "ready"));
    Ok(if healthy {
        ExitCode::Success
    } else {
        ExitCode::Failure
    })
}

async fn tools(
    ctx: &Context,
    server: Option<String>,
    as_json: bool,
) -> Result<ExitCode, ClientError> {
    let session =
        client::rmcp_session(&ctx.socket, Some(&ctx.starter()), server, "coogle-cli").await?;
    let tools = session
        .list_all_tools()
        .await
        .map_err(|e| ClientError::Mcp(e.to_string()))?;
    let _ = session.cancel().await;
    if as_json {
        output::json(&serde_json::to_value(&tools).unwrap_or(Value::Null));
    } else {
        let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
        let mut text = String::new();
        for t in &tools {
            let desc = t
                .description
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                .unwrap_or("")
                .trim();
            text.push_str(&format!("{:width$}  {desc}\n", t.name));
        }
        let n = tools.len();
        text.push_str(&format!("{n} tool{}", if n == 1 { "" } else { "s" }));
        output::out(&text);
    }
    Ok(ExitCode::Success)
}

fn parse_arguments(arguments: Option<&str>) -> Result<serde_json::Map<String, Value>, String> {
    let text = match arguments {
        None => return Ok(serde_json::Map::new()),
        Some("-") => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| format!("could not read the arguments from stdin: {e}"))?;
            s
        }
        Some(s) => s.to_string(),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("the arguments must be a JSON object, like '{\"query\":\"x\"}'".into()),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

async fn call(
    ctx: &Context,
    server: Option<String>,
    tool: &str,
    arguments: Option<&str>,
    as_json: bool,
) -> Result<ExitCode, ClientError> {
    let args = match parse_arguments(arguments) {
        Ok(a) => a,
        Err(e) => {
            output::error_text(&e, None);
            return Ok(ExitCode::Usage);
        }
    };
    let session =
        client::rmcp_session(&ctx.socket, Some(&ctx.starter()), server, "coogle-cli").await?;
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
    let result = session.call_tool(params).await;
    let _ = session.cancel().await;
    let result = result.map_err(|e| ClientError::Mcp(e.to_string()))?;
    let is_error = result.is_error == Some(true);
    if as_json {
        output::json(&serde_json::to_value(&result).unwrap_or(Value::Null));
    } else {
        let mut text = String::new();
        for c in &result.content {
            match c {
                ContentBlock::Text(t) => text.push_str(&t.text),
                other => text
                    .push_str(&serde_json::to_string(other).unwrap_or_else(|_| "<content>".into())),
            }
            text.push('\n');
        }
        if result.content.is_empty()
            && let Some(s) = &result.structured_content
        {
            text.push_str(&serde_json::to_string_pretty(s).unwrap_or_default());
        }
        output::out(text.trim_end_matches('\n'));
    }
    Ok(if is_error {
        ExitCode::Failure
    } else {
        ExitCode::Success
    })
}

async fn restart(ctx: &Context, server: Option<String>) -> Result<ExitCode, ClientError> {
    let params = match server {
        Some(s) => json!({"server": s}),
        None => json!({}),
    };
    let r = client::control(&ctx.socket, "restart_child", params).await?;
    output::out(&format!(
        "restarted {} (pid {})",
        r["server"].as_str().unwrap_or("upstream"),
        r["pid"]
    ));
    Ok(ExitCode::Success)
}

async fn stop(ctx: &Context) -> Result<ExitCode, ClientError> {
    let r = client::control(&ctx.socket, "shutdown", Value::Null).await?;
    // Wait for the socket to go away so `coogle stop && coogle serve` works.
    for _ in 0..200 {
        if !ctx.socket.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    output::out(&format!("stopped the coogle daemon (pid {})", r["pid"]));
    Ok(ExitCode::Success)
}

/// Print the last `n` lines of the log; with `follow`, keep printing as it grows (and across
/// rotation).
async fn logs(path: &Path, n: usize, follow: bool) -> ExitCode {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            output::error_text(
                &format!("could not open the log {}: {e}", path.display()),
                Some("the daemon writes it once it has run (`coogle serve`)"),
            );
            return ExitCode::Usage;
        }
    };
    let mut reader = std::io::BufReader::new(file);
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap_or(0) > 0 {
        if tail.len() == n {
            tail.pop_front();
        }
        tail.push_back(std::mem::take(&mut line));
    }
    let text: String = tail.into_iter().collect();
    if !text.is_empty() {
        output::out(text.trim_end_matches('\n'));
    }
    if !follow {
        return ExitCode::Success;
    }
    use std::os::unix::fs::MetadataExt;
    let inode = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    let mut current = inode(path);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = inode(path);
        if now.is_some() && now != current {
            // Rotated: read what is left of the old file, then start on the new one.
            let mut rest = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                rest.push_str(&line);
                line.clear();
            }
            if !rest.is_empty() {
                output::out(rest.trim_end_matches('\n'));
            }
            match std::fs::File::open(path) {
                Ok(f) => {
                    reader = std::io::BufReader::new(f);
                    current = now;
                }
                Err(_) => continue,
            }
        }
        let mut chunk = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            chunk.push_str(&line);
            line.clear();
        }
        if !chunk.is_empty() {
            output::out(chunk.trim_end_matches('\n'));
        }
    }
}

/// The version string with the git revision, when the build knew it.
pub fn version() -> &'static str {
    wire::VERSION
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    /// The shim's fast path takes only what clap would parse the same way; everything else is
    /// left to clap.
    #[test]
    fn fast_mcp_agrees_with_clap() {
        let no_env = |_: &str| None;
        let taken = [
            "mcp",
            "mcp --server search",
            "mcp --server=search",
            "--config /c.json mcp",
            "mcp --config /c.json --socket /s.sock",
            "--socket=/s.sock mcp --server google --config=/c.json",
        ];
        let real_env = std::env::var_os("COOGLE_CONFIG").is_some()
            || std::env::var_os("COOGLE_SOCKET").is_some();
        for line in taken {
            let fast = fast_mcp(&argv(line), &no_env).unwrap_or_else(|| panic!("{line} not taken"));
            if !real_env {
                let mut full = vec![OsString::from("coogle")];
                full.extend(argv(line));
                let clap = Cli::try_parse_from(full).unwrap();
                assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{line}");
            }
        }
        for line in [
            "",
            "mcp --help",
            "mcp -h",
            "--version",
            "status",
            "mcp extra",
            "--server x mcp",
            "mcp --server",
            "mcp --server --config",
            "mcp --config=",
            "mcp --config a --config b",
            "mcp mcp",
            "mcp --unknown",
        ] {
            assert!(
                fast_mcp(&argv(line), &no_env).is_none(),
                "{line:?} was taken"
            );
        }
        // The variables, like clap's `env`; an empty one goes to clap.
        let env = |k: &str| (k == "COOGLE_SOCKET").then(|| OsString::from("/env.sock"));
        let cli = fast_mcp(&argv("mcp"), &env).unwrap();
        assert_eq!(cli.socket.as_deref(), Some(Path::new("/env.sock")));
        let cli = fast_mcp(&argv("mcp --socket /flag.sock"), &env).unwrap();
        assert_eq!(cli.socket.as_deref(), Some(Path::new("/flag.sock")));
        let empty = |k: &str| (k == "COOGLE_CONFIG").then(OsString::new);
        assert!(fast_mcp(&argv("mcp"), &empty).is_none());
    }
}
