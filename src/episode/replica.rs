//! Several replicas behind one proxy. An episode lives in one process's memory, so every call of it must
//! reach the replica that holds it. The rule, written once here: **an episode id names its replica**.
//! With `--replica NAME`, every id this server gives out starts with `NAME.` (its own `ep-…` ids, a
//! client-chosen id, fork ids), the proxy routes a call by the part of the `memgym-episode` request header
//! before the first `.`, and a call for an id that names another replica is refused as misrouted rather
//! than answered "not found". The book's "Operations → Replicas" says why ids rather than a hash.
//!
//! Draining lives here too: after SIGTERM the server opens no new episode (a retryable `DRAINING`, so a
//! client's retry lands on another replica) and keeps serving the episodes it holds.

use std::sync::atomic::{AtomicBool, Ordering};

use super::EpisodeError;

/// The request header (gRPC metadata) a proxy routes episode calls by: the episode id.
pub const EPISODE_HEADER: &str = "memgym-episode";
/// The response header naming the replica that answered.
pub const REPLICA_HEADER: &str = "memgym-replica";

/// The separator between a replica's name and the rest of an id.
const SEPARATOR: char = '.';

/// Checks a `--replica` name: 1 to 32 lowercase letters, digits and '-', so that it is a proxy backend
/// name and cannot hold the separator.
pub fn valid_replica_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 32 {
        return Err(format!("must be 1 to 32 characters, got {}", name.len()));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
        return Err(format!("may hold only lowercase letters, digits and '-', found {c:?}"));
    }
    Ok(())
}

/// The replica that names this server's ids, and whether it is draining.
#[derive(Debug, Default)]
pub struct Replica {
    name: Option<String>,
    draining: AtomicBool,
}

impl Replica {
    /// A replica named `name` (checked by [`valid_replica_name`]); `None` for a lone server.
    pub fn new(name: Option<String>) -> Replica {
        Replica { name, draining: AtomicBool::new(false) }
    }

    /// The name, when the server is one of several.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// `id` with this replica's name in front (a lone server: `id`).
    pub fn prefixed(&self, id: String) -> String {
        match &self.name {
            Some(name) => format!("{name}{SEPARATOR}{id}"),
            None => id,
        }
    }

    /// The id an episode gets here: `id` itself on a lone server or when it already names this replica,
    /// else `NAME.id`. The result is checked as `field` (the prefix counts against the length cap).
    pub fn own(&self, field: &str, id: &str) -> Result<String, EpisodeError> {
        let owned = if self.names_me(id) { id.to_string() } else { self.prefixed(id.to_string()) };
        super::create::valid_id(field, &owned)?;
        Ok(owned)
    }

    /// Refuses an id that names another replica (a misrouted call); a lone server holds every id.
    pub fn check(&self, id: &str) -> Result<(), EpisodeError> {
        match &self.name {
            Some(name) if !self.names_me(id) => Err(EpisodeError::WrongReplica {
                id: id.to_string(),
                named: id.split_once(SEPARATOR).map(|(r, _)| r.to_string()),
                replica: name.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn names_me(&self, id: &str) -> bool {
        self.name.as_deref().is_some_and(|name| id.split_once(SEPARATOR).is_some_and(|(r, _)| r == name))
    }

    /// Starts draining: no new episodes from now on.
    pub fn start_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is draining.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Refuses a new episode while draining.
    pub fn admit_new(&self) -> Result<(), EpisodeError> {
        if self.draining() {
            return Err(EpisodeError::Draining { replica: self.name.clone() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_replica() {
        let r = Replica::new(Some("r2".into()));
        assert_eq!(r.own("episode_id", "q-7").unwrap(), "r2.q-7");
        assert_eq!(r.own("episode_id", "r2.q-7").unwrap(), "r2.q-7", "a retry with the returned id stays put");
        assert_eq!(r.own("episode_id", "r1.q-7").unwrap(), "r2.r1.q-7", "another replica's prefix is only text");
        assert!(r.own("episode_id", &"x".repeat(126)).is_err(), "the prefix counts against the cap");
        assert!(r.check("r2.q-7").is_ok());
        let err = r.check("r1.q-7").unwrap_err().to_string();
        assert!(err.contains("r1") && err.contains("r2") && err.contains("memgym-episode"), "{err}");
        assert!(r.check("q-7").is_err(), "an id with no replica is not here");
        let lone = Replica::new(None);
        assert_eq!(lone.own("episode_id", "a.b").unwrap(), "a.b");
        assert!(lone.check("r1.q").is_ok());
    }

    #[test]
    fn draining_refuses_new_episodes_only() {
        let r = Replica::new(Some("r1".into()));
        assert!(r.admit_new().is_ok());
        r.start_drain();
        assert!(matches!(r.admit_new(), Err(EpisodeError::Draining { .. })));
        assert!(r.check("r1.x").is_ok(), "its own episodes are still served");
    }

    #[test]
    fn replica_names_are_backend_names() {
        assert!(valid_replica_name("r1").is_ok() && valid_replica_name("west-2").is_ok());
        for bad in ["", "R1", "r.1", "r 1", &"r".repeat(33)] {
            assert!(valid_replica_name(bad).is_err(), "{bad}");
        }
    }
}
