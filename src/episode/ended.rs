//! Ids of ended episodes (closed, or reaped after idling), remembered for a while so that an id is never
//! silently reused. Without them an idempotent CreateEpisode after a reap would open a fresh episode from
//! M₀, and a trainer would score a trajectory on only the edits made after the reap.
//!
//! Bounded in time (`--forget-closed-after-secs`) and in count (`--max-closed-ids`, oldest forgotten
//! first); O(1) amortised per operation: a hash map answers lookups, a FIFO in burial order forgets.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// CloseEpisode.
    Closed,
    /// The idle reaper, after this many seconds without a call.
    Reaped {
        /// Seconds idle when reaped.
        idle_secs: u64,
    },
}

/// What is remembered of an ended episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tombstone {
    /// Closed or reaped.
    pub ending: Ending,
    /// It had been scored.
    pub scored: bool,
    /// Steps used when it ended.
    pub steps_used: u32,
    /// When it ended, on the environment's clock (ms).
    pub at_ms: u64,
}

/// "closed at step 5", "scored and closed at step 5", "reaped after 600 s idle at step 3",
/// "scored, then reaped after 600 s idle at step 3".
impl fmt::Display for Tombstone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps = self.steps_used;
        match (self.ending, self.scored) {
            (Ending::Closed, false) => write!(f, "closed at step {steps}"),
            (Ending::Closed, true) => write!(f, "scored and closed at step {steps}"),
            (Ending::Reaped { idle_secs }, false) => write!(f, "reaped after {idle_secs} s idle at step {steps}"),
            (Ending::Reaped { idle_secs }, true) => write!(f, "scored, then reaped after {idle_secs} s idle at step {steps}"),
        }
    }
}

/// The remembered ids: at most `max`, each for `ttl`. `max == 0` or a zero `ttl` remembers nothing.
#[derive(Debug)]
pub struct Graveyard {
    by_id: HashMap<Arc<str>, (u64, Tombstone)>,
    /// (burial number, time, id) in burial order. An entry whose number no longer matches `by_id` (the id
    /// was buried again after being forgotten) is stale and skipped; `by_id.len() <= order.len() <= max`.
    order: VecDeque<(u64, u64, Arc<str>)>,
    next: u64,
    last_ms: u64,
    max: usize,
    ttl_ms: u64,
}

impl Graveyard {
    /// Remembers at most `max` ids, each for `ttl`.
    pub fn new(max: usize, ttl: Duration) -> Self {
        Graveyard { by_id: HashMap::new(), order: VecDeque::new(), next: 0, last_ms: 0, max, ttl_ms: ttl.as_millis() as u64 }
    }

    /// Remembered ids (some may have expired and wait for the next [`Self::sweep`]).
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Remembers `id`, forgetting the oldest ids beyond the cap.
    pub fn bury(&mut self, id: &str, mut t: Tombstone) {
        if self.max == 0 || self.ttl_ms == 0 {
            return;
        }
        // Burial times never go backwards, so the sweep can stop at the first live entry.
        t.at_ms = t.at_ms.max(self.last_ms);
        self.last_ms = t.at_ms;
        let n = self.next;
        self.next += 1;
        let id: Arc<str> = id.into();
        self.by_id.insert(id.clone(), (n, t));
        self.order.push_back((n, t.at_ms, id));
        while self.order.len() > self.max {
            self.pop_front();
        }
    }

    /// The tombstone of `id`, unless it has expired by `now_ms`.
    pub fn get(&self, id: &str, now_ms: u64) -> Option<Tombstone> {
        self.by_id.get(id).map(|(_, t)| *t).filter(|t| now_ms.saturating_sub(t.at_ms) < self.ttl_ms)
    }

    /// Forgets every id expired by `now_ms`; returns how many.
    pub fn sweep(&mut self, now_ms: u64) -> usize {
        let before = self.by_id.len();
        while self.order.front().is_some_and(|(_, at, _)| now_ms.saturating_sub(*at) >= self.ttl_ms) {
            self.pop_front();
        }
        before - self.by_id.len()
    }

    fn pop_front(&mut self) {
        if let Some((n, _, id)) = self.order.pop_front() {
            if self.by_id.get(&id).is_some_and(|(m, _)| *m == n) {
                self.by_id.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(steps_used: u32, at_ms: u64) -> Tombstone {
        Tombstone { ending: Ending::Closed, scored: false, steps_used, at_ms }
    }

    #[test]
    fn the_count_is_bounded_and_the_oldest_is_forgotten_first() {
        let mut g = Graveyard::new(3, Duration::from_secs(60));
        for i in 0..5 {
            g.bury(&format!("e{i}"), closed(i, 100 + u64::from(i)));
        }
        assert_eq!(g.len(), 3);
        assert_eq!(g.order.len(), 3);
        assert_eq!(g.get("e0", 200), None);
        assert_eq!(g.get("e1", 200), None);
        assert_eq!(g.get("e4", 200), Some(closed(4, 104)));
    }

    #[test]
    fn ids_expire_and_the_sweep_forgets_them() {
        let mut g = Graveyard::new(100, Duration::from_secs(10));
        g.bury("a", closed(1, 0));
        g.bury("b", closed(2, 5_000));
        assert!(g.get("a", 9_999).is_some());
        assert_eq!(g.get("a", 10_000), None, "expired at once, even before a sweep");
        assert_eq!(g.sweep(10_000), 1);
        assert_eq!((g.len(), g.get("b", 10_000).map(|t| t.steps_used)), (1, Some(2)));
        assert_eq!(g.sweep(15_000), 1);
        assert!(g.by_id.is_empty() && g.order.is_empty());
    }

    #[test]
    fn an_id_buried_again_keeps_its_newest_tombstone() {
        let mut g = Graveyard::new(2, Duration::from_secs(10));
        g.bury("a", closed(1, 0));
        g.bury("a", closed(7, 1_000));
        g.bury("b", closed(2, 2_000));
        // "a"'s first entry was the oldest: forgetting it must not forget the newer tombstone.
        assert_eq!(g.get("a", 2_000).map(|t| t.steps_used), Some(7));
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn zero_cap_or_ttl_remembers_nothing() {
        let mut g = Graveyard::new(0, Duration::from_secs(10));
        g.bury("a", closed(1, 0));
        assert_eq!(g.len(), 0);
        let mut g = Graveyard::new(10, Duration::ZERO);
        g.bury("a", closed(1, 0));
        assert_eq!(g.get("a", 0), None);
    }

    #[test]
    fn endings_read_as_sentences() {
        let reaped = Tombstone { ending: Ending::Reaped { idle_secs: 600 }, scored: false, steps_used: 3, at_ms: 0 };
        assert_eq!(reaped.to_string(), "reaped after 600 s idle at step 3");
        assert_eq!(Tombstone { scored: true, ..reaped }.to_string(), "scored, then reaped after 600 s idle at step 3");
        assert_eq!(closed(5, 0).to_string(), "closed at step 5");
        assert_eq!(Tombstone { scored: true, ..closed(5, 0) }.to_string(), "scored and closed at step 5");
    }
}
