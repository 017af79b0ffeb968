//! The per-upstream call queue: round-robin across sessions, first-in first-out within one.
//!
//! One session's burst of a hundred calls must not delay another session's single call behind
//! all of them, so the queue keeps one FIFO per session and serves the sessions in turn. It owns
//! ordering only; how many calls run at once is the upstream's business.

use std::collections::{HashMap, VecDeque};

pub type QueueKey = u64;

#[derive(Debug)]
pub struct FairQueue<T> {
    queues: HashMap<QueueKey, VecDeque<T>>,
    /// Keys with a non-empty queue, in the order they will be served next.
    order: VecDeque<QueueKey>,
    len: usize,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        FairQueue {
            queues: HashMap::new(),
            order: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> FairQueue<T> {
    pub fn push(&mut self, key: QueueKey, item: T) {
        let q = self.queues.entry(key).or_default();
        if q.is_empty() {
            self.order.push_back(key);
        }
        q.push_back(item);
        self.len += 1;
    }

    /// The next item: the head of the queue of the session whose turn it is.
    pub fn pop(&mut self) -> Option<(QueueKey, T)> {
        let key = self.order.pop_front()?;
        let q = self.queues.get_mut(&key)?;
        let item = q.pop_front()?;
        if q.is_empty() {
            self.queues.remove(&key);
        } else {
            self.order.push_back(key);
        }
        self.len -= 1;
        Some((key, item))
    }

    /// Remove and return the first item of `key`'s queue that matches.
    pub fn remove_first(&mut self, key: QueueKey, pred: impl Fn(&T) -> bool) -> Option<T> {
        let q = self.queues.get_mut(&key)?;
        let pos = q.iter().position(pred)?;
        let item = q.remove(pos)?;
        self.len -= 1;
        if q.is_empty() {
            self.queues.remove(&key);
            self.order.retain(|k| *k != key);
        }
        Some(item)
    }

    /// Remove a whole session's queue.
    pub fn remove_key(&mut self, key: QueueKey) -> Vec<T> {
        match self.queues.remove(&key) {
            Some(q) => {
                self.order.retain(|k| *k != key);
                self.len -= q.len();
                q.into()
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

    pub fn len_of(&self, key: QueueKey) -> usize {
        self.queues.get(&key).map_or(0, VecDeque::len)
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
