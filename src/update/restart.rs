//! After a swap, a daemon that was running is upgraded so the new version serves: in place
//! first (`restart --daemon`: it becomes the new binary in its own process, every child and
//! session kept), else through the service manager when a service runs it, else stopped
//! (in-flight calls finish within its grace period) and the new binary started detached.
//! Nothing here fails the update: the binary is already replaced, so problems are warnings.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::config::GlobalPaths;
use crate::output;
use crate::{client, paths};

/// How long an update waits for the daemon to become the new binary in place (it does once no
/// call is in flight).
const IN_PLACE_WAIT: Duration = Duration::from_secs(60);

/// Restart a running daemon so the new version serves: through the service manager when a
/// service is installed, else stop it (in-flight calls finish within the grace period) and
/// start the new binary detached.
pub(super) fn restart_daemon(global: &GlobalPaths, exe: &Path) {
    let socket = global.socket_loading_config();
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let running = rt.block_on(client::info(&socket)).ok();
    let Some(info) = running else {
        output::out("no daemon was running; the next `coogle mcp` starts the new version");
        return;
    };
    let old_pid = info.pid;
    // In place only when the daemon runs the file just replaced (not another install of
    // coogle, which would only restart as it is).
    let same_file = |a: &Path, b: &Path| matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y);
    let runs_exe = info.exe.as_deref().is_some_and(|d| same_file(d, exe));
    let in_place = if runs_exe {
        rt.block_on(client::restart_daemon_in_place(
            &socket,
            IN_PLACE_WAIT,
            |_| {},
        ))
    } else {
        Err(client::ClientError::HandOverFailed(format!(
            "it runs {}, not the file updated",
            info.exe
                .as_deref()
                .map_or_else(|| "another binary".into(), |p| p.display().to_string())
        )))
    };
    match in_place {
        Ok(Some(done)) => {
            output::out(&done.summary());
            return;
        }
        Ok(None) => {
            output::out("no daemon was running; the next `coogle mcp` starts the new version");
            return;
        }
        Err(e) => output::warn(&format!(
            "the daemon could not take the new version in place ({}); restarting it, its servers with it",
            crate::causes::one_line(&e)
        )),
    }
    if let Some(how) = crate::service_manager::Manager::current().restart_installed() {
        match how {
            Ok(what) => {
                output::out(&format!("restarted the daemon through {what}"));
                return;
            }
            Err(e) => output::warn(&format!(
                "the service manager could not restart it ({e}); restarting it directly"
            )),
        }
    }
    replace_directly(&rt, global, &socket, exe, old_pid);
}

/// Stop the old daemon, wait for it to go, start `exe` detached and wait for it to answer.
fn replace_directly(
    rt: &tokio::runtime::Runtime,
    global: &GlobalPaths,
    socket: &Path,
    exe: &Path,
    old_pid: u32,
) {
    // Its process must be gone, not just its socket: a daemon still draining calls holds the
    // lock, and the new one would exit "already running".
    if let Err(e @ client::ClientError::StopTimeout { .. }) =
        rt.block_on(client::shutdown(socket, Duration::from_secs(35)))
    {
        output::warn(&format!(
            "{e}; once it exits, the next `coogle mcp` starts the new version"
        ));
        return;
    }
    // The old daemon removes its socket first and lets go of its lock only once its children
    // are stopped; a new daemon started before that exits at once with "already running".
    // (Its process has exited by now, so this is a formality, bounded all the same.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !lock_free(socket) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let starter = client::Starter {
        exe: exe.to_path_buf(),
        config: global.config.clone(),
        socket: socket.to_path_buf(),
        log_file: paths::log_file(),
    };
    match starter.spawn() {
        Ok(_started) => {
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(i) = rt.block_on(client::info(socket))
                    && i.pid != old_pid
                {
                    output::out(&format!(
                        "restarted the daemon (pid {old_pid} → {}) on {}",
                        i.pid,
                        socket.display()
                    ));
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            output::warn(
                "the new daemon did not answer yet; `coogle status` shows it when it does",
            );
        }
        Err(e) => output::warn(&format!(
            "{}; the next `coogle mcp` starts it",
            crate::causes::one_line(&e)
        )),
    }
}

/// True when no daemon holds the single-instance lock beside `socket` (or there is none).
fn lock_free(socket: &Path) -> bool {
    let lock = paths::RuntimePaths::for_socket(socket).lock;
    let Ok(file) = std::fs::File::open(&lock) else {
        return true;
    };
    // A lock we get is released when `file` closes.
    matches!(crate::os::try_lock(&file), Ok(true))
}
