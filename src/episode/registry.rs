//! The registry of open episodes: sharded so concurrent episodes do not contend on one lock, capped,
//! and swept by the idle reaper.
//!
//! Each entry holds its episode behind an async mutex (a tool call holds it across embedding, so calls
//! on one episode run one at a time) and a last-used timestamp the reaper reads without locking.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::Episode;

const SHARDS: usize = 64;

/// One open episode.
#[derive(Debug)]
pub struct Entry {
    /// The episode.
    pub episode: tokio::sync::Mutex<Episode>,
    last_used_ms: AtomicU64,
}

impl Entry {
    /// Marks the entry used now.
    pub fn touch(&self, now_ms: u64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }
}

/// The result of [`Registry::insert_with`].
pub enum Inserted {
    /// A new entry.
    New(Arc<Entry>),
    /// The id was taken.
    Existing(Arc<Entry>),
    /// The cap is reached.
    Full,
}

/// Sharded map of episode id → entry.
#[derive(Debug)]
pub struct Registry {
    shards: Vec<Mutex<HashMap<String, Arc<Entry>>>>,
    count: AtomicUsize,
    max: usize,
}

fn shard_of(id: &str) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % SHARDS as u64) as usize
}

impl Registry {
    /// An empty registry holding at most `max` episodes.
    pub fn new(max: usize) -> Self {
        Registry { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(), count: AtomicUsize::new(0), max }
    }

    /// Open episodes.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// True when none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry for `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Entry>> {
        self.shards[shard_of(id)].lock().get(id).cloned()
    }

    /// Inserts `make()` under `id` unless the id is taken or the cap is reached.
    pub fn insert_with(&self, id: &str, now_ms: u64, make: impl FnOnce() -> Episode) -> Inserted {
        let mut shard = self.shards[shard_of(id)].lock();
        if let Some(e) = shard.get(id) {
            return Inserted::Existing(e.clone());
        }
        if self.count.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.count.fetch_sub(1, Ordering::AcqRel);
            return Inserted::Full;
        }
        let entry = Arc::new(Entry { episode: tokio::sync::Mutex::new(make()), last_used_ms: AtomicU64::new(now_ms) });
        shard.insert(id.to_string(), entry.clone());
        Inserted::New(entry)
    }

    /// Removes and returns the entry for `id`.
    pub fn remove(&self, id: &str) -> Option<Arc<Entry>> {
        let removed = self.shards[shard_of(id)].lock().remove(id);
        if removed.is_some() {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
        removed
    }

    /// Removes every entry idle for at least `ttl_ms` and not in use right now; returns how many.
    pub fn reap_idle(&self, now_ms: u64, ttl_ms: u64) -> usize {
        let mut reaped = 0;
        for shard in &self.shards {
            let mut map = shard.lock();
            map.retain(|_, e| {
                let idle = now_ms.saturating_sub(e.last_used_ms.load(Ordering::Relaxed)) >= ttl_ms;
                // An episode whose lock is held is in use: keep it.
                let keep = !idle || e.episode.try_lock().is_err();
                if !keep {
                    reaped += 1;
                }
                keep
            });
        }
        self.count.fetch_sub(reaped, Ordering::AcqRel);
        reaped
    }
}
