//! The `search` section (the built-in ask_google server's settings) and the `search` upstream
//! coogle adds by itself when a Gemini API key is found and the user named no server `search`.
//!
//! It only asks whether a key exists ([`crate::secret::find_key`]); the key itself is never
//! copied into the upstream's arguments or environment (the search server reads it itself).

use std::path::Path;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Value, json};

use super::keys::SEARCH_KEYS;
use super::read::Reader;
use super::{ConfigError, CredentialsConfig, Host, SEARCH_SERVER, SearchConfig, ServerConfig};

pub(super) fn search_from(
    r: &Reader<'_>,
    value: Option<&Value>,
) -> Result<SearchConfig, ConfigError> {
    let mut search = SearchConfig::default();
    let obj = match value {
        None | Some(Value::Null) => return Ok(search),
        Some(v) => r.object(v, "search")?,
    };
    r.note_unknown(obj, SEARCH_KEYS, "search.");
    search.api_key = r
        .string(obj, "apiKey", "search.")?
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty());
    if let Some(url) = r.non_empty_string(obj, "apiBaseUrl", "search.")? {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(r.invalid("search.apiBaseUrl must be an http(s) URL"));
        }
        search.api_base_url = url.trim_end_matches('/').to_owned();
    }
    if let Some(models) = obj.get("models").filter(|m| !m.is_null()) {
        let models = r.object(models, "search.models")?;
        r.note_unknown(models, &["pro", "flash", "flashLite"], "search.models.");
        for (key, slot) in [
            ("pro", &mut search.model_pro),
            ("flash", &mut search.model_flash),
            ("flashLite", &mut search.model_flash_lite),
        ] {
            if let Some(m) = r.non_empty_string(models, key, "search.models.")? {
                *slot = m;
            }
        }
    }
    if let Some(ms) = r.positive(obj, "timeoutMs", "search.")? {
        search.timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = r.integer(obj, "retryBaseMs", "search.")? {
        search.retry_base = Duration::from_millis(ms);
    }
    if let Some(n) = r.integer(obj, "maxRetries", "search.")? {
        search.max_retries =
            u32::try_from(n.min(10)).map_err(|_| r.invalid("search.maxRetries is too large"))?;
    }
    if let Some(n) = r.positive(obj, "maxConcurrent", "search.")? {
        search.max_concurrent = usize::try_from(n).unwrap_or(usize::MAX);
    }
    Ok(search)
}

/// Add the `search` upstream (`coogle search-server`, with `--config` naming the file the
/// config came from) unless a server of that name exists or no key would be found.
pub(super) fn add_search_upstream(
    servers: &mut IndexMap<String, ServerConfig>,
    search: &SearchConfig,
    file: Option<&Path>,
    host: &Host<'_>,
    call_timeout_ms: u64,
) {
    if servers.contains_key(SEARCH_SERVER) || !search_key_available(search.api_key.as_deref(), host)
    {
        return;
    }
    let mut args = vec!["search-server".to_owned()];
    if let Some(f) = file {
        args.push("--config".to_owned());
        args.push(f.display().to_string());
    }
    // Retries with backoff can outlast one request's timeout several times over.
    let budget = search.timeout * (search.max_retries + 1)
        + search.retry_base * ((1u32 << search.max_retries.min(16)) - 1);
    servers.insert(
        SEARCH_SERVER.to_owned(),
        ServerConfig {
            name: SEARCH_SERVER.to_owned(),
            command: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "coogle".to_owned()),
            args,
            env: IndexMap::new(),
            cwd: None,
            env_file: None,
            pass_env: Vec::new(),
            credentials: CredentialsConfig::None,
            max_concurrent: search.max_concurrent,
            call_timeout: budget.max(Duration::from_millis(call_timeout_ms)),
            client_capabilities: json!({}),
            idle_stop: super::DEFAULT_IDLE_STOP,
            stateful: false,
            sharing: super::Sharing::Shared,
            sign_in: None,
            search_path: Vec::new(),
        },
    );
}

/// True when the search server would find a Gemini API key: the environment, the config, or a
/// `.env` file in the working directory or home (what `coogle search-server` reads).
fn search_key_available(config_key: Option<&str>, host: &Host<'_>) -> bool {
    let config = config_key.map(|k| json!({"search": {"apiKey": k}}));
    crate::secret::find_key(
        host.env,
        config.as_ref(),
        &host.cwd,
        host.home.unwrap_or(Path::new("/nonexistent")),
    )
    .is_some()
}

#[cfg(test)]
mod tests {
    use super::super::read::from_value_with;
    use super::super::testing::*;
    use super::*;
    use std::path::PathBuf;

