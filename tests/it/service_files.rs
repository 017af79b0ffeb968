//! `coogle generate-plist` and `coogle generate-unit`: the LaunchAgent parsed back with the
//! plist crate and checked field by field, and the systemd unit's fields; both on every OS.

use crate::support;

use std::path::PathBuf;

use support::Env;

fn exe() -> PathBuf {
    std::fs::canonicalize(support::COOGLE).unwrap()
}

#[test]
fn plist_parses_back_field_by_field() {
    let env = Env::new();
    let out = env.run(&["generate-plist"]);
    assert_eq!(out.status, Some(0), "{out}");
    let v = plist::Value::from_reader_xml(out.stdout.as_bytes()).expect("valid plist XML");
    let d = v.as_dictionary().expect("a dictionary");
    assert_eq!(d["Label"].as_string(), Some("dev.coogle.daemon"));
    let args: Vec<&str> = d["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_string().unwrap())
        .collect();
    let exe = exe();
    // The test env sets COOGLE_SOCKET to a non-default socket, so the daemon is told about it.
    assert_eq!(
        args,
        [
            exe.to_str().unwrap(),
            "serve",
            "--socket",
            env.socket.to_str().unwrap()
        ]
    );
    assert!(PathBuf::from(args[0]).is_absolute());
    assert_eq!(d["RunAtLoad"].as_boolean(), Some(true));
    let keep = d["KeepAlive"].as_dictionary().unwrap();
    assert_eq!(keep["SuccessfulExit"].as_boolean(), Some(false));
    assert_eq!(keep.len(), 1);
    assert_eq!(d["ThrottleInterval"].as_signed_integer(), Some(3));
    let log = if cfg!(target_os = "macos") {
        env.home.join("Library/Logs/coogle/launchd.log")
    } else {
        env.home.join(".local/state/coogle/launchd.log")
    };
    assert_eq!(d["StandardOutPath"].as_string(), log.to_str());
    assert_eq!(d["StandardErrorPath"].as_string(), log.to_str());
    assert_eq!(d["ProcessType"].as_string(), Some("Background"));
    let path_env = d["EnvironmentVariables"].as_dictionary().unwrap()["PATH"]
        .as_string()
        .unwrap();
    assert!(path_env.contains("/usr/bin"), "{path_env}");
}

#[test]
fn unit_has_the_fields_systemd_needs() {
    let env = Env::new();
    let out = env.run(&["generate-unit"]);
    assert_eq!(out.status, Some(0), "{out}");
    let unit = &out.stdout;
    let field = |section: &str, key: &str| -> Option<String> {
        let mut current = "";
        for line in unit.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                current = line;
            } else if current == section
                && let Some(v) = line.strip_prefix(&format!("{key}="))
            {
                return Some(v.to_owned());
            }
        }
        None
    };
    assert_eq!(
        field("[Service]", "ExecStart").unwrap(),
        format!(
            "{} serve --socket {}",
            exe().display(),
            env.socket.display()
        )
    );
    assert_eq!(field("[Service]", "Restart").as_deref(), Some("on-failure"));
    assert_eq!(field("[Service]", "Type").as_deref(), Some("simple"));
    assert!(field("[Service]", "Environment").unwrap().contains("PATH="));
    assert_eq!(
        field("[Install]", "WantedBy").as_deref(),
        Some("default.target")
    );
    assert!(field("[Unit]", "Description").is_some());
}

#[test]
fn default_socket_and_config_are_not_repeated() {
    let env = Env::new();
    let out = env
        .cmd()
        .arg("generate-unit")
        .env_remove("COOGLE_SOCKET")
        .output()
        .unwrap();
    let unit = String::from_utf8_lossy(&out.stdout);
    let exec = unit.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    assert_eq!(exec, format!("ExecStart={} serve", exe().display()));
}
