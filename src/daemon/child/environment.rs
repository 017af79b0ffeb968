//! The environment a child starts with. It never depends on who started the daemon: `coogle
//! mcp` starts the daemon with its client's environment, which holds whatever that client
//! gives one entry (Cursor's `envFile`, an entry's `env`), a project's direnv secrets, or an
//! `AWS_PROFILE` of the first terminal. None of that may reach a child serving another client.
//!
//! So a child gets, in this order, later ones winning:
//! 1. from the daemon's own environment, only what describes the user rather than a client
//!    ([`INHERITED`]: who and where the user is, locale, temp dirs, the desktop session, proxy
//!    and CA settings, where the user's toolchains keep their installs);
//! 2. the values its upstream's `passEnv` names, taken from the session it serves (sessions
//!    with different values are served by different instances, see `registry`);
//! 3. its upstream's `envFile`, read at each start;
//! 4. its upstream's `env` and credentials;
//! 5. `PATH`: its `env.PATH`, else what setup recorded (see [`crate::exec_path`]).
//!
//! This module must never copy a variable of the daemon's environment that is not on the list.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::config::ServerConfig;

/// Variables of the daemon's environment every child gets: the user's, not a client's.
pub(crate) const INHERITED: &[&str] = &[
    // Who and where.
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "LANG",
    "LANGUAGE",
    "TMPDIR",
    "TMP",
    "TEMP",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    // The desktop session (a browser server opens windows, git asks the ssh agent).
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    // Reaching the network at all.
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    // Where the toolchains that launch servers (uvx, npx) keep what they installed.
    "UV_CACHE_DIR",
    "UV_TOOL_DIR",
    "UV_TOOL_BIN_DIR",
    "UV_PYTHON_INSTALL_DIR",
    "PYENV_ROOT",
    "NVM_DIR",
    "VOLTA_HOME",
    "PNPM_HOME",
    "BUN_INSTALL",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "npm_config_prefix",
    "NPM_CONFIG_PREFIX",
];

/// Prefixes of inherited names (the locale's categories).
const INHERITED_PREFIXES: &[&str] = &["LC_"];

/// The largest `envFile` read; a bigger one is refused rather than read into memory.
const MAX_ENV_FILE: u64 = 1 << 20;

pub(crate) fn inherited(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    INHERITED.contains(&name) || INHERITED_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[derive(Debug, thiserror::Error)]
pub enum EnvFileError {
    #[error("could not read the envFile {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the envFile {path} is larger than {MAX_ENV_FILE} bytes")]
    TooLarge { path: String },
    #[error("the envFile {path} has no variable assignment on line {line}")]
    Syntax { path: String, line: usize },
}

/// The variables a child starts with, except `PATH` (see the module's list).
/// `cwd` is where the child runs (a relative `envFile` is read from there).
pub(crate) fn build(
    server: &ServerConfig,
    cwd: &Path,
    daemon_env: impl IntoIterator<Item = (OsString, OsString)>,
    passed: &BTreeMap<String, String>,
    configured: Vec<(String, String)>,
) -> Result<Vec<(OsString, OsString)>, EnvFileError> {
    let mut out: BTreeMap<OsString, OsString> = daemon_env
        .into_iter()
        .filter(|(k, _)| inherited(k) || gets_daemon_secret(server, k))
        .collect();
    for (k, v) in passed {
        out.insert(k.into(), v.into());
    }
    if let Some(file) = &server.env_file {
        for (k, v) in read_env_file(&cwd.join(file))? {
            out.insert(k.into(), v.into());
        }
    }
    for (k, v) in configured {
        out.insert(k.into(), v.into());
    }
    out.remove(OsStr::new("PATH"));
    Ok(out.into_iter().collect())
}

/// Secrets the daemon's environment holds for one kind of child only: the Gemini key for the
/// built-in search server (the daemon added it because that key was there), and the Google
/// OAuth client's variables for a server whose credentials come from the environment.
fn gets_daemon_secret(server: &ServerConfig, name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    (server.name == crate::config::SEARCH_SERVER && crate::secret::KEY_VARS.contains(&name))
        || (server.credentials == crate::config::CredentialsConfig::Env
            && name.starts_with(crate::config::OAUTH_PREFIX))
}

/// A dotenv file as Cursor and most tools read it: `NAME=value` lines, an optional `export `,
/// `#` comments and blank lines, values optionally in single quotes (taken as written) or
/// double quotes (with `\n`, `\"` and `\\` escapes).
pub(crate) fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, EnvFileError> {
    use std::io::Read;
    let shown = path.display().to_string();
    let read_err = |source| EnvFileError::Read {
        path: shown.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let mut bytes = Vec::new();
    file.take(MAX_ENV_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_ENV_FILE {
        return Err(EnvFileError::TooLarge { path: shown });
    }
    parse_env_file(&String::from_utf8_lossy(&bytes)).map_err(|line| EnvFileError::Syntax {
        path: path.display().to_string(),
        line,
    })
}

/// The assignments of a dotenv text; `Err(line)` names the first line that is not one.
fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, usize> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let (name, value) = line.split_once('=').ok_or(i + 1)?;
        let name = name.trim();
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(i + 1);
        }
        out.push((name.to_owned(), unquote(value.trim())));
    }
    Ok(out)
}

