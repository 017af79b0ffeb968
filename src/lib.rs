//! coogle: share one stdio MCP server among many AI-agent sessions.
//!
//! One binary, several modes: [`daemon`] (`coogle serve`) owns the upstream children and
//! multiplexes sessions onto them; [`shim`] (`coogle mcp`) is the pump an agent starts;
//! [`cli`] holds the commands a person runs. [`wire`] is the protocol both ends share.
//!
//! Dependencies point one way: `main → cli → {daemon, shim, client, setup, update,
//! search_server} → {wire, config, paths, exec_path, fsutil, crash_point, process, secret,
//! installed, service_manager, error, causes, date, output, logging, terminal, tls, redact,
//! shim_identity} → os`. Nothing in a lower layer imports an upper one, nothing but `cli`
//! imports `setup` or `update`, and [`os`] imports nothing of coogle's: every call into the OS
//! is there, and so is every `unsafe` (the lint below holds the rest of the crate to it).
//! `scripts/module-deps` checks all of it (docs/ARCHITECTURE.md, "Layers").

#![deny(unsafe_code)]

#[cfg(test)]
mod build_flags;
pub(crate) mod causes;
pub mod cli;
pub(crate) mod client;
pub(crate) mod config;
mod crash_point;
pub(crate) mod daemon;
mod date;
mod error;
pub(crate) mod exec_path;
#[cfg(test)]
mod fake_executable;
pub mod fsutil;
mod installed;
pub(crate) mod logging;
#[allow(
    unsafe_code,
    reason = "the one home of unsafe code, each block with its SAFETY note"
)]
pub(crate) mod os;
pub(crate) mod output;
pub(crate) mod paths;
mod process;
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
