//! The one session table of the JSON faces: session id → what the face keeps for it, at most `max` at once,
//! and an entry unused for `idle` swept out and handed back to the face, which closes what it held. MCP
//! (`mcp_sessions.rs`, around rmcp's session manager), OpenEnv's JSON-RPC sessions (`openenv/`) and ORS
//! (`ors/sessions.rs`) keep their sessions here; each keeps only what its protocol adds.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The table is at its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// Sessions open.
    pub active: usize,
    /// The cap.
    pub max: usize,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    touched: Instant,
}

/// Sessions by id, capped, with an idle sweep.
#[derive(Debug)]
pub struct SessionTable<K, V> {
    map: Mutex<HashMap<K, Entry<V>>>,
    max: usize,
    idle: Duration,
}

impl<K: Eq + Hash + Clone, V> SessionTable<K, V> {
    /// At most `max` sessions; one unused for `idle` may be swept out.
    pub fn new(max: usize, idle: Duration) -> Self {
        SessionTable { map: Mutex::new(HashMap::new()), max, idle }
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.map.lock().is_empty()
    }

    /// Removes the sessions unused for longer than `idle` whose value `may_expire` lets go (a session a
    /// live connection holds may not), and returns them.
    pub fn sweep(&self, may_expire: impl Fn(&V) -> bool) -> Vec<(K, V)> {
        Self::sweep_locked(&mut self.map.lock(), self.idle, &may_expire)
    }

    fn sweep_locked(map: &mut HashMap<K, Entry<V>>, idle: Duration, may_expire: &impl Fn(&V) -> bool) -> Vec<(K, V)> {
        let expired: Vec<K> =
            map.iter().filter(|(_, e)| e.touched.elapsed() > idle && may_expire(&e.value)).map(|(k, _)| k.clone()).collect();
        expired.into_iter().filter_map(|k| map.remove(&k).map(|e| (k, e.value))).collect()
    }

    /// Sweeps (as [`SessionTable::sweep`]), then adds `id` → `value` unless the table is at its cap. Returns
    /// the swept sessions either way, for the face to close what they held.
    pub fn insert(&self, id: K, value: V, may_expire: impl Fn(&V) -> bool) -> (Result<(), Full>, Vec<(K, V)>) {
        let mut map = self.map.lock();
        let swept = Self::sweep_locked(&mut map, self.idle, &may_expire);
        if map.len() >= self.max {
            return (Err(Full { active: map.len(), max: self.max }), swept);
        }
        map.insert(id, Entry { value, touched: Instant::now() });
        (Ok(()), swept)
    }

    /// Runs `f` on session `id`'s value and marks the session used; `None` for an unknown id.
    pub fn with<Q, R>(&self, id: &Q, f: impl FnOnce(&mut V) -> R) -> Option<R>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut map = self.map.lock();
        let e = map.get_mut(id)?;
        e.touched = Instant::now();
        Some(f(&mut e.value))
    }

    /// Removes session `id`; its value, if it was held.
    pub fn remove<Q>(&self, id: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.lock().remove(id).map(|e| e.value)
    }

    /// Removes session `id` if `f` says so, after running it on the value (touching nothing); `None` for
    /// an unknown id.
    pub fn remove_if<Q>(&self, id: &Q, f: impl FnOnce(&V) -> bool) -> Option<bool>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut map = self.map.lock();
        let remove = f(&map.get(id)?.value);
        if remove {
            map.remove(id);
        }
        Some(remove)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_holds_and_a_removed_session_frees_its_place() {
        let t: SessionTable<String, u32> = SessionTable::new(2, Duration::from_secs(60));
        assert!(t.insert("a".into(), 1, |_| true).0.is_ok());
        assert!(t.insert("b".into(), 2, |_| true).0.is_ok());
        assert_eq!(t.insert("c".into(), 3, |_| true).0, Err(Full { active: 2, max: 2 }));
        assert_eq!(
            t.with("a", |v| {
                *v += 10;
                *v
            }),
            Some(11)
        );
        assert_eq!(t.remove("a"), Some(11));
        assert!(t.insert("c".into(), 3, |_| true).0.is_ok());
        assert_eq!(t.with("zz", |v| *v), None);
        assert_eq!(t.remove_if("b", |v| *v == 99), Some(false));
        assert_eq!(t.remove_if("b", |v| *v == 2), Some(true));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn idle_sessions_are_swept_unless_held() {
        let t: SessionTable<&str, bool> = SessionTable::new(2, Duration::ZERO);
        let unheld = |held: &bool| !*held;
        assert!(t.insert("held", true, unheld).0.is_ok());
        assert!(t.insert("idle", false, unheld).0.is_ok());
        std::thread::sleep(Duration::from_millis(2));
        // The table is full, but the idle session that may expire is swept first and handed back.
        let (added, swept) = t.insert("new", false, unheld);
        assert!(added.is_ok());
        assert_eq!(swept, vec![("idle", false)]);
        assert_eq!(t.len(), 2);
        std::thread::sleep(Duration::from_millis(2));
        let mut swept = t.sweep(|_| true);
        swept.sort();
        assert_eq!(swept, vec![("held", true), ("new", false)]);
        assert!(t.is_empty());
    }
}