fn unquote(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return v[1..v.len() - 1].to_owned();
    }
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        let mut out = String::new();
        let mut chars = v[1..v.len() - 1].chars();
        while let Some(c) = chars.next() {
            match (c, chars.clone().next()) {
                ('\\', Some('n')) => {
                    out.push('\n');
                    chars.next();
                }
                ('\\', Some(e @ ('"' | '\\'))) => {
                    out.push(e);
                    chars.next();
                }
                _ => out.push(c),
            }
        }
        return out;
    }
    // An unquoted value ends at a ` #` comment.
    match v.find(" #") {
        Some(i) => v[..i].trim_end().to_owned(),
        None => v.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(extra: serde_json::Value) -> ServerConfig {
        let mut block = serde_json::json!({"command": "x", "credentials": {"source": "none"}});
        if let serde_json::Value::Object(e) = extra {
            for (k, v) in e {
                block[k] = v;
            }
        }
        crate::config::Config::from_value(serde_json::json!({"servers": {"t": block}}), None)
            .unwrap()
            .servers
            .shift_remove("t")
            .unwrap()
    }

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    #[test]
    fn only_the_users_variables_come_from_the_daemon() {
        let daemon = os(&[
            ("HOME", "/h"),
            ("LC_TIME", "C"),
            ("AWS_PROFILE", "prod"),
            ("DIRENV_SECRET", "s"),
            ("GEMINI_API_KEY", "k"),
            ("PATH", "/bin"),
        ]);
        let s = server(serde_json::json!({"env": {"A": "1", "HOME": "/elsewhere"}}));
        let env = build(
            &s,
            Path::new("/"),
            daemon.clone(),
            &BTreeMap::new(),
            s.child_env().unwrap(),
        )
        .unwrap();
        assert_eq!(
            env,
            os(&[("A", "1"), ("HOME", "/elsewhere"), ("LC_TIME", "C")]),
            "the upstream's env wins; nothing else of the daemon's, not even PATH (set apart)"
        );
        // A passed value, under the upstream's env.
        let passed = BTreeMap::from([("AWS_PROFILE".to_string(), "dev".to_string())]);
        let env = build(&s, Path::new("/"), daemon.clone(), &passed, Vec::new()).unwrap();
        assert!(
            env.contains(&("AWS_PROFILE".into(), "dev".into())),
            "{env:?}"
        );
        // The search server alone gets the Gemini key.
        let mut search = server(serde_json::json!({}));
        search.name = crate::config::SEARCH_SERVER.into();
        let env = build(
            &search,
            Path::new("/"),
            daemon.clone(),
            &BTreeMap::new(),
            Vec::new(),
        )
        .unwrap();
        assert!(
            env.contains(&("GEMINI_API_KEY".into(), "k".into())),
            "{env:?}"
        );
    }

    /// The daemon holds every upstream's secrets; a child gets only its own.
    #[test]
    fn each_child_inherits_only_its_own_secrets() {
        let daemon = os(&[
            ("GOOGLE_OAUTH_CLIENT_ID", "id"),
            ("GOOGLE_OAUTH_REDIRECT_URI", "uri"),
            ("GEMINI_API_KEY", "k"),
            ("GOOGLE_API_KEY", "g"),
        ]);
        let names = |s: &ServerConfig| -> Vec<OsString> {
            build(
                s,
                Path::new("/"),
                daemon.clone(),
                &BTreeMap::new(),
                Vec::new(),
            )
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
        };
        let google = server(serde_json::json!({"credentials": {"source": "env"}}));
        assert_eq!(
            names(&google),
            ["GOOGLE_OAUTH_CLIENT_ID", "GOOGLE_OAUTH_REDIRECT_URI"]
        );
        let mut search = server(serde_json::json!({}));
        search.name = crate::config::SEARCH_SERVER.into();
        assert_eq!(names(&search), ["GEMINI_API_KEY", "GOOGLE_API_KEY"]);
        assert!(names(&server(serde_json::json!({}))).is_empty());
    }

    #[test]
    fn env_files_parse_as_dotenv() {
        let text = "# c\n\nexport A=1\nB = 'two words' \nC=\"x\\ny \\\"q\\\"\"\nD=plain # note\n";
        assert_eq!(
            parse_env_file(text).unwrap(),
            vec![
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "two words".to_string()),
                ("C".to_string(), "x\ny \"q\"".to_string()),
                ("D".to_string(), "plain".to_string()),
            ]
        );
        assert_eq!(parse_env_file("A=1\nnot an assignment\n"), Err(2));
        assert_eq!(parse_env_file("1A=x\n"), Err(1));
    }

    #[test]
    fn an_env_file_lies_under_the_upstreams_env() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".env");
        std::fs::write(&file, "A=from-file\nB=from-file\n").unwrap();
        let s = server(serde_json::json!({"env": {"A": "from-env"}, "envFile": ".env"}));
        let env = build(
            &s,
            dir.path(),
            Vec::new(),
            &BTreeMap::new(),
            s.child_env().unwrap(),
        );
        assert_eq!(env.unwrap(), os(&[("A", "from-env"), ("B", "from-file")]));
        std::fs::remove_file(&file).unwrap();
        let e = build(&s, dir.path(), Vec::new(), &BTreeMap::new(), Vec::new()).unwrap_err();
        assert!(
            e.to_string().starts_with("could not read the envFile"),
            "{e}"
        );
    }
}
