//! Step 2: the Google OAuth client the upstream gets, by `--credentials-source`: from flags
//! (the secret only ever from an environment variable, never argv), what config.json already
//! has, a `~/.claude.json` entry, this shell's environment, or a prompt.
//!
//! Secrets are shown as their length only. Under `--yes` nothing is asked: a source that finds
//! nothing is an error naming the flags that fix it.

use std::path::Path;

use super::super::args::{CredentialsSource, SetupArgs};
use super::super::client_config::{self, ClientKind};
use super::super::ui::Ui;
use crate::config::{Config, Credentials, CredentialsConfig, env_credentials_from};
use crate::error::InstallError;
use crate::secret::mask;

/// What the credentials step decided for config.json.
pub(super) enum CredChoice {
    /// config.json already resolves credentials that do not depend on a client entry.
    Keep,
    Manual(Credentials),
    Env,
    None,
}

/// Where this run may look for a client.
pub(super) struct Sources<'a> {
    pub ui: &'a Ui,
    pub args: &'a SetupArgs,
    pub cfg_path: &'a Path,
    pub claude_json: &'a Path,
}

fn show(ui: &Ui, c: &Credentials, from: &str) {
    ui.ok(&format!(
        "client id {}, secret {} ({from})",
        mask(&c.client_id),
        mask(&c.client_secret)
    ));
}

impl Sources<'_> {
    /// Decide, as `--credentials-source` says.
    pub fn choose(&self) -> Result<CredChoice, InstallError> {
        let ui = self.ui;
        match self.args.credentials_source {
            CredentialsSource::None => {
                ui.ok("none: the upstream gets no Google OAuth client");
                Ok(CredChoice::None)
            }
            CredentialsSource::Env => {
                match environment() {
                    Some(c) => show(ui, &c, "this shell's environment"),
                    None => ui.warn(
                        "GOOGLE_OAUTH_CLIENT_ID/SECRET are not set here; the daemon must get them from its environment",
                    ),
                }
                Ok(CredChoice::Env)
            }
            CredentialsSource::Manual => match self.flags()? {
                Some(c) => {
                    show(ui, &c, "flags");
                    Ok(CredChoice::Manual(c))
                }
                None if ui.interactive => self.prompt(),
                None => Err(InstallError::ManualNeedsFlags),
            },
            CredentialsSource::ClaudeJson => self.claude_json_only(),
            CredentialsSource::Auto => self.auto(),
        }
    }

    fn claude_json_only(&self) -> Result<CredChoice, InstallError> {
        match self.claude_json_entry() {
            Some((from, c)) => {
                show(self.ui, &c, &from);
                Ok(CredChoice::Manual(c))
            }
            // A second run: the first moved the client out of ~/.claude.json into config.json.
            None if matches!(self.config_file(), Some(CredChoice::Keep)) => Ok(CredChoice::Keep),
            None => Err(InstallError::NoClientInClaudeJson {
                claude_json: self.claude_json.to_path_buf(),
            }),
        }
    }

    /// Flags, then config.json, then `~/.claude.json`, then the environment, then a prompt.
    fn auto(&self) -> Result<CredChoice, InstallError> {
        let ui = self.ui;
        if let Some(c) = self.flags()? {
            show(ui, &c, "flags");
            return Ok(CredChoice::Manual(c));
        }
        if let Some(choice) = self.config_file() {
            return Ok(choice);
        }
        if let Some((from, c)) = self.claude_json_entry() {
            show(ui, &c, &from);
            if ui.confirm("Use this OAuth client?", true) {
                return Ok(CredChoice::Manual(c));
            }
            return self.prompt();
        }
        if let Some(c) = environment() {
            show(ui, &c, "GOOGLE_OAUTH_CLIENT_ID/SECRET in this environment");
            return Ok(CredChoice::Manual(c));
        }
        if ui.interactive {
            ui.warn(&format!(
                "no Google OAuth client found in {} or the environment",
                self.claude_json.display()
            ));
            return self.prompt();
        }
        Err(InstallError::NoClientFound {
            claude_json: self.claude_json.to_path_buf(),
        })
    }

    /// `--client-id` with `--client-secret-env`: both or neither.
    fn flags(&self) -> Result<Option<Credentials>, InstallError> {
        let secret = match &self.args.client_secret_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => Some(v.trim().to_owned()),
                _ => return Err(InstallError::SecretEnvUnset { var: var.clone() }),
            },
        };
        match (&self.args.client_id, secret) {
            (Some(id), Some(secret)) => Ok(Some(Credentials {
                client_id: id.clone(),
                client_secret: secret,
            })),
            (None, None) => Ok(None),
            _ => Err(InstallError::CredentialFlagsApart),
        }
    }

    /// The first Google Workspace entry in `~/.claude.json` with both variables, and where.
    fn claude_json_entry(&self) -> Option<(String, Credentials)> {
        let bytes = std::fs::read(self.claude_json).ok()?;
        let doc: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        client_config::find_credentials(&doc, ClientKind::ClaudeCode)
            .map(|(at, c)| (format!("{at} in {}", self.claude_json.display()), c))
    }

    /// Credentials config.json already provides: kept as they are, except a `claude-json`
    /// source, whose values are copied in (setup removes them from the client entry).
    fn config_file(&self) -> Option<CredChoice> {
        let (ui, cfg_path) = (self.ui, self.cfg_path);
        if !cfg_path.exists() {
            return None;
        }
        let config = Config::load(Some(cfg_path)).ok()?;
        let server = config.server(None).ok()?;
        let resolved = || server.resolve_credentials().ok().flatten();
        match &server.credentials {
            CredentialsConfig::None => {
                ui.ok(&format!(
                    "{} says the upstream needs no OAuth client",
                    cfg_path.display()
                ));
                Some(CredChoice::Keep)
            }
            CredentialsConfig::ClaudeJson { .. } => {
                let c = resolved()?;
                show(
                    ui,
                    &c,
                    "config.json, via ~/.claude.json; copied into config.json",
                );
                Some(CredChoice::Manual(c))
            }
            CredentialsConfig::Env => {
                match resolved() {
                    Some(c) => show(ui, &c, "the environment, as config.json says"),
                    None => ui.warn(
                        "config.json takes the OAuth client from the daemon's environment; GOOGLE_OAUTH_CLIENT_ID/SECRET are not set in this shell",
                    ),
                }
                // A second run keeps what the first wrote, set in this shell or not.
                Some(CredChoice::Keep)
            }
            CredentialsConfig::Manual { .. } => {
                let c = resolved()?;
                show(ui, &c, &format!("already in {}", cfg_path.display()));
                Some(CredChoice::Keep)
            }
        }
    }

    fn prompt(&self) -> Result<CredChoice, InstallError> {
        let ui = self.ui;
        ui.info(
            "Create an OAuth client (Desktop app) at https://console.cloud.google.com/apis/credentials",
        );
        let id = ui.input("Google OAuth client id").unwrap_or_default();
        if id.is_empty() {
            ui.warn("no client id: the upstream gets no Google OAuth client");
            return Ok(CredChoice::None);
        }
        let secret = ui
            .password("Google OAuth client secret")
            .unwrap_or_default();
        if secret.is_empty() {
            return Err(InstallError::SecretMissing);
        }
        let c = Credentials {
            client_id: id,
            client_secret: secret,
        };
        show(ui, &c, "entered");
        Ok(CredChoice::Manual(c))
    }
}

/// Both variables from this shell's environment.
fn environment() -> Option<Credentials> {
    env_credentials_from(|k| std::env::var(k).ok()).ok()
}
