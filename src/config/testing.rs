//! What the config tests share: a fake home, a sealed host (no environment, no `.env`), the
//! fixtures under `tests/data`, and a server to resolve credentials for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::read::{DEFAULTS_LABEL, from_value_with};
use super::{Config, ConfigError, CredentialsConfig, Host, ServerConfig};

pub(super) const HOME: &str = "/home/tester";

pub(super) fn data(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(name)
}

pub(super) fn home() -> Option<&'static Path> {
    Some(Path::new(HOME))
}

/// The fake home, no environment, and a working directory that does not exist (no `.env`).
pub(super) fn host() -> Host<'static> {
    Host {
        home: home(),
        cwd: PathBuf::from("/nonexistent/cwd"),
        env: &|_| None,
    }
}

pub(super) fn from(user: Value) -> Result<Config, ConfigError> {
    from_value_with(user, None, &host())
}

pub(super) fn invalid_detail(user: Value) -> String {
    match from(user) {
        Err(ConfigError::Invalid { path, detail }) => {
            assert_eq!(path, DEFAULTS_LABEL);
            detail
        }
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

pub(super) fn server_with(credentials: CredentialsConfig, env: &[(&str, &str)]) -> ServerConfig {
    ServerConfig {
        name: "google".into(),
        command: "uvx".into(),
        args: vec!["workspace-mcp".into()],
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        cwd: None,
        env_file: None,
        pass_env: Vec::new(),
        credentials,
        max_concurrent: 1,
        call_timeout: Duration::from_secs(1),
        client_capabilities: json!({}),
        idle_stop: super::DEFAULT_IDLE_STOP,
        stateful: false,
        sharing: super::Sharing::Shared,
        sign_in: Some(super::SignInConfig::workspace_mcp()),
        search_path: Vec::new(),
    }
}

pub(super) fn claude(server_name: &str) -> CredentialsConfig {
    CredentialsConfig::ClaudeJson {
        path: data("claude.json"),
        server_name: server_name.into(),
    }
}

pub(super) fn no_env(_: &str) -> Option<String> {
    None
}
