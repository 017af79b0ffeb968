//! Input rounds (2026-07-28 "multi round-trip requests") for handshake-era sessions.
//!
//! A 2026-07-28 child that needs something from the client (an elicitation, a sampling, the
//! roots) answers the call with an `input_required` result, and the client retries the call with
//! the answers. A handshake-era client knows only the older way: the server sends it requests.
//! So for such a session the daemon turns each input request into a request to that session
//! (under the daemon's own id, answerable by that session only), collects the answers, and
//! retries the call itself; the session sees one call and one answer, under its own id. A
//! 2026-07-28 session gets the `input_required` result as it is and retries on its own.
//!
//! Nothing here is ever sent to another session: a round belongs to the session whose call it
//! is, and ends with that session (or its cancel of the call).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde_json::json;
use serde_json::value::RawValue;

use super::inflight::{Pending, Retry};
use super::request::Request;
use super::server_requests::Target;
use super::{Origin, Upstream};
use crate::daemon::SessionId;
use crate::wire::{self, ErrorCode, Message, Object, id_key, raw};

/// How many times one call may ask for input before the daemon gives up on it.
pub(super) const MAX_ROUNDS: u32 = 10;

/// One call waiting for its session's answers to the child's input requests.
pub(super) struct Round {
    session: SessionId,
    /// The id the session gave the call.
    client_id: Box<RawValue>,
    is_call: bool,
    retry: Retry,
    request_state: Option<Box<RawValue>>,
    responses: crate::wire::Fields,
    /// The daemon's ids of the input requests still unanswered.
    waiting: Vec<Box<RawValue>>,
    /// A round with nothing to ask (state only) is retried at this time.
    retry_at: Option<Instant>,
}

#[derive(Default)]
pub(super) struct Rounds {
    by_id: HashMap<u64, Round>,
    next: u64,
}

impl Rounds {
    pub fn next_due(&self) -> Option<Instant> {
        self.by_id.values().filter_map(|r| r.retry_at).min()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn of_session(&self, sid: SessionId) -> usize {
        self.by_id.values().filter(|r| r.session == sid).count()
    }
}

/// The parts of an `input_required` result.
#[derive(serde::Deserialize)]
struct InputRequired {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(rename = "inputRequests", default)]
    input_requests: IndexMap<String, InputRequest>,
    #[serde(rename = "requestState", default)]
    request_state: Option<Box<RawValue>>,
}

#[derive(serde::Deserialize)]
struct InputRequest {
    method: String,
    #[serde(default)]
    params: Option<Box<RawValue>>,
}

/// Whether an answer is an `input_required` result.
pub(super) fn is_input_required(msg: &Message) -> bool {
    msg.field("result")
        .and_then(Object::of)
        .is_some_and(|r| asks_for_input(&r))
}

/// Whether a result read already is `input_required` (only `resultType` is looked at).
pub(super) fn asks_for_input(result: &Object) -> bool {
    result
        .string("resultType")
        .is_some_and(|t| t == "input_required")
}

/// The backoff before retrying a round that asked for nothing (the child shedding load).
fn backoff(rounds: u32) -> Duration {
    Duration::from_millis((50 * u64::from(rounds)).clamp(50, 250))
}

impl Upstream {
    /// The child asked for input on a handshake-era session's call `p`: ask the session.
    pub(super) fn start_round(&mut self, p: Pending, mut retry: Retry, answer: &Message) {
        let Origin::Session { id: sid, client_id } = p.origin else {
            return;
        };
        let parsed = answer
            .field("result")
            .and_then(|r| serde_json::from_str::<InputRequired>(r.get()).ok())
            .filter(|r| r.result_type == "input_required");
        let fail = |this: &mut Self, text: String| {
            let origin = Origin::Session {
                id: sid,
                client_id: client_id.clone(),
            };
            this.reply_error(origin, p.is_call, ErrorCode::UpstreamError, &text);
        };
        let Some(ir) = parsed else {
            return fail(
                self,
                format!(
                    "coogle: the `{}` server's input_required answer could not be read",
                    self.name
                ),
            );
        };
        retry.rounds += 1;
        if retry.rounds > MAX_ROUNDS {
            return fail(
                self,
                format!(
                    "coogle: the `{}` server asked for input {MAX_ROUNDS} times for one call; giving up",
                    self.name
                ),
            );
        }
        self.waiting.input.next += 1;
        let round_id = self.waiting.input.next;
        let mut waiting = Vec::new();
        for (key, req) in ir.input_requests {
            let shown = self.server_requests.insert_target(
                sid,
                Target::Round {
                    round: round_id,
                    key,
                },
            );
            // The params as the child wrote them, byte for byte.
            let params = req.params.unwrap_or_else(|| raw(&json!({})));
            let line = Message::request(shown.clone(), &req.method, params).to_line();
            waiting.push(shown);
            self.send_to_session(sid, line);
        }
        let retry_at = waiting
            .is_empty()
            .then(|| Instant::now() + backoff(retry.rounds));
        self.waiting.input.by_id.insert(
            round_id,
            Round {
                session: sid,
                client_id,
                is_call: p.is_call,
                retry,
                request_state: ir.request_state,
                responses: crate::wire::Fields::default(),
                waiting,
                retry_at,
            },
        );
    }

