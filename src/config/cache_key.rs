//! The cache key of an upstream: which launches count as "the same program", so what the
//! daemon learned about one (its initialize result, its tool list) is reused by the next.
//!
//! The key must stay the same across coogle versions and builds (it names files on disk) and
//! must never depend on, or reveal anything about, a secret.

use sha2::{Digest, Sha256};

use super::ServerConfig;

impl ServerConfig {
    /// A stable key for "the same upstream program": the first 8 bytes of the SHA-256, as 16
    /// lowercase hex digits, of `command`, each of `args`, the `env` variable names (sorted, so
    /// reordering them does not matter) and `cwd`. Every field is length-prefixed so that
    /// fields cannot run into each other. Env values and credentials are left out on purpose:
    /// the key may be written to disk and must not depend on, or leak anything about, secrets.
    pub fn cache_key(&self) -> String {
        use std::os::unix::ffi::OsStrExt;
        let mut h = Fields(Sha256::new());
        h.field(b"command");
        h.field(self.command.as_bytes());
        h.field(b"args");
        h.count(self.args.len());
        for arg in &self.args {
            h.field(arg.as_bytes());
        }
        h.field(b"env");
        let mut keys: Vec<&str> = self.env.keys().map(String::as_str).collect();
        keys.sort_unstable();
        h.count(keys.len());
        for key in keys {
            h.field(key.as_bytes());
        }
        h.field(b"cwd");
        match &self.cwd {
            Some(cwd) => {
                h.count(1);
                h.field(cwd.as_os_str().as_bytes());
            }
            None => h.count(0),
        }
        // Newer fields count only when set, so the keys of servers that do not use them (and the
        // files named by them) stay what they were.
        if let Some(file) = &self.env_file {
            h.field(b"envFile");
            h.field(file.as_os_str().as_bytes());
        }
        if !self.pass_env.is_empty() {
            h.field(b"passEnv");
            h.count(self.pass_env.len());
            for name in &self.pass_env {
                h.field(name.as_bytes());
            }
        }
        h.0.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl ServerConfig {
    /// What decides the child's process and what it was told at start: command, args, `env`
    /// with its values, `cwd`, `envFile`, `passEnv`, credentials, the search path and the
    /// capabilities sent in `initialize`, as a SHA-256 in hex. An upgrade in place adopts a
    /// running child only while this is unchanged; a server edited since runs its new
    /// definition. Secrets go into it, so it is never written anywhere but the private state
    /// an upgrade carries, and never shown.
    pub fn launch_key(&self) -> String {
        use std::os::unix::ffi::OsStrExt;
        let mut h = Fields(Sha256::new());
        h.field(self.cache_key().as_bytes());
        let mut env: Vec<(&String, &String)> = self.env.iter().collect();
        env.sort_unstable();
        h.count(env.len());
        for (k, v) in env {
            h.field(k.as_bytes());
            h.field(v.as_bytes());
        }
        match &self.credentials {
            super::CredentialsConfig::None => h.field(b"none"),
            super::CredentialsConfig::Env => h.field(b"env"),
            super::CredentialsConfig::Manual {
                client_id,
                client_secret,
            } => {
                h.field(b"manual");
                h.field(client_id.as_bytes());
                h.field(client_secret.as_bytes());
            }
            super::CredentialsConfig::ClaudeJson { path, server_name } => {
                h.field(b"claude-json");
                h.field(path.as_os_str().as_bytes());
                h.field(server_name.as_bytes());
            }
        }
        h.count(self.search_path.len());
        for p in &self.search_path {
            h.field(p.as_os_str().as_bytes());
        }
        h.field(self.client_capabilities.to_string().as_bytes());
        h.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Length-prefixed fields into a hash.
struct Fields(Sha256);

impl Fields {
    fn count(&mut self, n: usize) {
        self.0.update((n as u64).to_le_bytes());
    }

    fn field(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.update(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::super::CredentialsConfig;
    use super::super::testing::*;
    use std::path::PathBuf;

    #[test]
    fn cache_key_is_stable_and_ignores_values() {
        let base = server_with(CredentialsConfig::None, &[("A", "1"), ("B", "2")]);
        let key = base.cache_key();
        assert_eq!(key.len(), 16);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(key, base.clone().cache_key());

        let mut other_values = server_with(CredentialsConfig::Env, &[("B", "x"), ("A", "y")]);
        other_values.max_concurrent = 9;
        assert_eq!(
            other_values.cache_key(),
            key,
            "values, order and credentials do not count"
        );

        let mut changed = base.clone();
        changed.command = "uv".into();
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.args.push("--x".into());
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.env.insert("C".into(), "3".into());
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.cwd = Some(PathBuf::from("/tmp"));
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.pass_env = vec!["AWS_PROFILE".into()];
        assert_ne!(changed.cache_key(), key);
        let mut changed = base.clone();
        changed.env_file = Some(PathBuf::from("/p/.env"));
        assert_ne!(changed.cache_key(), key);

        // Field boundaries matter: ["ab"] is not ["a", "b"].
        let mut split = base.clone();
        split.args = vec!["a".into(), "b".into()];
        let mut joined = base.clone();
        joined.args = vec!["ab".into()];
        assert_ne!(split.cache_key(), joined.cache_key());
    }

    /// The key names files on disk, so it must not change between builds or versions.
    #[test]
    fn cache_key_is_pinned() {
        let server = server_with(CredentialsConfig::None, &[("A", "1")]);
        assert_eq!(server.cache_key(), "ec2093cfdef1e1b2");
    }
}
