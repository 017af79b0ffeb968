//! Setup's throwaway daemon: `coogle serve` with the new config on a temporary socket, asked
//! for `status` and `list_tools`, then stopped. Its log, its cache and its socket live in a
//! private temporary directory that is removed afterwards, so nothing persistent (the real
//! daemon's socket, log or upstream cache) is touched.
//!

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::ui::Ui;
use crate::client::{self, ClientError};
use crate::fsutil::PrivateDir;
use crate::process::wait_or_kill;
use crate::wire::Target;

/// How long the test daemon may take to list its tools (a cold `uvx` download is slow).
pub(super) const TEST_TIMEOUT: Duration = Duration::from_secs(90);

/// What the test daemon showed.
pub(super) struct TestReport {
    /// Tools listed per upstream, in config order.
    pub tools: Vec<(String, usize)>,
    /// Each upstream's state at the end.
    pub upstreams: Vec<(String, String)>,
}

/// Why the test daemon did not work, with the end of its log when it wrote one. The message is
/// whole on its own (it is shown in a ✗ line too), so causes are part of it.
#[derive(Debug, thiserror::Error)]
#[error("{cause}{}", log_tail(tail))]
pub(super) struct TestDaemonError {
    cause: Cause,
    tail: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
enum Cause {
    #[error("could not create {}: {error}", path.display())]
    Create {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("could not start {}: {error}", exe.display())]
    Start { exe: PathBuf, error: std::io::Error },
    #[error("could not start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the daemon exited ({0})")]
    Exited(std::process::ExitStatus),
    #[error("no socket within {} s", TEST_TIMEOUT.as_secs())]
    NoSocket,
    #[error("status: {}", crate::causes::one_line(.0))]
    Status(ClientError),
    #[error("list_tools ({name}): {}", crate::causes::one_line(error))]
    ListTools { name: String, error: ClientError },
}

fn log_tail(tail: &[String]) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its log ended with:\n      {}", tail.join("\n      "))
    }
}

/// Start the daemon, wait for it (with a spinner), check it, stop it, clean up.
pub(super) fn run(ui: &Ui, cfg_path: &Path) -> Result<TestReport, TestDaemonError> {
    let bare = |cause| TestDaemonError {
        cause,
        tail: Vec::new(),
    };
    // In /tmp, not $TMPDIR: a socket path must stay short (macOS's $TMPDIR is long).
    let path = PathBuf::from(format!(
        "/tmp/coogle-setup-{}-{}",
        crate::os::uid(),
        std::process::id()
    ));
    // Removed when this returns, after the log's tail is read.
    let scratch =
        PrivateDir::create(path.clone()).map_err(|error| bare(Cause::Create { path, error }))?;
    let dir = &scratch.path;
    let socket = dir.join("run").join("coogle.sock");
    let log = dir.join("serve.log");
    let mut child = spawn(cfg_path, dir, &socket, &log).map_err(bare)?;
    let spinner = ui.spinner("starting a test daemon");
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Cause::Runtime)
        .and_then(|rt| rt.block_on(probe(&socket, &mut child, &spinner)));
    spinner.finish_and_clear();
    stop(&mut child);
    result.map_err(|cause| TestDaemonError {
        cause,
        tail: last_lines(&log, 8),
    })
}

/// A socket directory in `dir`, and the daemon started with its state and cache there too, or
/// it would write the real daemon's.
fn spawn(cfg_path: &Path, dir: &Path, socket: &Path, log: &Path) -> Result<Child, Cause> {
    fn create(path: &Path) -> impl FnOnce(std::io::Error) -> Cause + '_ {
        move |error| Cause::Create {
            path: path.to_path_buf(),
            error,
        }
    }
    let run_dir = dir.join("run");
    std::fs::create_dir(&run_dir).map_err(create(&run_dir))?;
    let log_file = std::fs::File::create(log).map_err(create(log))?;
    let log_err = log_file.try_clone().map_err(create(log))?;
    let exe = std::env::current_exe().map_err(|error| Cause::Start {
        exe: PathBuf::from("coogle"),
        error,
    })?;
    std::process::Command::new(&exe)
        .arg("serve")
        .arg("--config")
        .arg(cfg_path)
        .arg("--socket")
        .arg(socket)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("CLAUDE_CODE_SESSION_ID")
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .spawn()
        .map_err(|error| Cause::Start { exe, error })
}

/// Wait for the socket, then list each upstream's tools and read the states.
async fn probe(
    socket: &Path,
    child: &mut Child,
    spinner: &ProgressBar,
) -> Result<TestReport, Cause> {
    let deadline = Instant::now() + TEST_TIMEOUT;
    loop {
        if socket.exists() && client::ping(socket).await.is_ok() {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Cause::Exited(status));
        }
        if Instant::now() > deadline {
            return Err(Cause::NoSocket);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    spinner.set_message("listing tools");
    let status = client::status(socket).await.map_err(Cause::Status)?;
    let names: Vec<String> = status.upstreams.iter().map(|u| u.name.clone()).collect();
    let mut tools = Vec::new();
    for name in &names {
        tools.push((name.clone(), count_tools(socket, name, deadline).await?));
    }
    let status = client::status(socket).await.unwrap_or(status);
    let upstreams = status
        .upstreams
        .iter()
        .map(|u| (u.name.clone(), u.state.as_str().to_owned()))
        .collect();
    let _ = client::ask_shutdown(socket).await;
    Ok(TestReport { tools, upstreams })
}

/// `list_tools` for one upstream, retried until it answers or `deadline`.
async fn count_tools(socket: &Path, name: &str, deadline: Instant) -> Result<usize, Cause> {
    let listed = loop {
        match client::list_tools(socket, Target::server(Some(name))).await {
            Ok(v) => break v,
            Err(error) if Instant::now() > deadline => {
                return Err(Cause::ListTools {
                    name: name.to_owned(),
                    error,
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    Ok(listed.tools.len())
}

/// On every path, success or not, ask it to stop (SIGTERM stops its upstream's process group
/// too; a SIGKILL alone would orphan it where there is no PDEATHSIG, as on macOS).
fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = crate::os::signal(child.id(), libc::SIGTERM);
    }
    wait_or_kill(child, Duration::from_secs(10));
}

/// The last `n` lines of a file, oldest first.
fn last_lines(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut tail: Vec<String> = text.lines().rev().take(n).map(str::to_owned).collect();
    tail.reverse();
    tail
}
