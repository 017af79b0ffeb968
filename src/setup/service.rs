//! The per-user service that keeps `coogle serve` running: a systemd user unit on Linux, a
//! LaunchAgent on macOS. Both texts are generated for this machine (absolute, stable paths) on
//! every OS, so `generate-unit` and `generate-plist` work anywhere; only installing and loading
//! is platform-specific. A service manager that is not available is reported, never fatal.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::fsutil::{self, FsError, Mode, Written};
use crate::paths;

/// The launchd label and the systemd unit name.
pub const LABEL: &str = "dev.coogle.daemon";
pub const UNIT_NAME: &str = "coogle.service";
/// Seconds launchd waits before starting a daemon that exited again.
pub const THROTTLE_INTERVAL: u64 = 3;

/// What the service runs.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// The stable path of the coogle binary.
    pub exe: PathBuf,
    /// `--config`, when not the default.
    pub config: Option<PathBuf>,
    /// `--socket`, when not the default.
    pub socket: Option<PathBuf>,
    /// PATH for the daemon, so it finds `uvx` and `npx` as the user's shell does.
    pub path_env: String,
}

impl ServiceSpec {
    pub fn program_arguments(&self) -> Vec<String> {
        let mut args = vec![self.exe.to_string_lossy().into_owned(), "serve".to_owned()];
        if let Some(c) = &self.config {
            args.push("--config".into());
            args.push(c.to_string_lossy().into_owned());
        }
        if let Some(s) = &self.socket {
            args.push("--socket".into());
            args.push(s.to_string_lossy().into_owned());
        }
        args
    }
}

/// `$XDG_CONFIG_HOME/systemd/user/coogle.service` (default `~/.config/systemd/user`).
pub fn unit_path() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| paths::home().join(".config"))
        .join("systemd/user")
        .join(UNIT_NAME)
}

/// `~/Library/LaunchAgents/dev.coogle.daemon.plist`.
pub fn plist_path() -> PathBuf {
    paths::home()
        .join("Library/LaunchAgents")
        .join(format!("{LABEL}.plist"))
}

/// Where launchd sends the daemon's own stdout and stderr (the daemon logs to its log file;
/// this catches what happens before it can).
pub fn launchd_log() -> PathBuf {
    paths::log_dir().join("launchd.log")
}

/// The service file this OS uses.
pub fn installed_path() -> PathBuf {
    if cfg!(target_os = "macos") {
        plist_path()
    } else {
        unit_path()
    }
}

/// Quote a word for a systemd command line when it needs it.
fn systemd_quote(word: &str) -> String {
    if !word.is_empty()
        && !word
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '$' | '%' | ';'))
    {
        return word.to_owned();
    }
    let escaped = word
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%")
        .replace('$', "$$");
    format!("\"{escaped}\"")
}

/// The systemd user unit.
pub fn unit(spec: &ServiceSpec) -> String {
    let exec: Vec<String> = spec
        .program_arguments()
        .iter()
        .map(|a| systemd_quote(a))
        .collect();
    format!(
        "# Written by `coogle setup`; `coogle uninstall` removes it.\n\
         [Unit]\n\
         Description=coogle: one shared MCP server daemon for every AI-agent session\n\
         Documentation=https://github.com/coogle-dev/coogle\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Restart=on-failure\n\
         RestartSec={THROTTLE_INTERVAL}\n\
         Environment={}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" "),
        systemd_quote(&format!("PATH={}", spec.path_env)),
    )
}

/// The LaunchAgent, built with the plist crate.
pub fn plist_value(spec: &ServiceSpec) -> plist::Value {
    use plist::{Dictionary, Value};
    let log = launchd_log().to_string_lossy().into_owned();
    let mut keep_alive = Dictionary::new();
    keep_alive.insert("SuccessfulExit".into(), Value::Boolean(false));
    let mut env = Dictionary::new();
    env.insert("PATH".into(), Value::String(spec.path_env.clone()));
    let mut d = Dictionary::new();
    d.insert("Label".into(), Value::String(LABEL.into()));
    d.insert(
        "ProgramArguments".into(),
        Value::Array(
            spec.program_arguments()
                .into_iter()
                .map(Value::String)
                .collect(),
        ),
    );
    d.insert("RunAtLoad".into(), Value::Boolean(true));
    d.insert("KeepAlive".into(), Value::Dictionary(keep_alive));
    d.insert(
        "ThrottleInterval".into(),
        Value::Integer(THROTTLE_INTERVAL.into()),
    );
    d.insert("ProcessType".into(), Value::String("Background".into()));
    d.insert("StandardOutPath".into(), Value::String(log.clone()));
    d.insert("StandardErrorPath".into(), Value::String(log));
    d.insert("EnvironmentVariables".into(), Value::Dictionary(env));
    Value::Dictionary(d)
}

