//! Secrets as coogle handles them: how one is shown (its length, never a prefix), and the
//! search server's Gemini API key: where one is found (environment, config.json, a `.env` file
//! in the working directory or home) and whether it looks usable.
//!
//! Finding is a pure function of its inputs, so tests need no process environment. Nothing
//! here logs or prints a secret, and no message it builds contains one: only [`mask`] of it.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// How a secret is shown: its length only (`<35 chars>`), or `<empty>`.
pub fn mask(secret: &str) -> String {
    match secret.chars().count() {
        0 => "<empty>".to_owned(),
        1 => "<1 char>".to_owned(),
        n => format!("<{n} chars>"),
    }
}

/// Debug-formats as [`mask`] of the string, without quotes: for hand-written `Debug` impls of
/// types that hold secrets.
pub(crate) struct Masked<'a>(pub &'a str);

impl fmt::Debug for Masked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&mask(self.0))
    }
}

/// The environment variables the key is read from, in order.
pub const KEY_VARS: [&str; 2] = ["GOOGLE_API_KEY", "GEMINI_API_KEY"];

/// Where a key was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Env(&'static str),
    Config,
    DotEnv(PathBuf),
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Env(var) => write!(f, "${var}"),
            KeySource::Config => f.write_str("config.json search.apiKey"),
            KeySource::DotEnv(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A key and where it came from. `Debug` shows the length only.
#[derive(Clone, PartialEq, Eq)]
pub struct FoundKey {
    pub key: String,
    pub source: KeySource,
}

impl fmt::Debug for FoundKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FoundKey")
            .field("key", &Masked(&self.key))
            .field("source", &self.source)
            .finish()
    }
}

/// The key: the environment first, then config.json's `search.apiKey`, then `.env` in `cwd`,
/// then in `home`. Empty values are skipped.
pub fn find_key(
    env: &dyn Fn(&str) -> Option<String>,
    config: Option<&Value>,
    cwd: &Path,
    home: &Path,
) -> Option<FoundKey> {
    let clean = |v: String| Some(v.trim().to_owned()).filter(|v| !v.is_empty());
    for var in KEY_VARS {
        if let Some(key) = env(var).and_then(clean) {
            return Some(FoundKey {
                key,
                source: KeySource::Env(var),
            });
        }
    }
    if let Some(key) = config
        .and_then(|c| c.get("search"))
        .and_then(|s| s.get("apiKey"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .and_then(clean)
    {
        return Some(FoundKey {
            key,
            source: KeySource::Config,
        });
    }
    for dir in [cwd, home] {
        let path = dir.join(".env");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let vars = parse_dotenv(&text);
        for var in KEY_VARS {
            if let Some(key) = vars
                .iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
                .and_then(clean)
            {
                return Some(FoundKey {
                    key,
                    source: KeySource::DotEnv(path),
                });
            }
        }
    }
    None
}

/// The key as a command run here finds it: this process's environment, the `search.apiKey` of
/// the config file at `config_file` (when it parses), then `.env` in the working directory and
/// in home.
pub(crate) fn find_key_here(config_file: &Path) -> Option<FoundKey> {
    let config: Option<Value> = std::fs::read(config_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    find_key(
        &|v| std::env::var(v).ok(),
        config.as_ref(),
        &cwd,
        &crate::paths::home(),
    )
}

/// `KEY=value` lines of a `.env` file: `export ` prefixes, single or double quotes, blank
/// lines and `#` comments (whole-line, or after an unquoted value) are understood.
pub fn parse_dotenv(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => match value[1..].find(q) {
                Some(end) => value[1..1 + end].to_owned(),
                None => value[1..].to_owned(),
            },
            _ => value
                .split(" #")
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned(),
        };
        out.push((key.trim().to_owned(), value));
    }
    out
}

/// Why a key does not look usable. The message never contains the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    #[error("the API key is empty")]
    Empty,
    #[error("the API key looks like a placeholder ({masked}), not a real key")]
    Placeholder { masked: String },
    #[error("the API key is too short to be a Google API key ({masked}; they are 39)")]
    TooShort { masked: String },
    #[error("the API key contains whitespace")]
    Whitespace,
}

