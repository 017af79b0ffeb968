//! Call counters and latency percentiles for `status`.
//!
//! Keeps a bounded window of recent latencies so memory stays flat however long the daemon runs.

use std::collections::VecDeque;
use std::time::Duration;

use crate::wire::Stats;

const WINDOW: usize = 1024;

#[derive(Debug, Default, Clone)]
pub struct CallStats {
    pub calls: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub cancelled: u64,
    recent_us: VecDeque<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
    Timeout,
    Cancelled,
}

impl CallStats {
    pub fn record(&mut self, outcome: Outcome, latency: Duration) {
        self.calls += 1;
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::Error => self.errors += 1,
            Outcome::Timeout => self.timeouts += 1,
            Outcome::Cancelled => self.cancelled += 1,
        }
        if outcome != Outcome::Cancelled {
            if self.recent_us.len() == WINDOW {
                self.recent_us.pop_front();
            }
            self.recent_us
                .push_back(latency.as_micros().min(u64::MAX as u128) as u64);
        }
    }

    /// The q-th percentile (0..=100) of the recent window, in microseconds.
    pub fn percentile_us(&self, q: f64) -> Option<u64> {
        if self.recent_us.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = self.recent_us.iter().copied().collect();
        v.sort_unstable();
        let rank = ((q / 100.0) * (v.len() - 1) as f64).round() as usize;
        Some(v[rank.min(v.len() - 1)])
    }

    pub fn to_status(&self) -> Stats {
        Stats {
            calls: self.calls,
            ok: self.ok,
            errors: self.errors,
            timeouts: self.timeouts,
            cancelled: self.cancelled,
            p50_ms: self.percentile_us(50.0).map(|u| u as f64 / 1000.0),
            p99_ms: self.percentile_us(99.0).map(|u| u as f64 / 1000.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_window() {
        let mut s = CallStats::default();
        assert_eq!(s.percentile_us(50.0), None);
        for i in 1..=100u64 {
            s.record(Outcome::Ok, Duration::from_micros(i));
        }
        s.record(Outcome::Timeout, Duration::from_micros(1_000_000));
        s.record(Outcome::Cancelled, Duration::from_micros(5));
        assert_eq!(s.calls, 102);
        assert_eq!(s.timeouts, 1);
        assert_eq!(s.cancelled, 1);
        assert_eq!(s.percentile_us(50.0), Some(51));
        assert_eq!(s.percentile_us(100.0), Some(1_000_000));
        for _ in 0..(2 * WINDOW) {
            s.record(Outcome::Ok, Duration::from_micros(7));
        }
        assert_eq!(s.percentile_us(99.0), Some(7));
    }
}
