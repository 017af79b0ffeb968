//! The store of the `coogle` tool's background operations (`start_call`, fetched later with
//! `wait`): who owns each, its result once finished, the sessions waiting for it, and the bounds
//! that keep the store small.
//!
//! An operation belongs to whoever started it, like a task, never to mere knowledge of its id:
//! to the shim process that started it (the secret token it sends in every hello, its first
//! and each reconnect's, which nothing ever shows), else to the connection. Other owners'
//! operations are invisible: not listed, not waited for, not cancelled. A
//! `CLAUDE_CODE_SESSION_ID` grants nothing: it is in the shim's environment for anyone to read.
//!
//! Only operations that were started are kept: one refused at once (a full queue, a shutdown)
//! is [`Operations::discard`]ed and its refusal is `start_call`'s own answer. Finished results
//! are kept [`RETENTION`] at most, and within [`MAX_FINISHED_PER_OWNER`] /
//! [`MAX_FINISHED_BYTES_PER_OWNER`] per owner and [`MAX_FINISHED`] / [`MAX_FINISHED_BYTES`]
//! per upstream; past a bound the oldest finished result goes first (the newest is always kept,
//! so a result is there at least until its owner's next one finishes). Running operations are
//! bounded by the queue they wait in.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::SessionId;
use crate::wire::{Hello, SessionToken};

/// How long a finished operation's result is kept.
pub const RETENTION: Duration = Duration::from_secs(600);
/// Finished results kept per owner, and their bytes.
pub const MAX_FINISHED_PER_OWNER: usize = 64;
pub const MAX_FINISHED_BYTES_PER_OWNER: usize = 32 << 20;
/// Finished results kept per upstream across owners, and their bytes.
pub const MAX_FINISHED: usize = 1024;
pub const MAX_FINISHED_BYTES: usize = 64 << 20;

/// Who an operation belongs to (see the module doc).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The shim process, by the token of its hello.
    Shim(SessionToken),
    /// A client that sent no token (an older shim): this connection only.
    Connection(SessionId),
}

impl Owner {
    pub fn of(session: SessionId, hello: &Hello) -> Owner {
        match &hello.session_token {
            Some(token) => Owner::Shim(token.clone()),
            None => Owner::Connection(session),
        }
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The token is the owner's secret: never in a log line.
            Owner::Shim(_) => f.write_str("Owner::Shim(…)"),
            Owner::Connection(id) => write!(f, "Owner::Connection({id})"),
        }
    }
}

struct Operation {
    owner: Owner,
    tool: String,
    started: Instant,
    started_at: SystemTime,
    /// The tool result (or a tool result carrying the error), once finished.
    result: Option<Box<RawValue>>,
    /// When it finished, and its place in the order of finishing.
    finished: Option<(Instant, u64)>,
    /// Between [`Operations::start`] and [`Operations::started`]: a result that comes now is
    /// a refusal, which is answered instead of kept.
    starting: bool,
}

/// A session waiting for an operation.
pub struct Waiter {
    pub operation: String,
    pub session: SessionId,
    pub client_id: Box<RawValue>,
}

/// What the finished results of one owner take.
#[derive(Default, Clone, Copy)]
struct Usage {
    count: usize,
    bytes: usize,
}

/// The operations of one upstream, with the sessions waiting for them.
#[derive(Default)]
pub struct Operations {
    ops: HashMap<String, Operation>,
    /// Finished operations, oldest first (by the order they finished in).
    finished: BTreeMap<u64, String>,
    next_finished: u64,
    usage: HashMap<Owner, Usage>,
    total: Usage,
    waiters: HashMap<u64, Waiter>,
    deadlines: BTreeSet<(Instant, u64)>,
    next_waiter: u64,
}

pub enum WaitOutcome {
    Done(Box<RawValue>),
    /// Registered; answered on completion or at the deadline.
    Waiting,
    Running,
    Unknown,
}

