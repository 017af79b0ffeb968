//! coogle: share one stdio MCP server among many AI-agent sessions.
//!
//! One binary, several modes: [`daemon`] (`coogle serve`) owns the upstream children and
//! multiplexes sessions onto them; [`shim`] (`coogle mcp`) is the pump an agent starts;
//! [`cli`] holds the commands a person runs. [`wire`] is the protocol both ends share.

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