pub fn plist_xml(spec: &ServiceSpec) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail for a value built from strings, booleans and integers.
    let _ = plist_value(spec).to_writer_xml(&mut out);
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out
}

/// The service manager's answer, for the user.
#[derive(Debug, Clone, PartialEq)]
pub enum ManagerState {
    /// Enabled and started (or reloaded).
    Started,
    /// No usable service manager: the file is written, nothing is running from it.
    Unavailable(String),
    /// The manager answered with an error.
    Failed(String),
}

/// The outcome of installing the service.
#[derive(Debug, Clone)]
pub struct Installed {
    pub path: PathBuf,
    pub written: Written,
    pub manager: ManagerState,
}

/// systemctl, or what `COOGLE_SYSTEMCTL` names (tests point it at a stand-in).
fn systemctl() -> PathBuf {
    std::env::var_os("COOGLE_SYSTEMCTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("systemctl"))
}

/// Wait up to `limit` for `child` to exit; past it, kill and reap it and return `None`.
pub fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// Run a service-manager command with a time limit; `Err` carries what it said.
pub fn run_bounded(program: &Path, args: &[&str], limit: Duration) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", program.display()))?;
    if wait_or_kill(&mut child, limit).is_none() {
        return Err(format!(
            "{} {} did not finish within {} s",
            program.display(),
            args.join(" "),
            limit.as_secs()
        ));
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("could not run {}: {e}", program.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .trim()
    .to_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(if text.is_empty() {
            format!(
                "{} {} failed ({})",
                program.display(),
                args.join(" "),
                out.status
            )
        } else {
            text
        })
    }
}

const MANAGER_LIMIT: Duration = Duration::from_secs(20);

/// Is a systemd user manager there to talk to?
pub fn systemd_available() -> Result<(), String> {
    let program = systemctl();
    match run_bounded(&program, &["--user", "show-environment"], MANAGER_LIMIT) {
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Write the service file and start it. A missing service manager is reported in
/// [`Installed::manager`]; only failing to write the file is an error.
pub fn install(spec: &ServiceSpec) -> Result<Installed, FsError> {
    if cfg!(target_os = "macos") {
        let path = plist_path();
        let written = fsutil::write_file(&path, &plist_xml(spec), Mode::KeepOr(0o644))?;
        let manager = launchd_load(&path, written != Written::Unchanged);
        Ok(Installed {
            path,
            written,
            manager,
        })
    } else {
        let path = unit_path();
        let written = fsutil::write_file(&path, unit(spec).as_bytes(), Mode::KeepOr(0o644))?;
        let manager = match systemd_available() {
            Err(why) => ManagerState::Unavailable(why),
            Ok(()) => {
                let program = systemctl();
                let reload = run_bounded(&program, &["--user", "daemon-reload"], MANAGER_LIMIT)
                    .and_then(|_| {
                        run_bounded(
                            &program,
                            &["--user", "enable", "--now", UNIT_NAME],
                            MANAGER_LIMIT,
                        )
                    });
                match reload {
                    Ok(_) if written != Written::Unchanged => {
                        // A changed unit must run the new binary/arguments.
                        match run_bounded(
                            &program,
                            &["--user", "try-restart", UNIT_NAME],
                            MANAGER_LIMIT,
                        ) {
                            Ok(_) => ManagerState::Started,
                            Err(e) => ManagerState::Failed(e),
                        }
                    }
                    Ok(_) => ManagerState::Started,
                    Err(e) => ManagerState::Failed(e),
                }
            }
        };
        Ok(Installed {
            path,
            written,
            manager,
        })
    }
}

#[cfg(target_os = "macos")]
fn launchd_load(path: &Path, changed: bool) -> ManagerState {
    let domain = format!("gui/{}", paths::uid());
    let launchctl = Path::new("/bin/launchctl");
    let target = format!("{domain}/{LABEL}");
    let loaded = run_bounded(launchctl, &["print", &target], MANAGER_LIMIT).is_ok();
    if loaded && !changed {
        return ManagerState::Started;
    }
    if loaded {
        let _ = run_bounded(launchctl, &["bootout", &target], MANAGER_LIMIT);
    }
    let p = path.to_string_lossy();
    match run_bounded(launchctl, &["bootstrap", &domain, &p], MANAGER_LIMIT) {
        Ok(_) => ManagerState::Started,
        Err(e) => ManagerState::Failed(e),
    }
}

#[cfg(not(target_os = "macos"))]
fn launchd_load(_path: &Path, _changed: bool) -> ManagerState {
    ManagerState::Unavailable("launchd exists only on macOS".into())
}

/// Stop and remove the service. Returns the removed file, if there was one, and what the
/// manager said.
pub fn uninstall() -> Result<(Option<PathBuf>, ManagerState), FsError> {
    let path = installed_path();
    if !path.exists() {
        return Ok((
            None,
            ManagerState::Unavailable("no service installed".into()),
        ));
    }
    let manager = if cfg!(target_os = "macos") {
        launchd_unload()
    } else {
        match systemd_available() {
            Err(why) => ManagerState::Unavailable(why),
            Ok(()) => {
                match run_bounded(
                    &systemctl(),
                    &["--user", "disable", "--now", UNIT_NAME],
                    MANAGER_LIMIT,
                ) {
                    Ok(_) => ManagerState::Started,
                    Err(e) => ManagerState::Failed(e),
                }
            }
        }
    };
    fsutil::remove_optional(&path)?;
    if !cfg!(target_os = "macos") && manager == ManagerState::Started {
        let _ = run_bounded(&systemctl(), &["--user", "daemon-reload"], MANAGER_LIMIT);
    }
    Ok((Some(path), manager))
}

#[cfg(target_os = "macos")]
fn launchd_unload() -> ManagerState {
    let target = format!("gui/{}/{LABEL}", paths::uid());
    match run_bounded(
        Path::new("/bin/launchctl"),
        &["bootout", &target],
        MANAGER_LIMIT,
    ) {
        Ok(_) => ManagerState::Started,
        Err(e) => ManagerState::Failed(e),
    }
}

#[cfg(not(target_os = "macos"))]
fn launchd_unload() -> ManagerState {
    ManagerState::Unavailable("launchd exists only on macOS".into())
}

/// Restart the installed and running service (after an update, so the new binary serves).
/// `None` when no service is installed or it is not running under a manager here; otherwise
/// what restarted it, or why that failed.
pub fn restart_installed() -> Option<Result<String, String>> {
    if !installed_path().exists() || is_active() != Some(true) {
        return None;
    }
    if cfg!(target_os = "macos") {
        let target = format!("gui/{}/{LABEL}", paths::uid());
        Some(
            run_bounded(
                Path::new("/bin/launchctl"),
                &["kickstart", "-k", &target],
                MANAGER_LIMIT,
            )
            .map(|_| format!("launchctl kickstart -k {target}")),
        )
    } else {
        Some(
            run_bounded(
                &systemctl(),
                &["--user", "restart", UNIT_NAME],
                MANAGER_LIMIT,
            )
            .map(|_| format!("systemctl --user restart {UNIT_NAME}")),
        )
    }
}

/// Is the service running? `None` when that cannot be known here.
pub fn is_active() -> Option<bool> {
    if cfg!(target_os = "macos") {
        let target = format!("gui/{}/{LABEL}", paths::uid());
        Some(
            run_bounded(
                Path::new("/bin/launchctl"),
                &["print", &target],
                MANAGER_LIMIT,
            )
            .is_ok(),
        )
    } else {
        systemd_available().ok()?;
        Some(
            run_bounded(
                &systemctl(),
                &["--user", "is-active", "--quiet", UNIT_NAME],
                MANAGER_LIMIT,
            )
            .is_ok(),
        )
    }
}

/// The program the installed service file runs, read back from it.
pub fn installed_program() -> Option<String> {
    let path = installed_path();
    if cfg!(target_os = "macos") {
        let v = plist::Value::from_file(&path).ok()?;
        v.as_dictionary()?
            .get("ProgramArguments")?
            .as_array()?
            .first()?
            .as_string()
            .map(str::to_owned)
    } else {
        let text = std::fs::read_to_string(&path).ok()?;
        let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart="))?;
        Some(unquote_first(exec))
    }
}

fn unquote_first(line: &str) -> String {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.extend(chars.next()),
                '"' => break,
                c => out.push(c),
            }
        }
        out.replace("%%", "%").replace("$$", "$")
    } else {
        line.split_whitespace().next().unwrap_or("").to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(exe: &str) -> ServiceSpec {
        ServiceSpec {
            exe: PathBuf::from(exe),
            config: None,
            socket: None,
            path_env: "/usr/bin:/bin".into(),
        }
    }

    #[test]
    fn quoting_round_trips() {
        for exe in [
            "/usr/bin/coogle",
            "/Users/Ada Lovelace/bin/coogle",
            "/a/100%/c\"q",
        ] {
            let text = unit(&spec(exe));
            let exec = text
                .lines()
                .find_map(|l| l.strip_prefix("ExecStart="))
                .unwrap();
            assert_eq!(unquote_first(exec), exe, "{exec}");
        }
    }
}