impl Operations {
    pub fn start(&mut self, tool: &str, owner: &Owner) -> String {
        let id = format!("op-{}", uuid::Uuid::new_v4().simple());
        self.ops.insert(
            id.clone(),
            Operation {
                owner: owner.clone(),
                tool: tool.to_string(),
                started: Instant::now(),
                started_at: SystemTime::now(),
                result: None,
                finished: None,
                starting: true,
            },
        );
        id
    }

    /// The call of a [`Self::start`]ed operation was handed on. When it was refused at once (it
    /// finished meanwhile: a full queue, a shutdown), the operation is forgotten as if never
    /// started, and the refusal is returned to be the answer.
    pub fn started(&mut self, operation: &str) -> Result<(), Box<RawValue>> {
        let Some(op) = self.ops.get_mut(operation) else {
            return Ok(());
        };
        op.starting = false;
        match op.result.take() {
            None => Ok(()),
            Some(refusal) => {
                self.ops.remove(operation);
                Err(refusal)
            }
        }
    }

    /// Record an operation's result; returns the sessions waiting for it. Keeping it may push
    /// older results out (see the module doc).
    pub fn finish(&mut self, operation: &str, result: Box<RawValue>) -> Vec<Waiter> {
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.operation == operation)
            .map(|(id, _)| *id)
            .collect();
        self.deadlines.retain(|(_, id)| !ids.contains(id));
        let waiters = ids
            .into_iter()
            .filter_map(|id| self.waiters.remove(&id))
            .collect();
        let Some(op) = self.ops.get_mut(operation) else {
            return waiters;
        };
        if op.result.is_some() {
            return waiters;
        }
        if op.starting {
            op.result = Some(result);
            return waiters;
        }
        let bytes = result.get().len();
        op.result = Some(result);
        let seq = self.next_finished;
        self.next_finished += 1;
        op.finished = Some((Instant::now(), seq));
        let owner = op.owner.clone();
        self.finished.insert(seq, operation.to_string());
        let usage = self.usage.entry(owner.clone()).or_default();
        usage.count += 1;
        usage.bytes += bytes;
        self.total.count += 1;
        self.total.bytes += bytes;
        self.enforce_bounds(&owner, seq);
        waiters
    }

    /// Drop the oldest finished results while the owner's or the upstream's exceed their
    /// bounds; never `newest`, the one that just finished.
    fn enforce_bounds(&mut self, owner: &Owner, newest: u64) {
        let over = |u: Usage, count: usize, bytes: usize| u.count > count || u.bytes > bytes;
        while self
            .usage
            .get(owner)
            .is_some_and(|u| over(*u, MAX_FINISHED_PER_OWNER, MAX_FINISHED_BYTES_PER_OWNER))
        {
            let oldest = self
                .finished
                .iter()
                .find(|(seq, id)| **seq != newest && self.ops[id.as_str()].owner == *owner)
                .map(|(_, id)| id.clone());
            match oldest {
                Some(id) => self.drop_finished(&id),
                None => break,
            }
        }
        while over(self.total, MAX_FINISHED, MAX_FINISHED_BYTES) {
            let oldest = self
                .finished
                .iter()
                .find(|(seq, _)| **seq != newest)
                .map(|(_, id)| id.clone());
            match oldest {
                Some(id) => self.drop_finished(&id),
                None => break,
            }
        }
    }

    fn drop_finished(&mut self, operation: &str) {
        if let Some(op) = self.remove(operation) {
            tracing::debug!(operation, owner = ?op.owner, "dropped a finished operation's result (bounds)");
        }
    }

    /// Take an operation out of every table.
    fn remove(&mut self, operation: &str) -> Option<Operation> {
        let op = self.ops.remove(operation)?;
        if let (Some((_, seq)), Some(result)) = (op.finished, &op.result) {
            self.finished.remove(&seq);
            let bytes = result.get().len();
            if let Some(u) = self.usage.get_mut(&op.owner) {
                u.count -= 1;
                u.bytes -= bytes;
                if u.count == 0 {
                    self.usage.remove(&op.owner);
                }
            }
            self.total.count -= 1;
            self.total.bytes -= bytes;
        }
        Some(op)
    }

    pub fn wait(&mut self, waiter: Waiter, owner: &Owner, wait: Duration) -> WaitOutcome {
        let Some(op) = self
            .ops
            .get(&waiter.operation)
            .filter(|op| op.owner == *owner)
        else {
            return WaitOutcome::Unknown;
        };
        if let Some(result) = &op.result {
            return WaitOutcome::Done(result.clone());
        }
        if wait.is_zero() {
            return WaitOutcome::Running;
        }
        let id = self.next_waiter;
        self.next_waiter += 1;
        self.deadlines.insert((Instant::now() + wait, id));
        self.waiters.insert(id, waiter);
        WaitOutcome::Waiting
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(t, _)| *t)
    }

    /// Waiters whose time is up (to be told "still running"); forgets expired results.
    pub fn expire(&mut self, now: Instant) -> Vec<Waiter> {
        let mut out = Vec::new();
        while let Some(&(t, id)) = self.deadlines.first() {
            if t > now {
                break;
            }
            self.deadlines.pop_first();
            out.extend(self.waiters.remove(&id));
        }
        // Finished in order, so the expired ones are at the front.
        while let Some(id) = self.finished.first_key_value().map(|(_, id)| id.clone()) {
            let done_at = self.ops[id.as_str()].finished.map(|(t, _)| t);
            if done_at.is_some_and(|t| now.duration_since(t) < RETENTION) {
                break;
            }
            self.remove(&id);
        }
        out
    }

    pub fn forget_session(&mut self, session: SessionId) {
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.session == session)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            self.waiters.remove(id);
        }
        self.deadlines.retain(|(_, id)| !ids.contains(id));
    }

    /// Forget every operation of `owner` (a connection that is gone, which nobody can be
    /// again); returns the ids of those still running, for the caller to cancel.
    pub fn forget_owner(&mut self, owner: &Owner) -> Vec<String> {
        let ids: Vec<String> = self
            .ops
            .iter()
            .filter(|(_, op)| op.owner == *owner)
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter()
            .filter_map(|id| {
                let op = self.remove(&id)?;
                op.result.is_none().then_some(id)
            })
            .collect()
    }

    /// Whether `owner`'s operation is still running; `None` for an operation that is not
    /// theirs (or not there).
    pub fn is_running(&self, operation: &str, owner: &Owner) -> Option<bool> {
        self.ops
            .get(operation)
            .filter(|op| op.owner == *owner)
            .map(|op| op.result.is_none())
    }

    /// How many operations belong to someone else (for `status`, which shows only counts).
    pub fn others(&self, owner: &Owner) -> usize {
        self.ops.values().filter(|op| op.owner != *owner).count()
    }

    /// Whether any operation is still running.
    pub fn any_running(&self) -> bool {
        self.ops.values().any(|op| op.result.is_none())
    }

    /// How many of someone else's operations are still running.
    pub fn others_running(&self, owner: &Owner) -> usize {
        self.ops
            .values()
            .filter(|op| op.owner != *owner && op.result.is_none())
            .count()
    }

    pub fn list(&self, owner: &Owner) -> Value {
        let mut ops: Vec<(&String, &Operation)> = self
            .ops
            .iter()
            .filter(|(_, op)| op.owner == *owner)
            .collect();
        ops.sort_by_key(|(_, op)| op.started);
        Value::Array(
            ops.into_iter()
                .map(|(id, op)| {
                    let end = op.finished.map_or_else(Instant::now, |(t, _)| t);
                    json!({
                        "operation": id,
                        "tool": op.tool,
                        "status": if op.result.is_some() { "done" } else { "running" },
                        "startedAtMs": op.started_at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
                        "runningMs": end.duration_since(op.started).as_millis() as u64,
                    })
                })
                .collect(),
        )
    }

    /// Finished results kept, and their bytes (for tests of the bounds).
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        (self.total.count, self.total.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(c: char) -> Owner {
        Owner::Shim(SessionToken::new(&c.to_string().repeat(32)).unwrap())
    }

    fn result(bytes: usize) -> Box<RawValue> {
        RawValue::from_string(format!("\"{}\"", "x".repeat(bytes.saturating_sub(2)))).unwrap()
    }

    /// Start an operation whose call was handed on.
    fn begin(ops: &mut Operations, tool: &str, owner: &Owner) -> String {
        let id = ops.start(tool, owner);
        assert!(ops.started(&id).is_ok());
        id
    }

    fn waiter(op: &str) -> Waiter {
        Waiter {
            operation: op.into(),
            session: 1,
            client_id: RawValue::from_string("7".into()).unwrap(),
        }
    }

    #[test]
    fn operations_finish_wait_and_expire() {
        let mut ops = Operations::default();
        let me = token('a');
        let id = begin(&mut ops, "sleep", &me);
        assert!(matches!(
            ops.wait(waiter(&id), &me, Duration::ZERO),
            WaitOutcome::Running
        ));
        assert!(matches!(
            ops.wait(waiter("op-nope"), &me, Duration::ZERO),
            WaitOutcome::Unknown
        ));
        assert!(matches!(
            ops.wait(waiter(&id), &me, Duration::from_secs(60)),
            WaitOutcome::Waiting
        ));
        assert!(ops.next_deadline().is_some());
        let done = ops.finish(&id, RawValue::from_string("{\"ok\":1}".into()).unwrap());
        assert_eq!(done.len(), 1);
        assert!(ops.next_deadline().is_none());
        match ops.wait(waiter(&id), &me, Duration::ZERO) {
            WaitOutcome::Done(r) => assert_eq!(r.get(), "{\"ok\":1}"),
            _ => panic!("expected the result"),
        }
        // A waiter whose time runs out is handed back; a result past retention is forgotten.
        let other = begin(&mut ops, "sleep", &me);
        assert!(matches!(
            ops.wait(waiter(&other), &me, Duration::from_millis(1)),
            WaitOutcome::Waiting
        ));
        let later = Instant::now() + Duration::from_millis(5);
        assert_eq!(ops.expire(later).len(), 1);
        ops.expire(Instant::now() + RETENTION + Duration::from_secs(1));
        assert_eq!(ops.is_running(&id, &me), None);
        assert_eq!(ops.kept(), (0, 0));
        assert_eq!(ops.is_running(&other, &me), Some(true));
        assert_eq!(ops.list(&me).as_array().unwrap().len(), 1);
        // Someone else's operation is not there for them.
        let you = token('b');
        assert_eq!(ops.is_running(&other, &you), None);
        assert!(matches!(
            ops.wait(waiter(&other), &you, Duration::ZERO),
            WaitOutcome::Unknown
        ));
        assert_eq!(ops.list(&you).as_array().unwrap().len(), 0);
        assert_eq!(ops.others(&you), 1);
        // Nor for a connection, whatever its number.
        assert_eq!(ops.is_running(&other, &Owner::Connection(1)), None);
    }

    /// A refused operation leaves nothing behind, its refusal is handed back, and it pushes
    /// no older result out.
    #[test]
    fn a_refused_operation_leaves_nothing() {
        let mut ops = Operations::default();
        let me = token('a');
        let kept: Vec<String> = (0..MAX_FINISHED_PER_OWNER)
            .map(|_| {
                let id = begin(&mut ops, "echo", &me);
                ops.finish(&id, result(10));
                id
            })
            .collect();
        for _ in 0..10_000 {
            let id = ops.start("echo", &me);
            ops.finish(&id, result(100));
            assert_eq!(ops.started(&id).unwrap_err().get().len(), 100);
            assert_eq!(ops.is_running(&id, &me), None);
        }
        assert_eq!(ops.ops.len(), MAX_FINISHED_PER_OWNER);
        assert_eq!(
            ops.kept(),
            (MAX_FINISHED_PER_OWNER, MAX_FINISHED_PER_OWNER * 10)
        );
        assert!(kept.iter().all(|id| ops.is_running(id, &me) == Some(false)));
    }

    #[test]
    fn finished_results_are_bounded_per_owner_oldest_first() {
        let mut ops = Operations::default();
        let me = token('a');
        let ids: Vec<String> = (0..MAX_FINISHED_PER_OWNER + 5)
            .map(|_| {
                let id = begin(&mut ops, "echo", &me);
                ops.finish(&id, result(10));
                id
            })
            .collect();
        assert_eq!(ops.kept().0, MAX_FINISHED_PER_OWNER);
        for id in &ids[..5] {
            assert_eq!(ops.is_running(id, &me), None, "the oldest go first");
        }
        for id in &ids[5..] {
            assert_eq!(ops.is_running(id, &me), Some(false));
        }
        // Bytes: results of 8 MiB push the older ones out; the newest is always kept, even
        // alone past the bound.
        let big = |ops: &mut Operations, n: usize| {
            let id = begin(ops, "echo", &me);
            ops.finish(&id, result(n));
            id
        };
        let first = big(&mut ops, 8 << 20);
        for _ in 0..4 {
            big(&mut ops, 8 << 20);
        }
        assert_eq!(ops.is_running(&first, &me), None);
        let (_, bytes) = ops.kept();
        assert!(bytes <= MAX_FINISHED_BYTES_PER_OWNER, "{bytes}");
        let huge = big(&mut ops, MAX_FINISHED_BYTES_PER_OWNER + 1);
        assert_eq!(ops.is_running(&huge, &me), Some(false));
        assert_eq!(ops.list(&me).as_array().unwrap().len(), 1);
        // A running operation is never dropped for a bound.
        let running = begin(&mut ops, "sleep", &me);
        big(&mut ops, MAX_FINISHED_BYTES_PER_OWNER + 1);
        assert_eq!(ops.is_running(&running, &me), Some(true));
    }

    #[test]
    fn finished_results_are_bounded_per_upstream() {
        let mut ops = Operations::default();
        let owners: Vec<Owner> = "abcdefghijklmnopqrst".chars().map(token).collect();
        let mut first = None;
        for round in 0..MAX_FINISHED_PER_OWNER {
            for o in &owners {
                let id = begin(&mut ops, "echo", o);
                ops.finish(&id, result(10));
                if round == 0 && first.is_none() {
                    first = Some((id, o.clone()));
                }
            }
        }
        assert_eq!(ops.kept().0, MAX_FINISHED);
        let (first, owner) = first.unwrap();
        assert_eq!(
            ops.is_running(&first, &owner),
            None,
            "the oldest overall went"
        );
        let mut bytes_ops = Operations::default();
        for o in owners.iter().take(3) {
            for _ in 0..3 {
                let id = begin(&mut bytes_ops, "echo", o);
                bytes_ops.finish(&id, result(8 << 20));
            }
        }
        assert!(bytes_ops.kept().1 <= MAX_FINISHED_BYTES);
        assert_eq!(bytes_ops.kept().0, MAX_FINISHED_BYTES / (8 << 20));
    }

    #[test]
    fn a_gone_connection_takes_its_operations() {
        let mut ops = Operations::default();
        let conn = Owner::Connection(7);
        let done = begin(&mut ops, "echo", &conn);
        ops.finish(&done, result(10));
        let running = begin(&mut ops, "sleep", &conn);
        let theirs = begin(&mut ops, "sleep", &token('z'));
        assert_eq!(ops.forget_owner(&conn), vec![running.clone()]);
        assert_eq!(ops.is_running(&done, &conn), None);
        assert_eq!(ops.kept(), (0, 0));
        // Its result arriving later is no one's.
        assert!(ops.finish(&running, result(10)).is_empty());
        assert_eq!(ops.kept(), (0, 0));
        assert_eq!(ops.others(&conn), 1);
        assert_eq!(ops.is_running(&theirs, &token('z')), Some(true));
    }
}
