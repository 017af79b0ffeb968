//! The installer side of coogle: `setup` (`wizard`), `doctor`, `uninstall`, `share` and
//! `unshare`, `generate-plist` and `generate-unit`.
//!
//! Every file the user owns is written through [`crate::fsutil`] (backup, temp file, fsync,
//! re-read, rename, mode kept) and never when it did not parse. Whatever setup changes in a
//! client config is recorded in the `state` file beside config.json, so `uninstall` can undo
//! exactly that and nothing else. Secrets are shown masked (`crate::secret::mask`) and never
//! logged. Nothing here runs in `coogle mcp` or the daemon, and nothing below `cli` imports it.

mod args;
mod claude_cli;
pub mod client_config;
mod config_write;
pub(crate) mod doctor;
mod journal;
mod launch;
mod search_path;
mod service;
pub(crate) mod share;
mod state;
mod test_daemon;
mod ui;
mod uninstall;
mod verify;
mod wizard;

pub use args::{DoctorArgs, SetupArgs, ShareArgs, UninstallArgs, UnshareArgs};
pub use launch::{generate_plist, generate_unit};
pub use share::{share, unshare};
pub use uninstall::uninstall;
pub use wizard::setup;
