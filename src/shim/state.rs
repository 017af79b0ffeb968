//! The session as the shim knows it (see [`State`]): what is in flight, the handshake to replay
//! to a new daemon, and what waits for it. Pure bookkeeping on lines, plus the non-blocking
//! write side of the socket; the pump decides when anything is read.

use std::io::Write;
use std::os::unix::net::UnixStream;

use foldhash::{HashMap, HashMapExt};
use serde_json::value::RawValue;

use crate::wire::answer::{self, Daemon};
use crate::wire::{self, Head, Json, Kind, Message, id_key, id_key_of, rpc_code};

use super::{KEEP_LINE_BUFFER, refusal, reuse, write_client};

/// How the daemon's last line to a session it disconnects starts (see
/// `wire::DISCONNECTED_NOTICE`): checked as a prefix, so other lines cost nothing.
const DISCONNECTED_PREFIX: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/coogle/disconnected\"";

/// The daemon's last line before an upgrade in place (see `wire::HANDOVER_NOTICE`).
const HANDOVER_PREFIX: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/coogle/handover\"";

/// Lines from the client buffered while the daemon is away; past this, requests are refused.
const MAX_BUFFERED: usize = 1000;

pub(super) struct InFlight {
    id: Box<RawValue>,
    is_call: bool,
    /// A first-page `tools/list`: its answer is what the client believes the tools are.
    is_tools_list: bool,
    /// Written to a daemon. A request still buffered for after the reconnect was not, and
    /// must not be failed when the daemon goes away: it is replayed to the next one.
    pub(super) sent: bool,
    /// The line as it was written, and its place among the client's requests: after an
    /// upgrade in place, what the old daemon did not answer is sent again, in order.
    line: Vec<u8>,
    seq: u64,
}

/// What the shim knows of the session: what is in flight, the handshake to replay, and what
/// waits for the next daemon.
pub(super) struct State {
    /// The socket's write side (non-blocking); `None` while reconnecting.
    pub(super) writer: Option<UnixStream>,
    /// Bytes for the daemon its socket has not taken yet. While there are any, stdin is left
    /// unread: the client waits, and the daemon's answers keep flowing.
    pub(super) out: Vec<u8>,
    /// The client's initialize request, replayed on reconnect.
    pub(super) initialize: Option<Vec<u8>>,
    pub(super) initialized: bool,
    /// Hashed with foldhash (seeded per process), not SipHash: two lookups per call.
    pub(super) in_flight: HashMap<String, InFlight>,
    /// The id of a replayed initialize whose answer the client must not see.
    pub(super) swallow: Option<String>,
    pub(super) buffered: Vec<Vec<u8>>,
    pub(super) reconnects: u64,
    /// Hash of the last tool list the client received.
    pub(super) last_tools: Option<u64>,
    /// The id of the shim's own `tools/list` after a reconnect.
    pub(super) probe: Option<String>,
    /// Why the daemon closed this connection, when it said (it disconnects a session that
    /// leaves too much unread); told to the agent instead of "the daemon went away".
    disconnect_reason: Option<String>,
    /// Why the daemon cannot be reached, while that is so for a reason retrying does not cure
    /// (see [`is_permanent`](super::is_permanent)): requests are answered with it at once instead of waiting.
    pub(super) refusing: Option<String>,
    /// stdin closed: the client will send nothing more. The shim answers what it was asked
    /// (as a server run directly does) and exits once nothing is pending.
    pub(super) closing: bool,
    /// The daemon said it hands over in place: what it did not answer, it did not start.
    pub(super) handover: bool,
    next_seq: u64,
    /// A large request's copy was let go with its answer: the heap has pages to hand back.
    pub(super) large_freed: bool,
}