    /// The `search` section: defaults, overrides, and the search upstream it adds when the
    /// config holds a key (with `--config` naming the file it came from).
    #[test]
    fn search_section() {
        let d = from(json!({})).unwrap().search;
        assert_eq!(d, SearchConfig::default());
        assert_eq!(d.model_pro, "gemini-3.1-pro-preview");
        let c = from_value_with(
            json!({"search": {"apiKey": " AIza-config-key ", "apiBaseUrl": "http://127.0.0.1:1/v1/",
                   "models": {"flashLite": "lite-x"}, "timeoutMs": 500, "retryBaseMs": 0,
                   "maxRetries": 1, "maxConcurrent": 2}}),
            Some(PathBuf::from("/etc/coogle.json")),
            &host(),
        )
        .unwrap();
        assert_eq!(c.search.api_key.as_deref(), Some("AIza-config-key"));
        assert_eq!(c.search.api_base_url, "http://127.0.0.1:1/v1");
        assert_eq!(c.search.model_flash_lite, "lite-x");
        assert_eq!(c.search.model_flash, "gemini-3-flash-preview");
        assert_eq!(c.search.timeout, Duration::from_millis(500));
        assert!(!format!("{:?}", c.search).contains("AIza-config-key"));
        let search = &c.servers[SEARCH_SERVER];
        assert_eq!(
            search.args,
            ["search-server", "--config", "/etc/coogle.json"]
        );
        assert_eq!(search.max_concurrent, 2);
        assert_eq!(search.credentials, CredentialsConfig::None);
        // A server the user named `search` is theirs; coogle adds nothing.
        let c = from(
            json!({"servers": {"google": {"command": "g"}, "search": {"command": "mine"}},
                            "search": {"apiKey": "k"}}),
        )
        .unwrap();
        assert_eq!(c.servers[SEARCH_SERVER].command, "mine");
        assert_eq!(
            invalid_detail(json!({"search": {"apiBaseUrl": "ftp://x"}})),
            "search.apiBaseUrl must be an http(s) URL"
        );
        assert_eq!(
            invalid_detail(json!({"search": {"timeoutMs": 0}})),
            "search.timeoutMs must be at least 1"
        );
    }

    /// The default `search` upstream exists exactly when a Gemini API key is found: in the
    /// environment (either variable), the config, or a `.env` in the working directory or home.
    #[test]
    fn default_search_upstream_follows_the_api_key() {
        let dir = tempfile::tempdir().unwrap();
        let (cwd, home) = (dir.path().join("cwd"), dir.path().join("home"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let names = |env: &dyn Fn(&str) -> Option<String>, file: Option<PathBuf>| {
            let host = Host {
                home: Some(&home),
                cwd: cwd.clone(),
                env,
            };
            let c = from_value_with(json!({}), file, &host).unwrap();
            (c.servers.keys().cloned().collect::<Vec<_>>(), c)
        };
        let none = |_: &str| None;
        assert_eq!(
            names(&none, None).0,
            ["google"],
            "no key, no search upstream"
        );

        for var in ["GOOGLE_API_KEY", "GEMINI_API_KEY"] {
            let env = |v: &str| (v == var).then(|| "AIza-from-env".to_owned());
            let (names, c) = names(&env, Some(PathBuf::from("/etc/coogle.json")));
            assert_eq!(names, ["google", "search"], "{var}");
            let search = &c.servers[SEARCH_SERVER];
            assert_eq!(
                search.command,
                std::env::current_exe().unwrap().display().to_string()
            );
            assert_eq!(
                search.args,
                ["search-server", "--config", "/etc/coogle.json"]
            );
            // Four 60 s attempts and 1 + 2 + 4 s of backoff fit in the call timeout.
            assert_eq!(search.call_timeout, Duration::from_secs(4 * 60 + 7));
            assert_eq!(search.max_concurrent, 4);
        }
        let blank = |_: &str| Some("  ".to_owned());
        assert_eq!(
            names(&blank, None).0,
            ["google"],
            "a blank variable is no key"
        );

        std::fs::write(home.join(".env"), "GEMINI_API_KEY=AIza-home\n").unwrap();
        let (names_home, c) = names(&none, None);
        assert_eq!(names_home, ["google", "search"], ".env in home");
        assert_eq!(c.servers[SEARCH_SERVER].args, ["search-server"]);
        std::fs::remove_file(home.join(".env")).unwrap();
        std::fs::write(cwd.join(".env"), "export GOOGLE_API_KEY='AIza-cwd'\n").unwrap();
        assert_eq!(names(&none, None).0, ["google", "search"], ".env in cwd");
    }
}
