//! coogle: share one stdio MCP server among many AI-agent sessions.
//!
//! One binary, several modes: [`daemon`] (`coogle serve`) owns the upstream children and
//! multiplexes sessions onto them; [`shim`] (`coogle mcp`) is the pump an agent starts;
//! [`cli`] holds the commands a person runs. [`wire`] is the protocol both ends share.
//!
//! Dependencies point one way: `main → cli → {daemon, shim, client, setup, update,
//! search_server} → {wire, config, paths, peer, exec_path, fsutil, process, procs, secret, installed,
//! service_manager, error, causes, date, output, logging, terminal, tls, shim_identity}`. Nothing in the lower layer imports the upper one, and
//! nothing but `cli` imports `setup` or `update`.

pub(crate) mod causes;
pub mod cli;
pub(crate) mod client;
pub(crate) mod config;
mod crash_point;
pub(crate) mod daemon;
mod date;
mod error;
pub(crate) mod exec_path;
pub mod fsutil;
mod installed;
pub(crate) mod logging;
pub(crate) mod output;
pub(crate) mod paths;
mod peer;
mod process;
pub(crate) mod procs;
mod redact;
pub(crate) mod search_server;
mod secret;
mod service_manager;
pub mod setup;
pub(crate) mod shim;
pub(crate) mod shim_identity;
mod terminal;
pub(crate) mod tls;
pub(crate) mod update;
pub mod wire;