fn hash_of(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl State {
    pub(super) fn new(writer: Option<UnixStream>) -> State {
        State {
            writer,
            out: Vec::new(),
            initialize: None,
            initialized: false,
            in_flight: HashMap::new(),
            swallow: None,
            buffered: Vec::new(),
            reconnects: 0,
            last_tools: None,
            probe: None,
            disconnect_reason: None,
            refusing: None,
            closing: false,
            handover: false,
            next_seq: 0,
            large_freed: false,
        }
    }

    /// Note what a client line is before it goes to the daemon; returns the key of the request
    /// it starts, if any.
    fn observe_client(&mut self, line: &[u8]) -> Option<String> {
        // The routing fields borrowed from the line: this runs on every line, and copying the
        // whole message into a `Message` was most of the shim's work per call.
        let Ok(msg) = Head::parse(line) else {
            return None;
        };
        match msg.kind() {
            Kind::Request => {
                let method = msg.method().unwrap_or_default();
                if method == "initialize" {
                    self.initialize = Some(line.to_vec());
                }
                if let Some(id) = msg.id() {
                    let is_call = method == "tools/call";
                    let is_tools_list = method == "tools/list" && !has_cursor(msg.params());
                    self.next_seq += 1;
                    let entry = InFlight {
                        id: id.to_raw(),
                        is_call,
                        is_tools_list,
                        sent: false,
                        line: Vec::new(),
                        seq: self.next_seq,
                    };
                    let key = id_key_of(id.get());
                    self.in_flight.insert(key.clone(), entry);
                    return Some(key);
                }
            }
            Kind::Notification => match msg.method() {
                Some("notifications/initialized") => self.initialized = true,
                Some("notifications/cancelled") => {
                    if let Some(req) = Message::parse(line)
                        .ok()
                        .and_then(|m| m.params_field("requestId"))
                    {
                        self.in_flight.remove(&id_key(&req));
                    }
                }
                _ => {}
            },
            Kind::Response => {}
        }
        None
    }

    /// Note a daemon line; false when the client must not see it.
    pub(super) fn observe_daemon(&mut self, line: &[u8]) -> bool {
        if line.starts_with(HANDOVER_PREFIX) {
            self.handover = true;
            return false;
        }
        if line.starts_with(DISCONNECTED_PREFIX) {
            self.disconnect_reason = Message::parse(line)
                .ok()
                .and_then(|m| m.params_field("reason"))
                .and_then(|r| serde_json::from_str::<String>(r.get()).ok());
            return false;
        }
        if self.in_flight.is_empty() && self.swallow.is_none() && self.probe.is_none() {
            return true;
        }
        // The daemon's lines are JSON it wrote: which request one answers is found without a
        // parse (see `wire::answer`); what does not walk is parsed, as it always was.
        let key = match answer::from_daemon(line) {
            Some(Daemon::Answer { id }) => id_key_of(id),
            Some(Daemon::Other) => return true,
            None => match Head::parse(line) {
                Ok(msg) if msg.kind() == Kind::Response => match msg.id() {
                    Some(id) => id_key_of(id.get()),
                    None => return true,
                },
                _ => return true,
            },
        };
        if self.swallow.as_deref() == Some(key.as_str()) {
            self.swallow = None;
            return false;
        }
        // Only a tool list's answer is read further (rarely): parsed then.
        let result_hash = || {
            Head::parse(line)
                .ok()
                .and_then(|msg| msg.result().map(|r| hash_of(r.get())))
        };
        if self.probe.as_deref() == Some(key.as_str()) {
            self.probe = None;
            let now = result_hash();
            if now.is_some() && now != self.last_tools {
                self.last_tools = now;
                write_client(&wire::notification_line(
                    "notifications/tools/list_changed",
                    None,
                ));
            }
            return false;
        }
        if let Some(entry) = self.in_flight.remove(&key) {
            self.large_freed |= entry.line.len() > KEEP_LINE_BUFFER;
            if entry.is_tools_list {
                self.last_tools = result_hash();
            }
        }
        true
    }

    /// Requests the client is still owed an answer for: sent to a daemon, or buffered for the
    /// next one.
    fn pending(&self) -> usize {
        self.in_flight.len()
    }

    /// After stdin closed, exit once every request is answered.
    pub(super) fn exit_if_done(&self) {
        if self.done() {
            tracing::debug!("stdin closed and every request answered; exiting");
            std::process::exit(0);
        }
    }

    /// stdin closed, every request answered, and every line the client wrote taken by the
    /// daemon (a last notification too).
    pub(super) fn done(&self) -> bool {
        self.closing && self.pending() == 0 && self.out.is_empty()
    }

    /// Answer the requests buffered for a daemon that cannot be reached, with why: a
    /// reconnect that fails for a reason retrying does not cure (a broken config.json, an
    /// upstream the daemon does not have) must not leave the agent waiting in silence.
    pub(super) fn refuse_buffered(&mut self, text: &str) {
        for line in std::mem::take(&mut self.buffered) {
            let Ok(msg) = Message::parse(line.trim_ascii_end()) else {
                continue;
            };
            if let Some(id) = msg.id()
                && let Some(p) = self.in_flight.remove(&id_key(id))
            {
                write_client(&refusal(&p.id, p.is_call, text));
            }
        }
    }

    /// Answer every request still owed with `text`, in the order the client sent them: those
    /// buffered for the next daemon, and those kept to send again after a hand-over.
    pub(super) fn refuse_everything_owed(&mut self, text: &str) {
        self.buffered.clear();
        let mut owed: Vec<InFlight> = self.in_flight.drain().map(|(_, p)| p).collect();
        owed.sort_by_key(|p| p.seq);
        for p in owed {
            write_client(&refusal(&p.id, p.is_call, text));
        }
    }

    /// The connection ended: after a hand-over in place, what the old daemon did not answer is
    /// sent again to the new one (it started none of it); otherwise it is answered with an
    /// error.
    pub(super) fn connection_lost(&mut self) {
        if std::mem::take(&mut self.handover) {
            self.resend_in_flight();
        } else {
            self.fail_in_flight();
        }
    }

    /// Put every request sent to the old daemon back in front of what is buffered, in the
    /// order the client sent them, for the new daemon.
    fn resend_in_flight(&mut self) {
        let mut sent: Vec<&mut InFlight> = self.in_flight.values_mut().filter(|p| p.sent).collect();
        sent.sort_by_key(|p| p.seq);
        let mut lines = Vec::with_capacity(sent.len());
        for p in sent {
            p.sent = false;
            // A copy: a second hand-over before the answer sends it again.
            lines.push(p.line.clone());
        }
        if !lines.is_empty() {
            tracing::info!(
                requests = lines.len(),
                "the daemon handed over; sending what it did not answer to the new one"
            );
        }
        lines.append(&mut self.buffered);
        self.buffered = lines;
    }

    /// Answer every request the daemon took with it (not those still buffered: they go to the
    /// next daemon).
    fn fail_in_flight(&mut self) {
        let text = match self.disconnect_reason.take() {
            Some(reason) => format!("{reason}; the session reconnects, so retry"),
            None => {
                "coogle: the daemon went away during this request; it is being restarted, so retry"
                    .to_string()
            }
        };
        let gone: Vec<String> = self
            .in_flight
            .iter()
            .filter(|(_, p)| p.sent)
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            let Some(p) = self.in_flight.remove(&key) else {
                continue;
            };
            write_client(&refusal(&p.id, p.is_call, &text));
        }
    }

    /// Send a client line now, or keep it (taking it from `line`) for after the reconnect. A
    /// line sent is left for the caller to clear, so its buffer serves the next line.
    pub(super) fn forward(&mut self, line: &mut Vec<u8>) {
        let key = self.observe_client(line);
        line.push(b'\n');
        if let Some(p) = key.as_ref().and_then(|k| self.in_flight.get_mut(k)) {
            p.line = line.clone();
        }
        if self.send(line) {
            if let Some(p) = key.and_then(|k| self.in_flight.get_mut(&k)) {
                p.sent = true;
            }
            return;
        }
        if let Some(text) = &self.refusing {
            // Nothing to wait for: say why now (the reconnect keeps trying meanwhile).
            if let Some(p) = key.and_then(|k| self.in_flight.remove(&k)) {
                write_client(&refusal(&p.id, p.is_call, text));
            }
            return;
        }
        if self.buffered.len() < MAX_BUFFERED {
            self.buffered.push(std::mem::take(line));
        } else if let Ok(m) = Message::parse(line.trim_ascii_end())
            && let Some(id) = m.id()
        {
            self.in_flight.remove(&id_key(id));
            let text = "coogle: the daemon is restarting and too much is waiting; retry shortly";
            write_client(&wire::error_line(
                Some(id),
                rpc_code::UPSTREAM_UNAVAILABLE,
                text,
            ));
        }
    }

    /// Write `bytes` to the daemon, or as much as its socket takes now, keeping the rest for
    /// [`State::flush_out`]; false when there is no daemon to write to.
    pub(super) fn send(&mut self, bytes: &[u8]) -> bool {
        let Some(w) = &mut self.writer else {
            return false;
        };
        let mut rest = bytes;
        if self.out.is_empty() {
            match write_some(w, rest) {
                Ok(n) => rest = &rest[n..],
                Err(_) => {
                    self.lose_writer();
                    return false;
                }
            }
        }
        self.out.extend_from_slice(rest);
        true
    }

    /// The daemon's socket can take more: write what waits.
    pub(super) fn flush_out(&mut self) {
        let Some(w) = &mut self.writer else {
            return;
        };
        match write_some(w, &self.out) {
            Ok(n) => {
                self.out.drain(..n);
                if self.out.is_empty() {
                    reuse(&mut self.out);
                }
            }
            Err(_) => self.lose_writer(),
        }
    }

    /// The connection to the daemon is gone (or going): what it did not take is dropped with
    /// it, and the requests in it are answered as the connection's are (see
    /// [`State::connection_lost`]). Reading the socket notices the end too and reconnects.
    pub(super) fn lose_writer(&mut self) {
        self.writer = None;
        self.out = Vec::new();
    }
}

