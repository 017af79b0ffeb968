//! coogle: share one stdio MCP server among many AI-agent sessions.
//!
//! One binary, several modes: [`daemon`] (`coogle serve`) owns the upstream children and
//! multiplexes sessions onto them; [`shim`] (`coogle mcp`) is the pump an agent starts;
//! [`cli`] holds the commands a person runs. [`wire`] is the protocol both ends share.
//!
//! Dependencies point one way: `main → cli → {daemon, shim, client, setup, update,
//! search_server} → {wire, config, paths, fsutil, process, secret, installed, service_manager,
//! error, date, output, logging, tls}`. Nothing in the lower layer imports the upper one, and
//! nothing but `cli` imports `setup` or `update`.

pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
mod date;
mod error;
pub mod fsutil;
mod installed;
pub mod logging;
pub mod output;
pub mod paths;
mod process;
pub mod search_server;
mod secret;
mod service_manager;
pub mod setup;
pub mod shim;
pub mod tls;
pub mod update;
pub mod wire;
