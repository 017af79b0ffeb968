//! Doctor's check of each upstream in the daemon's `status`: connected, starting, or broken,
//! and whether it waits for a Google sign-in.

use super::Doctor;
use crate::config::Config;
use crate::wire::{Status, UpstreamState};

/// What the daemon's "see doctor" pointer adds to a child's error (DESIGN: status names where
/// the fix is); inside doctor, the fix is on the next line.
const SEE_DOCTOR: &str = "; `coogle doctor` says how to fix it";

/// An upstream whose tools may wait for a sign-in: the daemon watches for one when the
/// server's `signIn` setting says how it asks (workspace-mcp's Google sign-in by default; see
/// [`crate::config::SignInConfig::guess`]). Without a readable config, the one named `google`.
fn signs_in(name: &str, config: Option<&Config>) -> bool {
    config
        .and_then(|c| c.servers.get(name))
        .map_or(name == "google", |s| s.sign_in.is_some())
}

impl Doctor<'_> {
    pub(super) fn upstreams(&mut self, status: &Status, config: Option<&Config>) {
        for u in &status.upstreams {
            let (name, state) = (&u.name, u.state.as_str());
            match u.state {
                UpstreamState::Ready => {
                    let tools = u.tools.map_or_else(|| "?".to_string(), |t| t.to_string());
                    self.ok(&format!("upstream {name} connected ({tools} tools)"))
                }
                UpstreamState::Idle => self.ok(&format!(
                    "upstream {name} is idle (its child starts on the first call)"
                )),
                // A moment after login or a restart: not broken, just not there yet.
                UpstreamState::Starting | UpstreamState::Initializing => self.warn(
                    &format!("upstream {name} is {state}"),
                    "run `coogle doctor` again in a few seconds",
                ),
                _ => {
                    // "failed", "restarting", "stopping", "stopped": each reads as a state.
                    let text = match u.last_error.as_deref() {
                        Some(err) => format!(
                            "upstream {name} ({state}): {}",
                            err.trim_end_matches(SEE_DOCTOR)
                        ),
                        None => format!("upstream {name} ({state})"),
                    };
                    self.fail(
                        &text,
                        &format!(
                            "`coogle logs` shows why; `coogle restart --server {name}` retries"
                        ),
                    );
                }
            }
            for s in &u.sign_in {
                self.fail(
                    &format!("upstream {name} waits for a Google sign-in"),
                    &format!("open {} and sign in, then retry the call", s.url),
                );
            }
            if u.sign_in.is_empty()
                && matches!(u.state, UpstreamState::Ready | UpstreamState::Idle)
                && signs_in(name, config)
            {
                self.ok(&format!("upstream {name}: no Google sign-in pending"));
            }
        }
    }
}
