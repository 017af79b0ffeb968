//! What the service and the client entries run: this binary's stable path (Homebrew's `opt`
//! link, never a Cellar path), with the `--config`/`--socket` that reach this invocation's
//! daemon, and a PATH under which the daemon finds `uvx` and `npx`. Also `generate-plist` and
//! `generate-unit`, which print exactly what setup would install.

use super::client_config::{Shim, Upstream};
use super::service;
use crate::config::{Config, GlobalPaths};
use crate::exec_path;
use crate::installed::stable_exe;
use crate::output::{self, ExitCode};
use crate::paths::Platform;

/// `coogle generate-plist`: the LaunchAgent setup would install, on stdout.
pub fn generate_plist(paths: &GlobalPaths) -> ExitCode {
    let xml = service::plist_xml(&service_spec(paths));
    output::out(&String::from_utf8_lossy(&xml));
    ExitCode::Success
}

/// `coogle generate-unit`: the systemd user unit setup would install, on stdout.
pub fn generate_unit(paths: &GlobalPaths) -> ExitCode {
    output::out(&service::unit(&service_spec(paths)));
    ExitCode::Success
}

/// PATH for the service: the daemon's search path ([`exec_path::daemon_path`]) as a service
/// started with config.json's recorded `path` and this shell's PATH would compute it, so the
/// unit or plist says what the daemon will use anyway.
fn service_path_env(paths: &GlobalPaths) -> String {
    let recorded = Config::load(paths.config.as_deref())
        .map(|c| c.search_path)
        .unwrap_or_default();
    exec_path::daemon_path(
        &recorded,
        std::env::var_os("PATH").as_deref(),
        &Platform::current(),
    )
    .to_string_lossy()
    .into_owned()
}

pub(super) fn service_spec(paths: &GlobalPaths) -> service::ServiceSpec {
    let (config, socket) = paths.non_default();
    service::ServiceSpec {
        exe: stable_exe().path,
        config,
        socket,
        path_env: service_path_env(paths),
        log_dir: crate::paths::log_dir(),
    }
}

/// The client entry for `upstream`: this binary's stable path, `mcp`, and the options that
/// lead it to this invocation's config and socket.
pub(super) fn shim_for(paths: &GlobalPaths, upstream: Upstream) -> Shim {
    let (config, socket) = paths.non_default();
    let mut shim = Shim::new(upstream, &stable_exe().path);
    for (flag, value) in [("--config", config), ("--socket", socket)] {
        if let Some(v) = value {
            shim.options.push(flag.to_owned());
            shim.options.push(v.to_string_lossy().into_owned());
        }
    }
    shim
}
