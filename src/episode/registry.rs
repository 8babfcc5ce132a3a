//! The registry of open episodes: sharded so concurrent episodes do not contend on one lock, capped,
//! and swept by the idle reaper; plus the ids of ended episodes ([`super::ended`]), so that no id is
//! reused while remembered.
//!
//! Each entry holds its episode behind an async mutex (a tool call holds it across embedding, so calls
//! on one episode run one at a time) and a last-used timestamp the reaper reads without locking.
//! An episode leaves the open map and enters the remembered ids under its shard's lock (lock order:
//! shard, then the remembered ids), so a create never sees an id that is neither open nor remembered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::ended::{Ending, Graveyard, Tombstone};
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
    /// The id belongs to an ended episode and is still remembered.
    Ended(Tombstone),
}

/// What an id names.
pub enum Lookup {
    /// An open episode.
    Live(Arc<Entry>),
    /// An ended episode whose id is remembered.
    Ended(Tombstone),
    /// Nothing (never created, or forgotten).
    Unknown,
}

/// Sharded map of episode id → entry.
#[derive(Debug)]
pub struct Registry {
    shards: Vec<Mutex<HashMap<String, Arc<Entry>>>>,
    count: AtomicUsize,
    max: usize,
    ended: Mutex<Graveyard>,
}

fn shard_of(id: &str) -> usize {
    (crate::util::fnv::fnv1a(id.as_bytes()) % SHARDS as u64) as usize
}

impl Registry {
    /// An empty registry holding at most `max` episodes; it remembers the ids of at most `max_ended`
    /// ended episodes, each for `forget_after`.
    pub fn new(max: usize, max_ended: usize, forget_after: std::time::Duration) -> Self {
        Registry {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            count: AtomicUsize::new(0),
            max,
            ended: Mutex::new(Graveyard::new(max_ended, forget_after)),
        }
    }

    /// Remembered ids of ended episodes (including expired ones not yet swept).
    pub fn remembered(&self) -> usize {
        self.ended.lock().len()
    }

    /// Open episodes.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Open episodes not yet scored; one whose lock is held (a call in flight) counts as unscored.
    pub fn count_unscored(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().values().filter(|e| e.episode.try_lock().map_or(true, |ep| ep.scored.is_none())).count())
            .sum()
    }

    /// True when none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry for `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Entry>> {
        self.shards[shard_of(id)].lock().get(id).cloned()
    }

    /// What `id` names at `now_ms`.
    pub fn find(&self, id: &str, now_ms: u64) -> Lookup {
        let shard = self.shards[shard_of(id)].lock();
        if let Some(e) = shard.get(id) {
            return Lookup::Live(e.clone());
        }
        match self.ended.lock().get(id, now_ms) {
            Some(t) => Lookup::Ended(t),
            None => Lookup::Unknown,
        }
    }

    /// The open-episodes gauge ([`crate::util::prometheus`]), set wherever the count changes.
    fn observe_open(&self) {
        crate::util::prometheus::episodes_open(self.count.load(Ordering::Acquire));
    }

    /// Inserts `make()` under `id` unless the id is taken, remembered, or the cap is reached.
    pub fn insert_with(&self, id: &str, now_ms: u64, make: impl FnOnce() -> Episode) -> Inserted {
        let mut shard = self.shards[shard_of(id)].lock();
        if let Some(e) = shard.get(id) {
            return Inserted::Existing(e.clone());
        }
        if let Some(t) = self.ended.lock().get(id, now_ms) {
            return Inserted::Ended(t);
        }
        if self.count.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.count.fetch_sub(1, Ordering::AcqRel);
            crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::RefusedAtCap, 1);
            return Inserted::Full;
        }
        let entry = Arc::new(Entry { episode: tokio::sync::Mutex::new(make()), last_used_ms: AtomicU64::new(now_ms) });
        shard.insert(id.to_string(), entry.clone());
        self.observe_open();
        Inserted::New(entry)
    }

    /// Removes `entry` from under `id` (unless another entry stands there) and remembers `tombstone`.
    /// The caller holds the episode's lock and has marked it ended.
    pub fn close(&self, id: &str, entry: &Arc<Entry>, tombstone: Tombstone) {
        let mut shard = self.shards[shard_of(id)].lock();
        if shard.get(id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            shard.remove(id);
            self.count.fetch_sub(1, Ordering::AcqRel);
            self.ended.lock().bury(id, tombstone);
            crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::Closed, 1);
            self.observe_open();
        }
    }

    /// Remembers `id`, which names no open episode, as ended with `tombstone` (unless already remembered),
    /// so that no later create opens it; false when an episode is open under `id` (the caller closes it).
    pub fn retire(&self, id: &str, now_ms: u64, tombstone: Tombstone) -> bool {
        let shard = self.shards[shard_of(id)].lock();
        if shard.contains_key(id) {
            return false;
        }
        let mut ended = self.ended.lock();
        if ended.get(id, now_ms).is_none() {
            ended.bury(id, tombstone);
        }
        true
    }

    /// Removes `entry` from under `id` without remembering it, as if it had never been opened (a
    /// ForkEpisode that could not open all its forks withdraws the ones it did).
    pub fn withdraw(&self, id: &str, entry: &Arc<Entry>) {
        let mut shard = self.shards[shard_of(id)].lock();
        if shard.get(id).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            shard.remove(id);
            self.count.fetch_sub(1, Ordering::AcqRel);
            self.observe_open();
        }
    }

    /// Removes every entry idle for at least `ttl_ms` and not in use right now, remembering their ids;
    /// returns how many.
    pub fn reap_idle(&self, now_ms: u64, ttl_ms: u64) -> usize {
        let mut reaped = 0;
        let mut buried = Vec::new();
        for shard in &self.shards {
            let mut map = shard.lock();
            map.retain(|id, e| {
                let idle_ms = now_ms.saturating_sub(e.last_used_ms.load(Ordering::Relaxed));
                if idle_ms < ttl_ms {
                    return true;
                }
                // An episode whose lock is held is in use: keep it.
                let Ok(mut ep) = e.episode.try_lock() else { return true };
                let t = Tombstone {
                    ending: Ending::Reaped { idle_secs: idle_ms / 1000 },
                    scored: ep.scored.is_some(),
                    steps_used: ep.steps_used,
                    at_ms: now_ms,
                };
                ep.ended = Some(t);
                buried.push((id.clone(), t));
                false
            });
            if !buried.is_empty() {
                let mut ended = self.ended.lock();
                reaped += buried.len();
                for (id, t) in buried.drain(..) {
                    ended.bury(&id, t);
                }
            }
        }
        self.count.fetch_sub(reaped, Ordering::AcqRel);
        crate::util::prometheus::episodes(crate::util::prometheus::EpisodeEvent::Reaped, reaped as u64);
        self.observe_open();
        reaped
    }

    /// Forgets the ids of episodes that ended at least the remembering time before `now_ms`; returns how many.
    pub fn forget_expired(&self, now_ms: u64) -> usize {
        self.ended.lock().sweep(now_ms)
    }
}
