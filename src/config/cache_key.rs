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
