//! Sign-ins a server asks its user for, read only when the server's own settings say how it
//! asks (`signIn` in its config; workspace-mcp's Google sign-in by default for the `google`
//! server and any server that runs workspace-mcp). Such a server answers a call for an account
//! that is not signed in with a URL after a fixed text, and starts a flow that a second flow
//! for the same account would only replace: so calls that were already waiting when it asked
//! get that same URL from the daemon instead of being forwarded, and every session is told
//! once. The first call that succeeds for the account clears it. The answers of a server
//! without the setting are never read here, whatever they say.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Instant, SystemTime};

use memchr::memmem::Finder;

use super::request::Request;
use crate::config::SignInConfig;
#[cfg(doc)]
use crate::wire::Object;
use crate::wire::{KeyLook, Message};

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

/// This upstream's way of asking (none: nothing is ever pending), and the account ("" when
/// unnamed) → the sign-in the upstream is waiting for.
pub(super) struct SignIns {
    how: Option<How>,
    pending: HashMap<String, SignIn>,
}

/// A [`SignInConfig`], ready for reading raw answers.
struct How {
    /// The marker as it appears inside a JSON string (quotes and backslashes escaped), since
    /// answers are searched as they came, unparsed. Every answer to a call is searched.
    marker: Finder<'static>,
    /// The argument naming the account, and a look for it.
    account_argument: Option<(String, KeyLook)>,
}

impl SignIns {
    pub fn new(config: Option<&SignInConfig>) -> SignIns {
        let how = config.map(|c| How {
            marker: Finder::new(&json_escaped(&c.url_marker)).into_owned(),
            account_argument: c
                .account_argument
                .as_ref()
                .map(|name| (name.clone(), KeyLook::new(name))),
        });
        SignIns {
            how,
            pending: HashMap::new(),
        }
    }

    /// The account a `tools/call` is for, when this upstream asks for sign-ins: its
    /// `accountArgument` ("" when the call names none, or the server has no such argument).
    /// `None` when it never asks: its answers are then not read.
    pub fn account(&self, req: &Request) -> Option<String> {
        let how = self.how.as_ref()?;
        let named = how
            .account_argument
            .as_ref()
            .and_then(|(name, look)| string_field(req, name, look));
        Some(named.unwrap_or_default())
    }

