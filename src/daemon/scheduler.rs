//! The per-upstream call queue: round-robin across sessions, first-in first-out within one.
//!
//! One session's burst of a hundred calls must not delay another session's single call behind
//! all of them, so the queue keeps one FIFO per session and serves the sessions in turn. It owns
//! ordering only; how many calls run at once is the upstream's business.

use std::collections::{BTreeMap, VecDeque};

// Looked up on every call: foldhash rather than SipHash (see `inflight`).
use foldhash::{HashMap, HashMapExt};

pub type QueueKey = u64;

/// A queued item, with the tag it can be found by (a session's request id).
#[derive(Debug)]
struct Entry<T> {
    tag: Option<String>,
    item: T,
}

#[derive(Debug)]
pub struct FairQueue<T> {
    /// Each key's items by sequence number: FIFO, and removable from the middle in O(log n).
    queues: HashMap<QueueKey, BTreeMap<u64, Entry<T>>>,
    /// Keys with a non-empty queue, in the order they will be served next.
    order: VecDeque<QueueKey>,
    /// Where each tag's items are, so a cancel never scans the queue.
    tags: HashMap<(QueueKey, String), VecDeque<u64>>,
    len: usize,
    next_seq: u64,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        FairQueue {
            queues: HashMap::new(),
            order: VecDeque::new(),
            tags: HashMap::new(),
            len: 0,
            next_seq: 0,
        }
    }
}

impl<T> FairQueue<T> {
    #[cfg(test)]
    pub fn push(&mut self, key: QueueKey, item: T) {
        self.push_tagged(key, None, item);
    }

    /// Queue `item`, findable later by `tag` (see [`FairQueue::remove_tagged`]).
    pub fn push_tagged(&mut self, key: QueueKey, tag: Option<String>, item: T) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let q = self.queues.entry(key).or_default();
        if q.is_empty() {
            self.order.push_back(key);
        }
        if let Some(t) = &tag {
            self.tags
                .entry((key, t.clone()))
                .or_default()
                .push_back(seq);
        }
        q.insert(seq, Entry { tag, item });
        self.len += 1;
    }

    /// The next item: the head of the queue of the session whose turn it is.
    pub fn pop(&mut self) -> Option<(QueueKey, T)> {
        let key = self.order.pop_front()?;
        let q = self.queues.get_mut(&key)?;
        let (seq, entry) = q.pop_first()?;
        if q.is_empty() {
            self.queues.remove(&key);
        } else {
            self.order.push_back(key);
        }
        self.len -= 1;
        self.untag(key, &entry.tag, seq);
        Some((key, entry.item))
    }

    /// Remove `key`'s oldest item tagged `tag`: O(log n), whatever the queue's length.
    pub fn remove_tagged(&mut self, key: QueueKey, tag: &str) -> Option<T> {
        let seq = *self.tags.get(&(key, tag.to_string()))?.front()?;
        self.remove_seq(key, seq)
    }

    /// Remove and return the first item of `key`'s queue that matches (a scan: for rare uses).
    pub fn remove_first(&mut self, key: QueueKey, pred: impl Fn(&T) -> bool) -> Option<T> {
        let seq = self
            .queues
            .get(&key)?
            .iter()
            .find(|(_, e)| pred(&e.item))
            .map(|(s, _)| *s)?;
        self.remove_seq(key, seq)
    }

    fn remove_seq(&mut self, key: QueueKey, seq: u64) -> Option<T> {
        let q = self.queues.get_mut(&key)?;
        let entry = q.remove(&seq)?;
        self.len -= 1;
        if q.is_empty() {
            self.queues.remove(&key);
            self.order.retain(|k| *k != key);
        }
        self.untag(key, &entry.tag, seq);
        Some(entry.item)
    }

    fn untag(&mut self, key: QueueKey, tag: &Option<String>, seq: u64) {
        let Some(t) = tag else {
            return;
        };
        let k = (key, t.clone());
        if let Some(seqs) = self.tags.get_mut(&k) {
            seqs.retain(|s| *s != seq);
            if seqs.is_empty() {
                self.tags.remove(&k);
            }
        }
    }

    /// Remove a whole session's queue.
    pub fn remove_key(&mut self, key: QueueKey) -> Vec<T> {
        match self.queues.remove(&key) {
            Some(q) => {
                self.order.retain(|k| *k != key);
                self.tags.retain(|(k, _), _| *k != key);
                self.len -= q.len();
                q.into_values().map(|e| e.item).collect()
            }
            None => Vec::new(),
        }
    }

    pub fn drain_all(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        while let Some((_, item)) = self.pop() {
            out.push(item);
        }
        out
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether any queued item matches (a scan: for rare uses).
    pub fn any(&self, pred: impl Fn(&T) -> bool) -> bool {
        self.queues
            .values()
            .flat_map(|q| q.values())
            .any(|e| pred(&e.item))
    }

    pub fn len_of(&self, key: QueueKey) -> usize {
        self.queues.get(&key).map_or(0, BTreeMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_does_not_starve_a_single_call() {
        let mut q = FairQueue::default();
        for i in 0..100 {
            q.push(1, format!("a{i}"));
        }
        q.push(2, "b0".to_string());
        assert_eq!(q.len(), 101);
        let first: Vec<String> = (0..3).map(|_| q.pop().unwrap().1).collect();
        assert_eq!(first, vec!["a0", "b0", "a1"]);
        assert_eq!(q.len(), 98);
    }

    #[test]
    fn round_robin_fifo_within_a_session() {
        let mut q = FairQueue::default();
        q.push(1, 10);
        q.push(1, 11);
        q.push(2, 20);
        q.push(3, 30);
        q.push(2, 21);
        let order: Vec<i32> = std::iter::from_fn(|| q.pop().map(|(_, v)| v)).collect();
        assert_eq!(order, vec![10, 20, 30, 11, 21]);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn tagged_items_are_removed_without_a_scan_oldest_first() {
        let mut q = FairQueue::default();
        for i in 0..50_000 {
            q.push_tagged(1, Some(format!("t{i}")), i);
        }
        q.push_tagged(1, Some("dup".into()), -1);
        q.push_tagged(1, Some("dup".into()), -2);
        let t = std::time::Instant::now();
        for i in (0..50_000).step_by(10) {
            assert_eq!(q.remove_tagged(1, &format!("t{i}")), Some(i));
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(q.remove_tagged(1, "t0"), None, "removed once");
        assert_eq!(q.remove_tagged(1, "dup"), Some(-1));
        assert_eq!(q.pop().map(|(_, v)| v), Some(1));
        assert_eq!(q.len(), 45_000);
        let n = q.len_of(1);
        assert_eq!(q.remove_key(1).len(), n);
        assert_eq!(q.len(), 0);
        assert_eq!(
            q.remove_tagged(1, "t1"),
            None,
            "a removed key's tags go with it"
        );
    }

    #[test]
    fn removal_keeps_the_rest_in_order() {
        let mut q = FairQueue::default();
        q.push(1, 1);
        q.push(1, 2);
        q.push(2, 3);
        assert_eq!(q.remove_first(1, |v| *v == 2), Some(2));
        assert_eq!(q.remove_first(1, |v| *v == 9), None);
        assert_eq!(q.remove_key(2), vec![3]);
        assert_eq!(q.len(), 1);
        assert_eq!(q.len_of(1), 1);
        assert_eq!(q.remove_first(1, |v| *v == 1), Some(1));
        assert!(q.pop().is_none());
        assert_eq!(q.len(), 0);
    }
}
