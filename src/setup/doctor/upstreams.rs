//! Doctor's check of each upstream in the daemon's `status`: connected, starting, or broken,
//! and whether it waits for a Google sign-in.

use super::Doctor;
use crate::wire::{Status, UpstreamState};

impl Doctor<'_> {
    pub(super) fn upstreams(&mut self, status: &Status) {
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
                    let err = u.last_error.as_deref().unwrap_or("");
                    self.fail(
                        format!("upstream {name} is {state} {err}").trim(),
                        "`coogle logs` shows why; `coogle restart` retries",
                    );
                }
            }
            for s in &u.sign_in {
                self.fail(
                    &format!("upstream {name} waits for a Google sign-in"),
                    &format!("open {} and sign in, then retry the call", s.url),
                );
            }
            if u.sign_in.is_empty() && matches!(u.state, UpstreamState::Ready | UpstreamState::Idle)
            {
                self.ok(&format!("upstream {name}: no Google sign-in pending"));
            }
        }
    }
}
