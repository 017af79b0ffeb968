//! Google sign-in awareness: workspace-mcp answers a call for an account that is not signed in
//! with an authorization URL and starts a local OAuth flow. A second flow for the same account
//! would only replace the first, so calls that were already waiting when the upstream asked for
//! a sign-in get that same URL from the daemon instead of being forwarded, and the daemon tells
//! every session once. The first call that succeeds for the account clears it.

use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use crate::wire::Message;

/// What workspace-mcp writes before the URL of a sign-in flow it started.
const SIGN_IN_MARKER: &str = "Authorization URL: ";

/// A sign-in the upstream asked for and the user has not completed yet.
pub(super) struct SignIn {
    pub url: String,
    /// When it was asked for: calls queued before this get the URL without being forwarded.
    pub since: Instant,
    pub at: SystemTime,
}

/// What a call's answer meant for its account's sign-in.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// A sign-in is now pending, for a URL the sessions have not been told about.
    Asked(String),
    /// The account works again.
    Done,
    Nothing,
}

/// Google account ("" when unnamed) → the sign-in the upstream is waiting for.
#[derive(Default)]
pub(super) struct SignIns {
    pending: HashMap<String, SignIn>,
}

impl SignIns {
    /// Note what a call's answer says about its account.
    pub fn track(&mut self, account: &str, answer: &Message) -> Change {
        match sign_in_url(answer) {
            Some(url) => {
                let fresh = self.pending.get(account).is_none_or(|s| s.url != url);
                self.pending.insert(
                    account.to_string(),
                    SignIn {
                        url: url.clone(),
                        since: Instant::now(),
                        at: SystemTime::now(),
                    },
                );
                if fresh {
                    Change::Asked(url)
                } else {
                    Change::Nothing
                }
            }
            None if !answer.is_error_response() && self.pending.remove(account).is_some() => {
                Change::Done
            }
            None => Change::Nothing,
        }
    }

    /// The URL to answer a call with instead of forwarding it: one queued at `enqueued` for
    /// `account`, before the upstream asked that account to sign in.
    pub fn answer_for(&self, account: &str, enqueued: Instant) -> Option<&str> {
        self.pending
            .get(account)
            .filter(|s| enqueued <= s.since)
            .map(|s| s.url.as_str())
    }

    pub fn clear(&mut self) {
        self.pending.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &SignIn)> {
        self.pending.iter()
    }
}

/// The sign-in URL in a tool's answer, if the upstream started a Google sign-in flow.
fn sign_in_url(msg: &Message) -> Option<String> {
    let text = msg.field("result").or_else(|| msg.field("error"))?.get();
    let start = text.find(SIGN_IN_MARKER)? + SIGN_IN_MARKER.len();
    let url: String = text[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\\')
        .collect();
    url.starts_with("http").then_some(url)
}

/// The tool result text for a call answered with a pending sign-in.
pub(super) fn call_text(server: &str, url: &str) -> String {
    format!(
        "Google sign-in required for the `{server}` server: open {url} in a browser, sign in, then retry the call. (coogle answered this call itself so that no second sign-in flow was started.)"
    )
}

/// The log message every session gets once per new sign-in.
pub(super) fn notice_text(server: &str, url: &str) -> String {
    format!(
        "Google sign-in required for the `{server}` server: open {url} in a browser and sign in; calls work again afterwards."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Message {
        let line = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}});
        Message::parse(line.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_sign_in_is_noticed_once_and_cleared_by_success() {
        let mut s = SignIns::default();
        let before = Instant::now();
        let ask = answer("Authorization URL: https://accounts.google.com/o?x=1\nthen retry");
        assert_eq!(
            s.track("me", &ask),
            Change::Asked("https://accounts.google.com/o?x=1".into())
        );
        assert_eq!(s.track("me", &ask), Change::Nothing, "same URL: told once");
        assert!(s.answer_for("me", before).is_some());
        assert!(s.answer_for("other", before).is_none());
        assert!(
            s.answer_for("me", Instant::now()).is_none(),
            "queued after: forwarded"
        );
        assert_eq!(s.track("me", &answer("3 messages")), Change::Done);
        assert_eq!(s.track("me", &answer("3 messages")), Change::Nothing);
        assert_eq!(
            s.track("x", &answer("Authorization URL: ftp://no")),
            Change::Nothing
        );
    }
}