    /// Note what a call's answer says about its account.
    pub fn track(&mut self, account: &str, answer: &Message) -> Change {
        let Some(how) = &self.how else {
            return Change::Nothing;
        };
        match sign_in_url(&how.marker, answer) {
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

    /// The URL to answer call `req` with instead of forwarding it: one queued at `enqueued`,
    /// before the upstream asked its account to sign in.
    pub fn answer_for(&self, req: &Request, enqueued: Instant) -> Option<&str> {
        if self.pending.is_empty() {
            return None;
        }
        self.pending
            .get(&self.account(req)?)
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

/// `text` as it appears inside a JSON string.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or_default()
        .to_owned()
}

/// The sign-in URL in a tool's answer: what follows the marker (after spaces), if it is one.
fn sign_in_url(marker: &Finder, msg: &Message) -> Option<String> {
    if marker.needle().is_empty() {
        return None;
    }
    let text = msg
        .field_json("result")
        .or_else(|| msg.field_json("error"))?
        .get();
    // The marker is text, so where it ends is a character boundary.
    let start = marker.find(text.as_bytes())? + marker.needle().len();
    let url: String = text[start..]
        .trim_start_matches([' ', '\t'])
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\\')
        .collect();
    url.starts_with("http").then_some(url)
}

/// The string value of the call's argument `name`, read in place (see [`Object`]); a repeated
/// key counts with its last value, as the server reads it (Python's `json`, serde_json).
/// `None` when the arguments are no object, have no such field, or its value is no string.
fn string_field(req: &Request, name: &str, look: &KeyLook) -> Option<String> {
    req.argument(name, look)?.string().map(Cow::into_owned)
}

/// The tool result text for a call answered with a pending sign-in.
pub(super) fn call_text(server: &str, url: &str) -> String {
    format!(
        "Sign-in required for the `{server}` server: open {url} in a browser, sign in, then retry the call. (coogle answered this call itself so that no second sign-in flow was started.)"
    )
}

/// The log message every session gets once per new sign-in.
pub(super) fn notice_text(server: &str, url: &str) -> String {
    format!(
        "Sign-in required for the `{server}` server: open {url} in a browser and sign in; calls work again afterwards."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(text: &str) -> Message {
        let line = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}});
        Message::parse(line.to_string().as_bytes()).unwrap()
    }

    fn call(arguments: serde_json::Value) -> Request {
        let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "t", "arguments": arguments}});
        Request::classify(Message::parse(line.to_string().as_bytes()).unwrap())
    }

    #[test]
    fn a_sign_in_is_noticed_once_and_cleared_by_success() {
        let mut s = SignIns::new(Some(&SignInConfig::workspace_mcp()));
        let me = call(json!({"body": {"x": [1, "user_google_email"]}, "user_google_email": "me"}));
        let other = call(json!({"user_google_email": "other"}));
        assert_eq!(s.account(&me).as_deref(), Some("me"));
        let before = Instant::now();
        let ask = answer("Authorization URL: https://accounts.google.com/o?x=1\nthen retry");
        assert_eq!(
            s.track("me", &ask),
            Change::Asked("https://accounts.google.com/o?x=1".into())
        );
        assert_eq!(s.track("me", &ask), Change::Nothing, "same URL: told once");
        assert!(s.answer_for(&me, before).is_some());
        assert!(s.answer_for(&other, before).is_none());
        assert!(
            s.answer_for(&me, Instant::now()).is_none(),
            "queued after: forwarded"
        );
        assert_eq!(s.track("me", &answer("3 messages")), Change::Done);
        assert_eq!(s.track("me", &answer("3 messages")), Change::Nothing);
        assert_eq!(
            s.track("x", &answer("Authorization URL: ftp://no")),
            Change::Nothing
        );
    }

    /// Regression (issue 19): every server's answers were read for workspace-mcp's sign-in.
    #[test]
    fn a_server_without_the_setting_is_never_read() {
        let mut s = SignIns::new(None);
        let req = call(json!({"user_google_email": "me"}));
        assert_eq!(s.account(&req), None);
        let ask = answer("Authorization URL: https://accounts.google.com/o?x=1");
        assert_eq!(s.track("", &ask), Change::Nothing);
        assert_eq!(s.iter().count(), 0);
        assert!(s.answer_for(&req, Instant::now()).is_none());
    }

    /// The account is the one the server reads from the arguments: a repeated key with its
    /// last value (Python's `json`, as workspace-mcp reads it), a key written with an escape
    /// as the key it spells.
    #[test]
    fn the_account_is_the_one_the_server_reads() {
        let user = |args: &str| {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{args}}}}}"#
            );
            let req = Request::classify(Message::parse(line.as_bytes()).unwrap());
            string_field(&req, "user", &KeyLook::new("user"))
        };
        assert_eq!(
            user(r#"{"user":"ada","user":"bob"}"#).as_deref(),
            Some("bob")
        );
        assert_eq!(
            user(r#"{"user":null,"user":"bob"}"#).as_deref(),
            Some("bob")
        );
        assert_eq!(user(r#"{"user":"bob","user":null}"#), None);
        assert_eq!(user(r#"{"us\u0065r":"eve"}"#).as_deref(), Some("eve"));
        assert_eq!(
            user(r#"{"\u0075\u0073\u0065\u0072":"eve"}"#).as_deref(),
            Some("eve")
        );
        assert_eq!(user(r#"{"users":"ada","name":"user"}"#), None);
        assert_eq!(user(r#"{"name":"ada"}"#), None);
        assert_eq!(user(r#"{"user":"a\"b"}"#).as_deref(), Some("a\"b"));
        assert_eq!(user(r#"["user","ada"]"#), None);
        assert_eq!(user(r#""user""#), None);
        assert_eq!(user(r#"{"user":{"name":"ada"}}"#), None);
    }

    #[test]
    fn a_servers_own_marker_and_account_argument() {
        let how = SignInConfig {
            url_marker: "Log in \"here\":".into(),
            account_argument: Some("user".into()),
        };
        let mut s = SignIns::new(Some(&how));
        assert_eq!(
            s.account(&call(json!({"user": "ada"}))).as_deref(),
            Some("ada")
        );
        assert_eq!(
            s.account(&call(json!({"user": 3}))).as_deref(),
            Some(""),
            "not a string: unnamed"
        );
        assert_eq!(s.account(&call(json!({}))).as_deref(), Some(""));
        assert_eq!(s.account(&call(json!([1]))).as_deref(), Some(""));
        assert_eq!(
            s.track("ada", &answer("Authorization URL: https://a.example/x")),
            Change::Nothing,
            "another server's marker"
        );
        assert_eq!(
            s.track(
                "ada",
                &answer("Log in \"here\":   https://a.example/x?y=1 now")
            ),
            Change::Asked("https://a.example/x?y=1".into())
        );
        // Without an account argument, the server has one account: "".
        let one = SignIns::new(Some(&SignInConfig {
            url_marker: "at".into(),
            account_argument: None,
        }));
        assert_eq!(
            one.account(&call(json!({"user": "ada"}))).as_deref(),
            Some("")
        );
    }
}
