//! The global `--config` and `--socket` options as the person gave them, and what they come to:
//! which config file, which daemon socket, and which of them a service or client entry must
//! repeat. Commands receive this instead of the parsed command line, so nothing below `cli`
//! depends on clap's types.

use std::path::PathBuf;

use super::{Config, default_path, lenient_socket_path};
use crate::paths;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalPaths {
    /// `--config` (or `COOGLE_CONFIG`).
    pub config: Option<PathBuf>,
    /// `--socket` (or `COOGLE_SOCKET`).
    pub socket: Option<PathBuf>,
}

impl GlobalPaths {
    /// The options as given, made absolute: they are handed to daemons and entries that run
    /// elsewhere (a daemon's working directory is `/`, whoever starts it).
    pub fn new(config: Option<PathBuf>, socket: Option<PathBuf>) -> GlobalPaths {
        let abs = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        GlobalPaths {
            config: config.map(abs),
            socket: socket.map(abs),
        }
    }

    /// The config file: `--config`, else [`default_path`].
    pub fn config_file(&self) -> PathBuf {
        self.config.clone().unwrap_or_else(default_path)
    }

    /// The daemon's socket: `--socket`, else `config`'s `socketPath`, else the default.
    pub fn socket(&self, config: Option<&Config>) -> PathBuf {
        self.socket
            .clone()
            .or_else(|| config.and_then(|c| c.socket_path.clone()))
            .unwrap_or_else(paths::default_socket)
    }

    /// [`GlobalPaths::socket`], loading the config only when `--socket` is not given; a config
    /// that does not load counts as none (the commands that use this must work on a broken
    /// installation).
    pub fn socket_loading_config(&self) -> PathBuf {
        match &self.socket {
            Some(s) => s.clone(),
            None => match Config::load(self.config.as_deref()) {
                Ok(config) => self.socket(Some(&config)),
                Err(_) => self.socket_without_config(),
            },
        }
    }

    /// The socket when the config does not load: `--socket`, else the file's `socketPath` if
    /// the file at least parses (see [`lenient_socket_path`]), else the default.
    pub fn socket_without_config(&self) -> PathBuf {
        self.socket
            .clone()
            .or_else(|| lenient_socket_path(self.config.as_deref()))
            .unwrap_or_else(paths::default_socket)
    }

    /// `--config` and `--socket`, absolute, when they are not the defaults: what the service and
    /// the client entries must pass so they reach the same daemon.
    pub fn non_default(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        let abs = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
        (
            self.config
                .as_ref()
                .map(abs)
                .filter(|c| *c != default_path()),
            self.socket
                .as_ref()
                .map(abs)
                .filter(|s| *s != paths::default_socket()),
        )
    }
}