/// Whether a key looks usable, the way ask-google's check-env judged it: present, not a
/// placeholder from an example file, and of a plausible length (Google API keys are 39
/// characters, `AIza…`).
pub fn check_key(key: &str) -> Result<(), KeyProblem> {
    let k = key.trim();
    if k.is_empty() {
        return Err(KeyProblem::Empty);
    }
    let lower = k.to_ascii_lowercase();
    let placeholder = [
        "your",
        "xxx",
        "changeme",
        "placeholder",
        "example",
        "<",
        "todo",
    ]
    .iter()
    .any(|p| lower.contains(p))
        || k.chars().all(|c| c == k.chars().next().unwrap_or('x'));
    if placeholder {
        return Err(KeyProblem::Placeholder { masked: mask(k) });
    }
    if k.len() < 30 {
        return Err(KeyProblem::TooShort { masked: mask(k) });
    }
    if k.chars().any(char::is_whitespace) {
        return Err(KeyProblem::Whitespace);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "AIzaSyA-0123456789abcdefghijklmnopqrstu";

    #[test]
    fn order_is_env_config_cwd_home() {
        let dir = tempfile::tempdir().unwrap();
        let (cwd, home) = (dir.path().join("cwd"), dir.path().join("home"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let none = |_: &str| None;
        assert_eq!(find_key(&none, None, &cwd, &home), None);
        std::fs::write(home.join(".env"), "GEMINI_API_KEY=home-key\n").unwrap();
        assert_eq!(
            find_key(&none, None, &cwd, &home).unwrap().source,
            KeySource::DotEnv(home.join(".env"))
        );
        std::fs::write(cwd.join(".env"), "# c\nexport GOOGLE_API_KEY=\"cwd-key\"\n").unwrap();
        let found = find_key(&none, None, &cwd, &home).unwrap();
        assert_eq!(found.key, "cwd-key");
        let config = json!({"search": {"apiKey": "config-key"}});
        assert_eq!(
            find_key(&none, Some(&config), &cwd, &home).unwrap().source,
            KeySource::Config
        );
        let env = |v: &str| (v == "GEMINI_API_KEY").then(|| "env-key".to_owned());
        let found = find_key(&env, Some(&config), &cwd, &home).unwrap();
        assert_eq!(
            (found.key.as_str(), found.source.clone()),
            ("env-key", KeySource::Env("GEMINI_API_KEY"))
        );
        assert!(!format!("{found:?}").contains("env-key"));
    }

    #[test]
    fn dotenv_lines() {
        let vars = parse_dotenv(
            "A=1\n  export B = 'two words' \nC=three # comment\n#D=4\nE=\"x#y\"\nnoequals\n",
        );
        assert_eq!(
            vars,
            [
                ("A".to_owned(), "1".to_owned()),
                ("B".to_owned(), "two words".to_owned()),
                ("C".to_owned(), "three".to_owned()),
                ("E".to_owned(), "x#y".to_owned()),
            ]
        );
    }

    #[test]
    fn checks() {
        assert!(check_key(KEY).is_ok());
        for (bad, why) in [
            ("", "empty"),
            ("your-api-key-here", "placeholder"),
            ("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "placeholder"),
            ("AIzaShort", "too short"),
        ] {
            let e = check_key(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(bad.is_empty() || !e.contains(bad), "the key leaked: {e}");
        }
    }

    #[test]
    fn mask_shows_length_only() {
        assert_eq!(mask(""), "<empty>");
        assert_eq!(mask("a"), "<1 char>");
        assert_eq!(mask("abc"), "<3 chars>");
        assert_eq!(mask("café"), "<4 chars>");
    }
}