/// Write as much of `bytes` as a non-blocking socket takes now.
pub(super) fn write_some(w: &mut UnixStream, bytes: &[u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < bytes.len() {
        match w.write(&bytes[done..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Whether a request's params name a `cursor` (a later page of a list).
fn has_cursor(params: Option<Json<'_>>) -> bool {
    params
        .and_then(Json::object)
        .is_some_and(|p| p.contains_key("cursor"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::raw;

    fn state() -> State {
        let mut st = State::new(None);
        st.initialized = true;
        st
    }

    fn sent_request(id: &str) -> InFlight {
        InFlight {
            id: raw(id),
            is_call: false,
            is_tools_list: false,
            sent: true,
            line: Vec::new(),
            seq: 0,
        }
    }

    /// An upgrade in place: the daemon said it hands over, then closed. What it did not
    /// answer it did not start, so it is sent again to the new daemon, in the client's order,
    /// and nothing is failed; an answered request is not sent again.
    #[test]
    fn after_a_hand_over_unanswered_requests_go_to_the_new_daemon_in_order() {
        let (ours, mut daemon) = UnixStream::pair().unwrap();
        let mut st = State::new(Some(ours));
        st.initialized = true;
        for i in 0..3 {
            st.forward(
                &mut format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{}}}}"#)
                    .into_bytes(),
            );
        }
        assert!(st.observe_daemon(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        let notice = wire::notification_line(wire::HANDOVER_NOTICE, None);
        assert!(
            !st.observe_daemon(notice.trim_ascii_end()),
            "not for the client"
        );
        st.writer = None;
        st.forward(&mut br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#.to_vec());
        st.connection_lost();
        let ids: Vec<String> = st
            .buffered
            .iter()
            .map(|l| {
                Message::parse(l.trim_ascii_end())
                    .unwrap()
                    .id()
                    .unwrap()
                    .get()
                    .to_string()
            })
            .collect();
        assert_eq!(ids, ["0", "2", "3"]);
        assert_eq!(st.pending(), 3, "nothing was failed");
        // The old daemon did get the first three.
        drop(st);
        let mut got = String::new();
        std::io::Read::read_to_string(&mut daemon, &mut got).unwrap();
        assert_eq!(got.lines().count(), 3);
        // Without the notice, what was sent is failed as before.
        let mut st = state();
        st.in_flight.insert(r#""x""#.into(), sent_request("x"));
        st.connection_lost();
        assert_eq!(st.pending(), 0);
    }

    /// The daemon's last line to a session it disconnects is not passed on, and its reason is
    /// what the agent reads instead of "the daemon went away".
    #[test]
    fn a_disconnect_says_why() {
        let mut st = state();
        let notice = wire::notification_line(
            wire::DISCONNECTED_NOTICE,
            Some(&serde_json::json!({"reason": "coogle disconnected this session: x"})),
        );
        assert!(notice.starts_with(DISCONNECTED_PREFIX));
        assert!(!st.observe_daemon(notice.trim_ascii_end()));
        assert!(
            st.disconnect_reason
                .as_deref()
                .unwrap()
                .contains("disconnected this session")
        );
        st.in_flight.insert(r#""q""#.into(), sent_request("q"));
        st.fail_in_flight();
        assert!(st.disconnect_reason.is_none(), "told once");
    }

    /// Regression (a flaky `reconnect` test under load): a request buffered while the daemon
    /// was gone was answered with "the daemon went away" when the reader noticed the loss a
    /// moment later, and then answered again after the replay.
    #[test]
    fn a_buffered_request_is_not_failed_when_the_daemon_goes_away() {
        let mut st = state();
        st.forward(
            &mut br#"{"jsonrpc":"2.0","id":"q0","method":"tools/call","params":{}}"#.to_vec(),
        );
        assert_eq!(st.buffered.len(), 1);
        assert!(!st.in_flight[r#""q0""#].sent);
        st.fail_in_flight();
        assert!(
            st.in_flight.contains_key(r#""q0""#),
            "the buffered request was failed"
        );

        // One that had been written is failed (and removed).
        st.in_flight.insert(r#""q1""#.into(), sent_request("q1"));
        st.fail_in_flight();
        assert!(!st.in_flight.contains_key(r#""q1""#));
        assert!(st.in_flight.contains_key(r#""q0""#));
    }
}
