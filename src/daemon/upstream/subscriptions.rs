//! Resource subscriptions: which sessions are subscribed to which URI.
//!
//! The child hears the first subscribe and the last unsubscribe of each URI; the sessions in
//! between are answered by the daemon. `notifications/resources/updated` goes only to the
//! sessions subscribed to its URI.

use std::collections::{HashMap, HashSet};

use crate::daemon::SessionId;

#[derive(Default)]
pub(super) struct Subscriptions {
    by_uri: HashMap<String, HashSet<SessionId>>,
}

impl Subscriptions {
    /// Subscribe `session`; true when the child must hear it (the URI's first subscriber).
    pub fn subscribe(&mut self, session: SessionId, uri: &str) -> bool {
        let subscribers = self.by_uri.entry(uri.to_string()).or_default();
        let first = subscribers.is_empty();
        subscribers.insert(session);
        first
    }

    /// Unsubscribe `session`; true when the child must hear it (it was the last subscriber).
    pub fn unsubscribe(&mut self, session: SessionId, uri: &str) -> bool {
        let Some(subscribers) = self.by_uri.get_mut(uri) else {
            return false;
        };
        let was = subscribers.remove(&session);
        if subscribers.is_empty() {
            self.by_uri.remove(uri);
            return was;
        }
        false
    }

    /// Drop a session everywhere; returns the URIs nobody is subscribed to any more.
    pub fn remove_session(&mut self, session: SessionId) -> Vec<String> {
        let mut abandoned = Vec::new();
        self.by_uri.retain(|uri, subs| {
            if subs.remove(&session) && subs.is_empty() {
                abandoned.push(uri.clone());
                return false;
            }
            !subs.is_empty()
        });
        abandoned
    }

    pub fn subscribers(&self, uri: &str) -> Vec<SessionId> {
        self.by_uri
            .get(uri)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The URIs `session` is subscribed to.
    pub fn of_session(&self, session: SessionId) -> Vec<String> {
        self.by_uri
            .iter()
            .filter(|(_, s)| s.contains(&session))
            .map(|(u, _)| u.clone())
            .collect()
    }

    /// Whether any session is subscribed to anything.
    pub fn any(&self) -> bool {
        !self.by_uri.is_empty()
    }

    /// Every URI with a subscriber, to subscribe a new child to.
    pub fn uris(&self) -> Vec<String> {
        self.by_uri.keys().cloned().collect()
    }
}

impl super::Upstream {
    /// `notifications/resources/updated`, from the child directly or through the daemon's own
    /// listen stream: only the sessions subscribed to its URI hear it.
    pub(super) fn notify_resource_subscribers(&mut self, msg: &crate::wire::Message) {
        let uri = msg
            .params_field("uri")
            .and_then(|u| serde_json::from_str::<String>(u.get()).ok())
            .unwrap_or_default();
        let line = msg.to_line();
        for sid in self.subscriptions.subscribers(&uri) {
            self.notify_session(sid, line.clone(), false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_hears_the_first_subscribe_and_the_last_unsubscribe() {
        let mut s = Subscriptions::default();
        assert!(s.subscribe(1, "u"));
        assert!(!s.subscribe(2, "u"));
        assert!(!s.unsubscribe(1, "u"));
        assert!(!s.unsubscribe(1, "u"), "not subscribed any more");
        assert_eq!(s.subscribers("u"), vec![2]);
        assert!(s.unsubscribe(2, "u"));
        assert!(s.uris().is_empty());
        assert!(!s.unsubscribe(3, "never"));
        s.subscribe(4, "a");
        s.subscribe(4, "b");
        s.subscribe(5, "b");
        let mut gone = s.remove_session(4);
        gone.sort();
        assert_eq!(gone, vec!["a".to_string()]);
    }
}
