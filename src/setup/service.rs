//! The per-user service that keeps `coogle serve` running: a systemd user unit on Linux, a
//! LaunchAgent on macOS. Both texts are generated for this machine (absolute, stable paths) on
//! every OS, so `generate-unit` and `generate-plist` work anywhere; only installing and loading
//! is platform-specific (through [`crate::service_manager`]). A service manager that is not
//! available is reported, never fatal.

use std::path::{Path, PathBuf};

use crate::fsutil::{self, FsError, Mode, Written};
use crate::paths;
use crate::service_manager::{
    LABEL, ManagerState, UNIT_NAME, installed_path, plist_path, systemctl_user, systemd_available,
    unit_path,
};

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

/// Where launchd sends the daemon's own stdout and stderr (the daemon logs to its log file;
/// this catches what happens before it can).
pub fn launchd_log() -> PathBuf {
    paths::log_dir().join("launchd.log")
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

/// The outcome of installing the service.
#[derive(Debug, Clone)]
pub struct Installed {
    pub path: PathBuf,
    pub written: Written,
    pub manager: ManagerState,
}

/// Write the service file and start it. A missing service manager is reported in
/// [`Installed::manager`]; only failing to write the file is an error.
pub fn install(spec: &ServiceSpec) -> Result<Installed, FsError> {
    let (path, bytes) = if cfg!(target_os = "macos") {
        (plist_path(), plist_xml(spec))
    } else {
        (unit_path(), unit(spec).into_bytes())
    };
    let written = fsutil::write_file(&path, &bytes, Mode::KeepOr(0o644))?;
    let changed = written != Written::Unchanged;
    let manager = if cfg!(target_os = "macos") {
        launchd_load(&path, changed)
    } else {
        systemd_enable(changed)
    };
    Ok(Installed {
        path,
        written,
        manager,
    })
}

fn systemd_enable(changed: bool) -> ManagerState {
    if let Err(why) = systemd_available() {
        return ManagerState::Unavailable(why.to_string());
    }
    let enabled = systemctl_user(&["daemon-reload"])
        .and_then(|_| systemctl_user(&["enable", "--now", UNIT_NAME]));
    match enabled {
        // A changed unit must run the new binary/arguments.
        Ok(_) if changed => systemctl_user(&["try-restart", UNIT_NAME]).into(),
        other => other.into(),
    }
}

#[cfg(target_os = "macos")]
fn launchd_load(path: &Path, changed: bool) -> ManagerState {
    let domain = format!("gui/{}", paths::uid());
    use crate::service_manager::{launchctl, launchd_target};
    let target = launchd_target();
    let loaded = launchctl(&["print", &target]).is_ok();
    if loaded && !changed {
        return ManagerState::Started;
    }
    if loaded {
        let _ = launchctl(&["bootout", &target]);
    }
    launchctl(&["bootstrap", &domain, &path.to_string_lossy()]).into()
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
            Err(why) => ManagerState::Unavailable(why.to_string()),
            Ok(()) => systemctl_user(&["disable", "--now", UNIT_NAME]).into(),
        }
    };
    fsutil::remove_optional(&path)?;
    if !cfg!(target_os = "macos") && manager == ManagerState::Started {
        let _ = systemctl_user(&["daemon-reload"]);
    }
    Ok((Some(path), manager))
}

#[cfg(target_os = "macos")]
fn launchd_unload() -> ManagerState {
    use crate::service_manager::{launchctl, launchd_target};
    launchctl(&["bootout", &launchd_target()]).into()
}

#[cfg(not(target_os = "macos"))]
fn launchd_unload() -> ManagerState {
    ManagerState::Unavailable("launchd exists only on macOS".into())
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
