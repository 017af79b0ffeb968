//! The per-user service that keeps `coogle serve` running: a systemd user unit on Linux, a
//! LaunchAgent on macOS. Both texts are generated for this machine (absolute, stable paths) on
//! every OS, so `generate-unit` and `generate-plist` work anywhere; installing and loading go
//! through a [`Manager`], which tests build for macOS on Linux with a stand-in `launchctl`. A
//! service manager that is not available is reported, never fatal.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use crate::fsutil::{self, FsError, Mode, Written};
use crate::service_manager::{LABEL, Manager, ManagerState};

/// Seconds launchd waits before starting a daemon that exited again (launchd's default is 10;
/// the daemon is cheap to start and a crash should cost an agent little), and systemd's
/// `RestartSec`.
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
    /// Where the daemon logs ([`crate::paths::log_dir`]): launchd's own log of it goes there
    /// too.
    pub log_dir: PathBuf,
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

impl ServiceSpec {
    /// Where launchd sends the daemon's own stdout and stderr (the daemon logs to its log
    /// file; this catches what happens before it can).
    pub fn launchd_log(&self) -> PathBuf {
        self.log_dir.join("launchd.log")
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

/// The LaunchAgent, built with the plist crate; the keys as `man launchd.plist` defines them.
pub fn plist_value(spec: &ServiceSpec) -> plist::Value {
    use plist::{Dictionary, Value};
    let log = spec.launchd_log().to_string_lossy().into_owned();
    // Restart after a crash, not after a clean exit: a second daemon exits 0 with "already
    // running", and `coogle stop` exits 0; restarting either would loop or undo the stop.
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
    // Background: the daemon sits idle between calls and should never compete with the
    // user's apps; its work is waiting on network APIs, which the throttling does not slow.
    // (Adaptive would only differ for XPC traffic, which coogle has none of.)
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

/// Write the service file and start it, with this machine's manager.
pub fn install(spec: &ServiceSpec) -> Result<Installed, FsError> {
    install_with(spec, &Manager::current())
}

/// Write `manager`'s service file and load it. A missing service manager is reported in
/// [`Installed::manager`]; only failing to write the file is an error.
pub fn install_with(spec: &ServiceSpec, manager: &Manager) -> Result<Installed, FsError> {
    let path = manager.installed_path().to_path_buf();
    let bytes = match manager {
        Manager::Launchd(_) => {
            // launchd opens StandardOutPath itself and does not create its directory; a job
            // whose log cannot be opened is not started.
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&spec.log_dir);
            plist_xml(spec)
        }
        Manager::Systemd(_) => unit(spec).into_bytes(),
    };
    let written = fsutil::write_file(&path, &bytes, Mode::KeepOr(0o644))?;
    let manager = manager.load(written != Written::Unchanged);
    Ok(Installed {
        path,
        written,
        manager,
    })
}

/// Stop and remove the service. Returns the removed file, if there was one, and what the
/// manager said.
pub fn uninstall() -> Result<(Option<PathBuf>, ManagerState), FsError> {
    uninstall_with(&Manager::current())
}

pub fn uninstall_with(manager: &Manager) -> Result<(Option<PathBuf>, ManagerState), FsError> {
    let path = manager.installed_path().to_path_buf();
    if !path.exists() {
        return Ok((
            None,
            ManagerState::Unavailable("no service installed".into()),
        ));
    }
    let state = manager.unload();
    fsutil::remove_optional(&path)?;
    if state == ManagerState::Started {
        manager.forget();
    }
    Ok((Some(path), state))
}

/// The program `manager`'s installed service file runs, read back from it.
pub fn installed_program_with(manager: &Manager) -> Option<String> {
    let path = manager.installed_path();
    match manager {
        Manager::Launchd(_) => plist::Value::from_file(path)
            .ok()?
            .as_dictionary()?
            .get("ProgramArguments")?
            .as_array()?
            .first()?
            .as_string()
            .map(str::to_owned),
        Manager::Systemd(_) => {
            let text = std::fs::read_to_string(path).ok()?;
            let exec = text.lines().find_map(|l| l.strip_prefix("ExecStart="))?;
            Some(unquote_first(exec))
        }
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
    use std::path::Path;

    use crate::service_manager::testing::{FakeLaunchctl, LOADED_RUNNING};

    fn spec(exe: &str) -> ServiceSpec {
        ServiceSpec {
            exe: PathBuf::from(exe),
            config: None,
            socket: None,
            path_env: "/usr/bin:/bin".into(),
            log_dir: PathBuf::from("/Users/ada/Library/Logs/coogle"),
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

    /// Parsed back with the plist crate, for Homebrew on Apple silicon and on Intel: every key
    /// launchd reads, with the stable `opt` path (never a Cellar path).
    #[test]
    fn plist_parses_back_for_both_homebrew_prefixes() {
        for (cellar, opt) in [
            (
                "/opt/homebrew/Cellar/coogle/0.3.1/bin/coogle",
                "/opt/homebrew/opt/coogle/bin/coogle",
            ),
            (
                "/usr/local/Cellar/coogle/0.3.1/bin/coogle",
                "/usr/local/opt/coogle/bin/coogle",
            ),
        ] {
            let exe = crate::installed::stable_path_for(Path::new(cellar)).unwrap();
            assert_eq!(exe, Path::new(opt));
            let mut spec = spec(opt);
            spec.socket = Some(PathBuf::from("/tmp/s.sock"));
            spec.path_env = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin".into();
            let v = plist::Value::from_reader_xml(&plist_xml(&spec)[..]).unwrap();
            let d = v.as_dictionary().unwrap();
            assert_eq!(d["Label"].as_string(), Some("dev.coogle.daemon"));
            let args: Vec<&str> = d["ProgramArguments"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(plist::Value::as_string)
                .collect();
            assert_eq!(args, [opt, "serve", "--socket", "/tmp/s.sock"]);
            assert_eq!(d["RunAtLoad"].as_boolean(), Some(true));
            let keep = d["KeepAlive"].as_dictionary().unwrap();
            assert_eq!(keep.len(), 1);
            assert_eq!(keep["SuccessfulExit"].as_boolean(), Some(false));
            assert_eq!(d["ThrottleInterval"].as_signed_integer(), Some(3));
            assert_eq!(d["ProcessType"].as_string(), Some("Background"));
            let log = "/Users/ada/Library/Logs/coogle/launchd.log";
            assert_eq!(d["StandardOutPath"].as_string(), Some(log));
            assert_eq!(d["StandardErrorPath"].as_string(), Some(log));
            let env = d["EnvironmentVariables"].as_dictionary().unwrap();
            assert_eq!(env["PATH"].as_string(), Some(spec.path_env.as_str()));
            assert_eq!(d.len(), 9, "no key launchd would not expect: {d:?}");
        }
    }

    /// An older plist (a versioned Cellar path, `KeepAlive` true, no `ProcessType`) is loaded:
    /// setup backs it up, writes the new one and has launchd re-read it (bootout, bootstrap);
    /// the log directory launchd writes into exists first.
    #[test]
    fn upgrade_from_an_older_plist() {
        let f = FakeLaunchctl::new(LOADED_RUNNING);
        let manager = Manager::Launchd(f.launchd.clone());
        let old = br#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
<key>Label</key><string>dev.coogle.daemon</string>
<key>ProgramArguments</key><array><string>/opt/homebrew/Cellar/coogle/0.0.9/bin/coogle</string><string>serve</string></array>
<key>KeepAlive</key><true/>
</dict></plist>
"#;
        std::fs::create_dir_all(f.launchd.plist.parent().unwrap()).unwrap();
        std::fs::write(&f.launchd.plist, old).unwrap();
        assert_eq!(
            installed_program_with(&manager).as_deref(),
            Some("/opt/homebrew/Cellar/coogle/0.0.9/bin/coogle")
        );
        let mut spec = spec("/opt/homebrew/opt/coogle/bin/coogle");
        spec.log_dir = f.dir.path().join("Logs/coogle");
        let inst = install_with(&spec, &manager).unwrap();
        assert_eq!(inst.manager, ManagerState::Started);
        let Written::Replaced { backup } = &inst.written else {
            panic!("{:?}", inst.written);
        };
        assert_eq!(std::fs::read(backup).unwrap(), old);
        assert_eq!(
            installed_program_with(&manager).as_deref(),
            Some("/opt/homebrew/opt/coogle/bin/coogle")
        );
        assert!(spec.log_dir.is_dir());
        let calls = f.calls();
        let plist = f.launchd.plist.display().to_string();
        let at = |c: &str| calls.iter().position(|x| x == c);
        let bootout = at("bootout gui/501/dev.coogle.daemon").expect("bootout");
        let bootstrap = at(&format!("bootstrap gui/501 {plist}")).expect("bootstrap");
        assert!(bootout < bootstrap, "{calls:?}");

        // Run again: nothing changed, nothing reloaded.
        let again = install_with(&spec, &manager).unwrap();
        assert_eq!(again.written, Written::Unchanged);
        assert_eq!(f.calls().len(), calls.len() + 3, "{:?}", f.calls());

        // Uninstall: booted out, file gone.
        let (removed, state) = uninstall_with(&manager).unwrap();
        assert_eq!(removed.as_deref(), Some(f.launchd.plist.as_path()));
        assert_eq!(state, ManagerState::Started);
        assert!(!f.launchd.plist.exists());
        assert_eq!(
            f.calls().last().map(String::as_str),
            Some("bootout gui/501/dev.coogle.daemon")
        );
    }

    /// Without a GUI session (SSH) the plist is still written, for launchd to load at the next
    /// desktop login, and the answer is "unavailable", which setup reports and goes past.
    #[test]
    fn without_a_gui_session_the_plist_is_written_anyway() {
        let f =
            FakeLaunchctl::new("'print gui/501') echo 'Could not find domain' >&2; exit 113 ;;");
        let manager = Manager::Launchd(f.launchd.clone());
        let mut spec = spec("/usr/local/opt/coogle/bin/coogle");
        spec.log_dir = f.dir.path().join("Logs/coogle");
        let inst = install_with(&spec, &manager).unwrap();
        assert_eq!(inst.written, Written::Created);
        assert!(matches!(inst.manager, ManagerState::Unavailable(_)));
        assert!(f.launchd.plist.exists());
    }
}
