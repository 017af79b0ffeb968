//! Resolving each upstream's Google OAuth client (from `env`, `manual`, or a `~/.claude.json`
//! entry) and the environment the child gets with it.
//!
//! A secret goes only into the child's environment: never into a log line, an error or a
//! `Debug`. Errors name the file and entry, never a value. And only into the child that uses
//! it: the daemon's own `GOOGLE_OAUTH_*` go to upstreams configured with Google credentials,
//! its Gemini key to the search server, and no other child inherits them.

use serde_json::Value;

use super::claude_json::{
    CLIENT_ID_VAR, CLIENT_SECRET_VAR, describe, env_credentials, env_var, mcp_server_entries,
};
use super::{ConfigError, Credentials, CredentialsConfig, ServerConfig, parse_json};

/// The prefix of the Google OAuth client's variables (id, secret, and their companions).
pub(crate) const OAUTH_PREFIX: &str = "GOOGLE_OAUTH_";

impl ServerConfig {
    /// The environment to add to the child: `env` entries first, then the resolved credentials
    /// as `GOOGLE_OAUTH_CLIENT_ID` and `GOOGLE_OAUTH_CLIENT_SECRET` (they override `env`).
    ///
    /// A credentials lookup that fails (no `~/.claude.json`, no entry, variable unset) does not
    /// stop the child: the upstream may not need them, and it reports its own error better.
    /// That is logged as a warning and just `env` is returned. Only a `~/.claude.json` that
    /// exists but does not parse is an error, so a broken file is never silently ignored.
    pub fn child_env(&self) -> Result<Vec<(String, String)>, ConfigError> {
        self.child_env_with(|name| std::env::var(name).ok())
    }

    fn child_env_with(
        &self,
        getenv: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, ConfigError> {
        let credentials = match self.resolve_credentials_with(getenv) {
            Ok(c) => c,
            Err(e @ ConfigError::Parse { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(
                    server = %self.name,
                    error = %e,
                    "starting the upstream without Google OAuth credentials"
                );
                None
            }
        };
        let mut out: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(k, _)| {
                credentials.is_none()
                    || (k.as_str() != CLIENT_ID_VAR && k.as_str() != CLIENT_SECRET_VAR)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(c) = credentials {
            out.push((CLIENT_ID_VAR.to_owned(), c.client_id));
            out.push((CLIENT_SECRET_VAR.to_owned(), c.client_secret));
        }
        Ok(out)
    }

    /// The credentials this server is configured with: `Ok(None)` for
    /// [`CredentialsConfig::None`], an error for every failure to find them.
    pub fn resolve_credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        self.resolve_credentials_with(|name| std::env::var(name).ok())
    }

    fn resolve_credentials_with(
        &self,
        getenv: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Credentials>, ConfigError> {
        let missing = |detail: String| ConfigError::NoCredentials {
            server: self.name.clone(),
            detail,
        };
        match &self.credentials {
            CredentialsConfig::None => Ok(None),
            CredentialsConfig::Manual {
                client_id,
                client_secret,
            } => Ok(Some(Credentials {
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
            })),
            CredentialsConfig::Env => env_credentials_from(getenv)
                .map(Some)
                .map_err(|name| missing(format!("{name} is not set in coogle's environment"))),
            CredentialsConfig::ClaudeJson { path, server_name } => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| missing(format!("could not read {}: {e}", path.display())))?;
                let root = parse_json(&text, path)?;
                claude_json_credentials(&root, server_name)
                    .map(Some)
                    .map_err(|detail| missing(format!("{} {detail}", path.display())))
            }
        }
    }
}

/// Both OAuth variables from an environment (`getenv`); the error names the first one unset
/// or empty.
pub(crate) fn env_credentials_from(
    getenv: impl Fn(&str) -> Option<String>,
) -> Result<Credentials, &'static str> {
    let var = |name: &'static str| getenv(name).filter(|v| !v.is_empty()).ok_or(name);
    Ok(Credentials {
        client_id: var(CLIENT_ID_VAR)?,
        client_secret: var(CLIENT_SECRET_VAR)?,
    })
}

