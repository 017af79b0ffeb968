//! Doctor's check of each upstream in the daemon's `status`: connected, starting, or broken,
//! and whether it waits for a Google sign-in. Moved here as it was: it still reads the status
//! JSON by key, until the typed `wire::Status` replaces these reads.

use serde_json::Value;

use super::Doctor;

impl Doctor<'_> {
    pub(super) fn upstreams(&mut self, status: &Value) {
        for u in status["upstreams"].as_array().into_iter().flatten() {
            let name = u["name"].as_str().unwrap_or("?");
            let state = u["state"].as_str().unwrap_or("?");
            if state == "ready" {
                self.ok(&format!("upstream {name} connected ({} tools)", u["tools"]));
            } else if matches!(state, "starting" | "initializing") {
                // A moment after login or a restart: not broken, just not there yet.
                self.warn(
                    &format!("upstream {name} is {state}"),
                    "run `coogle doctor` again in a few seconds",
                );
            } else {
                let err = u["lastError"].as_str().unwrap_or("");
                self.fail(
                    format!("upstream {name} is {state} {err}").trim(),
                    "`coogle logs` shows why; `coogle restart` retries",
                );
            }
            let pending: Vec<&Value> = u["signIn"].as_array().into_iter().flatten().collect();
            for s in &pending {
                self.fail(
                    &format!("upstream {name} waits for a Google sign-in"),
                    &format!(
                        "open {} and sign in, then retry the call",
                        s["url"].as_str().unwrap_or("the sign-in link")
                    ),
                );
            }
            if pending.is_empty() && state == "ready" {
                self.ok(&format!("upstream {name}: no Google sign-in pending"));
            }
        }
    }
}