    /// The session answered one of a round's input requests.
    pub(super) fn on_round_answer(&mut self, round_id: u64, key: String, answer: Message) {
        let Some(round) = self.waiting.input.by_id.get_mut(&round_id) else {
            return;
        };
        let shown = answer.id().map(id_key).unwrap_or_default();
        round.waiting.retain(|w| id_key(w) != shown);
        match answer.field("result") {
            Some(result) => {
                round.responses.insert(key, result.to_owned());
                if round.waiting.is_empty() {
                    self.retry_round(round_id);
                }
            }
            None => {
                let why = answer.error_message().unwrap_or_default();
                let text = format!(
                    "coogle: the client refused the `{}` server's request for input: {why}",
                    self.name
                );
                self.end_round(round_id, Some(&text));
            }
        }
    }

    /// Retry the call with what the session answered.
    fn retry_round(&mut self, round_id: u64) {
        let Some(round) = self.waiting.input.by_id.remove(&round_id) else {
            return;
        };
        let mut msg = round.retry.msg.clone();
        let mut fields = vec![("inputResponses", raw(&round.responses))];
        if let Some(state) = round.request_state {
            fields.push(("requestState", state));
        }
        msg.set_params_fields(fields);
        let origin = Origin::Session {
            id: round.session,
            client_id: round.client_id,
        };
        self.dispatch_retry(origin, Request::classify(msg), round.retry);
    }

    /// State-only rounds whose backoff is over.
    pub(super) fn retry_due_rounds(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .waiting
            .input
            .by_id
            .iter()
            .filter(|(_, r)| r.retry_at.is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.retry_round(id);
        }
    }

    /// End a round early: with `error`, the session's call is answered with it; the session's
    /// unanswered input requests are withdrawn.
    fn end_round(&mut self, round_id: u64, error: Option<&str>) {
        let Some(round) = self.waiting.input.by_id.remove(&round_id) else {
            return;
        };
        for shown in &round.waiting {
            self.server_requests
                .take_answer(round.session, &id_key(shown));
            let params = json!({"requestId": shown, "reason": "the call was ended"});
            let line = wire::notification_line("notifications/cancelled", Some(&params));
            self.send_to_session(round.session, line);
        }
        if let Some(text) = error {
            let origin = Origin::Session {
                id: round.session,
                client_id: round.client_id,
            };
            self.reply_error(origin, round.is_call, ErrorCode::UpstreamError, text);
        }
    }

    /// The session cancelled its call (id `key`) while it was waiting for input.
    pub(super) fn cancel_round(&mut self, sid: SessionId, key: &str) -> bool {
        let found = self
            .waiting
            .input
            .by_id
            .iter()
            .find(|(_, r)| r.session == sid && id_key(&r.client_id) == key)
            .map(|(id, _)| *id);
        match found {
            Some(id) => {
                self.end_round(id, None);
                true
            }
            None => false,
        }
    }

    /// A session went away: its rounds end with it.
    pub(super) fn forget_rounds(&mut self, sid: SessionId) {
        self.waiting.input.by_id.retain(|_, r| r.session != sid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_required_result_is_read_by_its_last_result_type() {
        let asks = |result: &str| asks_for_input(&Object::parse(result).unwrap());
        assert!(asks(
            r#"{"resultType":"input_required","inputRequests":{}}"#
        ));
        assert!(!asks(r#"{"resultType":"complete","content":[]}"#));
        assert!(!asks(r#"{"content":[]}"#));
        assert!(!asks(r#"{"resultType":5}"#));
        // A repeated key: the last one counts, as a client reading the answer directly sees.
        assert!(asks(
            r#"{"resultType":"complete","resultType":"input_required"}"#
        ));
        assert!(asks(r#"{"resultType":"input_\u0072equired"}"#));
    }
}
