//! `subscriptions/listen` (2026-07-28): the streams through which a 2026-07-28 child sends list
//! changes and resource updates, each notification tagged with the listen request's id.
//!
//! A 2026-07-28 session's own listen is forwarded like any request (under the daemon's id, and
//! with no deadline: it lasts as long as the session wants), and what the child tags with that
//! id goes to that session only, retagged with the session's own id. The daemon also holds one
//! listen of its own on a 2026-07-28 child: to hear that the tools changed (its cache), and to
//! serve handshake-era sessions, which expect untagged `list_changed` notifications and
//! subscribe to resources with `resources/subscribe`. That listen covers every URI a
//! handshake-era session subscribed to, and is replaced when that set changes.

use serde_json::json;
use serde_json::value::RawValue;

use super::era::{Era, META_SUBSCRIPTION};
use super::request::Request;
use super::{Internal, Origin, Upstream};
use crate::daemon::SessionId;
use crate::wire::{self, Message};

/// What a session's listen asked to hear, as far as the daemon must know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ListenFilter {
    /// `notifications.toolsListChanged`: the daemon tells it when a revalidation found the
    /// tools it was served from the cache had changed.
    pub tools: bool,
}

impl ListenFilter {
    pub fn of(req: &Request) -> ListenFilter {
        let tools = req
            .msg
            .params_field("notifications")
            .and_then(|n| serde_json::from_str::<serde_json::Value>(n.get()).ok())
            .and_then(|n| n.get("toolsListChanged").and_then(|t| t.as_bool()))
            .unwrap_or(false);
        ListenFilter { tools }
    }
}

impl Upstream {
    /// Open (or replace) the daemon's own listen on a 2026-07-28 child.
    pub(super) fn open_own_listen(&mut self) {
        if let Some(old) = self.own_listen.take()
            && self.inflight.remove(old).is_some()
        {
            self.to_child(wire::notification_line(
                "notifications/cancelled",
                Some(&json!({"requestId": old, "reason": "replaced"})),
            ));
        }
        let params = json!({"notifications": {
            "toolsListChanged": true,
            "promptsListChanged": true,
            "resourcesListChanged": true,
            "resourceSubscriptions": self.subscriptions.uris(),
        }});
        let uid = self.send_internal(Internal::Listen, "subscriptions/listen", &params);
        self.own_listen = Some(uid);
    }

    /// A notification the child tagged with a subscription id.
    pub(super) fn on_tagged(&mut self, tag: &RawValue, method: &str, msg: &mut Message) {
        let Ok(uid) = serde_json::from_str::<u64>(tag.get()) else {
            return;
        };
        if self.own_listen == Some(uid) {
            self.on_own_listen(method, msg);
            return;
        }
        let Some(p) = self.inflight.get(uid) else {
            return;
        };
        if let (Some(_), Origin::Session { id, client_id }) = (&p.listen, &p.origin) {
            let (sid, client_id) = (*id, client_id.clone());
            msg.set_meta_fields(vec![(META_SUBSCRIPTION, client_id)]);
            self.notify_session(sid, msg.to_line(), method.ends_with("/list_changed"));
        }
    }

    /// What the daemon's own listen hears: its cache's business, and what handshake-era
    /// sessions would have heard from a handshake-era child.
    fn on_own_listen(&mut self, method: &str, msg: &mut Message) {
        msg.remove_meta_field(META_SUBSCRIPTION);
        match method {
            "notifications/tools/list_changed" => {
                self.cache.invalidate_tools();
                self.refresh_tools();
                self.broadcast(&msg.to_line(), true);
            }
            "notifications/prompts/list_changed" | "notifications/resources/list_changed" => {
                self.broadcast(&msg.to_line(), true)
            }
            "notifications/resources/updated" => {
                self.notify_resource_subscribers(msg);
            }
            _ => {}
        }
    }

    /// Tell sessions the tool list changed: handshake-era sessions with a plain notification,
    /// and, with `to_listens`, 2026-07-28 sessions through each of their listens that asked.
    pub(super) fn announce_tools_changed(&mut self, to_listens: bool) {
        let changed = wire::notification_line("notifications/tools/list_changed", None);
        self.broadcast(&changed, true);
        if !to_listens {
            return;
        }
        let listens: Vec<(SessionId, Box<RawValue>)> = self
            .inflight
            .listens()
            .filter(|(_, f)| f.tools)
            .map(|(origin, _)| origin)
            .collect();
        for (sid, listen_id) in listens {
            let params = json!({"_meta": {META_SUBSCRIPTION: listen_id}});
            let line = wire::notification_line("notifications/tools/list_changed", Some(&params));
            self.notify_session(sid, line, true);
        }
    }

    /// The child ended one of its requests (a subscription it tore down): tell the session
    /// that owns it, under its own id.
    pub(super) fn on_child_cancelled_listen(&mut self, uid: u64, msg: &mut Message) -> bool {
        let is_listen = self.inflight.get(uid).is_some_and(|p| p.listen.is_some());
        if !is_listen {
            return false;
        }
        if let Some(p) = self.inflight.remove(uid)
            && let Origin::Session { id, client_id } = p.origin
        {
            msg.set_params_field("requestId", client_id);
            self.send_to_session(id, msg.to_line());
        }
        true
    }

    /// Whether handshake-era sessions are served through the daemon's own listen.
    pub(super) fn child_is_modern(&self) -> bool {
        self.life.is_ready() && self.cache.era == Some(Era::Modern)
    }
}
