//! coogle's integration tests, in one binary (as uv and ripgrep do): each file below owns one
//! behaviour and runs the real `coogle` binary in a sealed environment (see `support`). One
//! binary links the crate once, instead of once per file.

mod support;

mod broken_config;
mod claude_config_patch;
mod claude_json_lock;
mod cli;
mod coogle_tool;
mod distribution;
mod doctor;
mod eras;
mod everything_passthrough;
mod fairness;
mod fake_eras;
mod faults;
mod install_script;
mod instant_start;
mod ipc_abuse;
mod lifecycle;
mod limits;
mod load;
mod minimal_path;
mod multiplex;
mod notifications;
mod on_demand;
mod reconnect;
mod reload;
mod respawn;
mod search_e2e;
mod search_server;
mod secrets;
mod self_update;
mod server_requests;
mod service_files;
mod sessions;
mod setup_claude_cli;
mod setup_search;
mod setup_wizard;
mod setup_yes;
mod share;
mod share_children;
mod sharing;
mod shim_footprint;
mod sign_in;
mod soak;
mod socket_dir_mode;
mod squatting;
mod stop;
mod tasks;
mod third_party;
mod timeout;
mod tls;
mod uninstall;
mod version_handshake;
mod wire_properties;