/// Find the OAuth client in a parsed `~/.claude.json`: `mcpServers.<name>.env` at the top level
/// first, then under each `projects.*` in file order; the first entry with both variables wins.
/// The error is the rest of a sentence that starts with the file's path; it holds no values.
fn claude_json_credentials(root: &Value, server_name: &str) -> Result<Credentials, String> {
    let candidates = mcp_server_entries(root, true)
        .into_iter()
        .filter(|(location, _)| location.last().map(String::as_str) == Some(server_name));
    let mut incomplete = Vec::new();
    for (location, entry) in candidates {
        if let Some(c) = env_credentials(entry) {
            return Ok(c);
        }
        let lacks: Vec<&str> = [CLIENT_ID_VAR, CLIENT_SECRET_VAR]
            .into_iter()
            .filter(|name| env_var(entry, name).is_none())
            .collect();
        incomplete.push(format!(
            "{}.env lacks {}",
            describe(&location),
            lacks.join(" and ")
        ));
    }
    let wanted = format!(
        "has no mcpServers entry named {server_name:?} with {CLIENT_ID_VAR} and {CLIENT_SECRET_VAR}"
    );
    if incomplete.is_empty() {
        Err(wanted)
    } else {
        Err(format!("{wanted} ({})", incomplete.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_json_top_level_entry() {
        let server = server_with(claude("workspace"), &[]);
        let creds = server.resolve_credentials().unwrap().unwrap();
        assert_eq!(creds.client_id, "top-level-id.apps.googleusercontent.com");
        assert_eq!(creds.client_secret, "GOCSPX-top-level-fake");
    }

    #[test]
    fn claude_json_project_entry() {
        let server = server_with(claude("coogle"), &[]);
        let creds = server.resolve_credentials().unwrap().unwrap();
        assert_eq!(creds.client_id, "project-id.apps.googleusercontent.com");
        assert_eq!(creds.client_secret, "GOCSPX-project-fake");
    }

    #[test]
    fn claude_json_top_level_wins_over_projects() {
        let root = json!({
            "projects": {"/p": {"mcpServers": {"x": {"env": {
                "GOOGLE_OAUTH_CLIENT_ID": "project", "GOOGLE_OAUTH_CLIENT_SECRET": "ps"}}}}},
            "mcpServers": {"x": {"env": {
                "GOOGLE_OAUTH_CLIENT_ID": "top", "GOOGLE_OAUTH_CLIENT_SECRET": "ts"}}},
        });
        assert_eq!(
            claude_json_credentials(&root, "x").unwrap().client_id,
            "top"
        );
        let first_project = json!({"projects": {
            "/a": {"mcpServers": {"x": {"env": {"GOOGLE_OAUTH_CLIENT_ID": "a", "GOOGLE_OAUTH_CLIENT_SECRET": "as"}}}},
            "/b": {"mcpServers": {"x": {"env": {"GOOGLE_OAUTH_CLIENT_ID": "b", "GOOGLE_OAUTH_CLIENT_SECRET": "bs"}}}},
        }});
        assert_eq!(
            claude_json_credentials(&first_project, "x")
                .unwrap()
                .client_id,
            "a"
        );
    }

    #[test]
    fn claude_json_missing_server() {
        let server = server_with(claude("nope"), &[]);
        let err = server.resolve_credentials().unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ConfigError::NoCredentials { .. }), "{err:?}");
        assert!(
            text.starts_with("no credentials for server google: "),
            "{text}"
        );
        assert!(
            text.contains(&data("claude.json").display().to_string()),
            "{text}"
        );
        assert!(
            text.contains("has no mcpServers entry named \"nope\" with GOOGLE_OAUTH_CLIENT_ID and GOOGLE_OAUTH_CLIENT_SECRET"),
            "{text}"
        );
    }

    #[test]
    fn claude_json_missing_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claude.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {"coogle": {"env": {"GOOGLE_OAUTH_CLIENT_ID": "only-the-id"}}}}"#,
        )
        .unwrap();
        let server = server_with(
            CredentialsConfig::ClaudeJson {
                path: path.clone(),
                server_name: "coogle".into(),
            },
            &[],
        );
        let text = server.resolve_credentials().unwrap_err().to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(
            text.contains("mcpServers.coogle.env lacks GOOGLE_OAUTH_CLIENT_SECRET"),
            "{text}"
        );
        assert!(!text.contains("only-the-id"), "{text}");
    }

    #[test]
    fn claude_json_missing_file_is_strict_error_but_child_env_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        let server = server_with(
            CredentialsConfig::ClaudeJson {
                path: dir.path().join("absent.json"),
                server_name: "coogle".into(),
            },
            &[("A", "1")],
        );
        let err = server.resolve_credentials().unwrap_err();
        assert!(err.to_string().contains("could not read"), "{err}");
        assert_eq!(
            server.child_env().unwrap(),
            [("A".to_owned(), "1".to_owned())]
        );
    }

    #[test]
    fn corrupt_claude_json_is_an_error_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claude.json");
        std::fs::write(
            &path,
            "{\n  \"mcpServers\": {\n    \"coogle\": {\"env\": {\"GOOGLE_OAUTH_CLIENT_SECRET\": \"s3cret\"}}\n  },,\n}\n",
        )
        .unwrap();
        let server = server_with(
            CredentialsConfig::ClaudeJson {
                path: path.clone(),
                server_name: "coogle".into(),
            },
            &[],
        );
        for err in [
            server.resolve_credentials().unwrap_err(),
            server.child_env().unwrap_err(),
        ] {
            match &err {
                ConfigError::Parse { path: p, line, .. } => {
                    assert_eq!(p, &path);
                    assert_eq!(*line, 4);
                }
                other => panic!("expected a parse error, got {other:?}"),
            }
            assert!(!err.to_string().contains("s3cret"));
            assert!(!format!("{err:?}").contains("s3cret"));
        }
    }

    #[test]
    fn child_env_falls_back_when_entry_missing() {
        let server = server_with(claude("nope"), &[("A", "1"), ("B", "2")]);
        assert_eq!(
            server.child_env().unwrap(),
            [
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "2".to_owned())
            ]
        );
    }

    #[test]
    fn child_env_order_and_override() {
        let server = server_with(
            claude("workspace"),
            &[
                ("A", "1"),
                ("GOOGLE_OAUTH_CLIENT_ID", "from-env"),
                ("B", "2"),
                ("GOOGLE_OAUTH_CLIENT_SECRET", "from-env-secret"),
            ],
        );
        assert_eq!(
            server.child_env().unwrap(),
            [
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "2".to_owned()),
                (
                    "GOOGLE_OAUTH_CLIENT_ID".to_owned(),
                    "top-level-id.apps.googleusercontent.com".to_owned()
                ),
                (
                    "GOOGLE_OAUTH_CLIENT_SECRET".to_owned(),
                    "GOCSPX-top-level-fake".to_owned()
                ),
            ]
        );
        // Without credentials, env is passed through untouched, Google variables included.
        let none = server_with(
            CredentialsConfig::None,
            &[("GOOGLE_OAUTH_CLIENT_ID", "x"), ("A", "1")],
        );
        assert_eq!(none.resolve_credentials().unwrap(), None);
        assert_eq!(
            none.child_env().unwrap(),
            [
                ("GOOGLE_OAUTH_CLIENT_ID".to_owned(), "x".to_owned()),
                ("A".to_owned(), "1".to_owned())
            ]
        );
    }

    #[test]
    fn env_source_reads_the_daemon_environment() {
        let server = server_with(CredentialsConfig::Env, &[("A", "1")]);
        let getenv = |name: &str| match name {
            "GOOGLE_OAUTH_CLIENT_ID" => Some("env-id".to_owned()),
            "GOOGLE_OAUTH_CLIENT_SECRET" => Some("env-secret".to_owned()),
            _ => None,
        };
        let creds = server.resolve_credentials_with(getenv).unwrap().unwrap();
        assert_eq!(creds.client_id, "env-id");
        assert_eq!(creds.client_secret, "env-secret");
        assert_eq!(server.child_env_with(getenv).unwrap().len(), 3);

        let err = server.resolve_credentials_with(no_env).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no credentials for server google: GOOGLE_OAUTH_CLIENT_ID is not set in coogle's environment"
        );
        assert_eq!(
            server.child_env_with(no_env).unwrap(),
            [("A".to_owned(), "1".to_owned())]
        );
    }

    /// Regression: every child inherited the daemon's whole environment, so a server without
    /// Google credentials got the OAuth client secret, and every server the Gemini key.
    #[test]
    fn manual_credentials_resolve() {
        let server = server_with(
            CredentialsConfig::Manual {
                client_id: "id".into(),
                client_secret: "secret".into(),
            },
            &[],
        );
        assert_eq!(
            server.resolve_credentials_with(no_env).unwrap(),
            Some(Credentials {
                client_id: "id".into(),
                client_secret: "secret".into()
            })
        );
    }
}
