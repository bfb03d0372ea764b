//! Facts cache: the people and channels policies decide on, and each person's read
//! decisions, kept between requests and refreshed for exactly what an access-changing
//! event changed.
//!
//! Why: without it every write costs a blocking database read before its policy call, and
//! every read one policy call per channel of the community.
//!
//! Correctness: every change is recorded in a numbered log ([`Change`]); each entry
//! remembers the log position it was loaded at. An entry is used only if no change since
//! then touches it; a read-decision set is brought forward by re-deciding just the
//! channels the changes name. Ingest records a change right after committing an
//! access-changing event (so this process never serves stale facts after answering
//! `OK`), and a bus listener records those from other relay processes (stale for at most
//! the bus latency). When the log has been trimmed past an entry, or holds
//! [`Change::All`], the entry is rebuilt. Time-dependent facts (timeouts, TTL expiry) are
//! stored raw and judged at use time.

use super::changes::Change;
use super::facts::Person;
use super::read::ChannelTable;
use crate::store::ChannelSet;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Entries kept before the cache starts over (bounds memory under many distinct users).
const MAX_ENTRIES: usize = 50_000;
/// Changes remembered; an entry older than the oldest is rebuilt.
const LOG_LEN: usize = 4_096;

struct Entry<T> {
    at: u64,
    value: Arc<T>,
}

/// The changes since some position: exactly these, or "unknown" (rebuild).
pub(super) enum Since {
    Exactly(Vec<Change>),
    Unknown,
}

#[derive(Default)]
struct Log {
    /// Position of the newest change (0: none yet).
    head: u64,
    /// The newest changes, oldest first; the last one is at `head`.
    recent: VecDeque<Change>,
}

impl Log {
    fn since(&self, at: u64) -> Since {
        let behind = self.head.saturating_sub(at);
        if behind == 0 {
            return Since::Exactly(Vec::new());
        }
        let Ok(behind) = usize::try_from(behind) else {
            return Since::Unknown;
        };
        if behind > self.recent.len() {
            return Since::Unknown;
        }
        let changes: Vec<Change> = self
            .recent
            .iter()
            .skip(self.recent.len() - behind)
            .cloned()
            .collect();
        if changes.contains(&Change::All) {
            Since::Unknown
        } else {
            Since::Exactly(changes)
        }
    }
}

/// One person's read decisions in one community.
#[derive(Debug, Clone)]
pub(super) struct Decisions {
    /// Log position they are current at.
    pub(super) at: u64,
    /// The policy generation they were decided under.
    pub(super) generation: u64,
    /// When the whole set was last decided (sets are redecided after a while, so a script
    /// that looks at `req.now` is not frozen forever).
    pub(super) decided_at: Instant,
    /// Channels whose `can_read` allowed this person (shared into every `Scope` built
    /// from these decisions, never copied per request).
    pub(super) allowed: ChannelSet,
    /// The TTL channels among `allowed` → when they expire (small: few channels have one).
    pub(super) expiring: HashMap<String, i64>,
}

#[derive(Default)]
pub(super) struct FactsCache {
    log: Mutex<Log>,
    people: Mutex<HashMap<(i64, String), Entry<Person>>>,
    /// Community id → its channels (not deleted; TTL judged at use).
    channels: Mutex<HashMap<i64, Entry<ChannelTable>>>,
    /// (community id, pubkey) → read decisions.
    decisions: Mutex<HashMap<(i64, String), Decisions>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn put<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    let mut map = lock(map);
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(key, value);
}

impl FactsCache {
    /// The current log position: read it before loading anything, so a change during
    /// the load leaves the entry stale rather than wrongly fresh.
    pub(super) fn position(&self) -> u64 {
        lock(&self.log).head
    }

    /// Record a change.
    pub(super) fn record(&self, change: Change) {
        let mut log = lock(&self.log);
        log.head += 1;
        log.recent.push_back(change);
        if log.recent.len() > LOG_LEN {
            log.recent.pop_front();
        }
    }

    pub(super) fn since(&self, at: u64) -> Since {
        lock(&self.log).since(at)
    }

    pub(super) fn person(&self, community: i64, pubkey: &str) -> Option<Arc<Person>> {
        let key = (community, pubkey.to_owned());
        let (at, value) = {
            let people = lock(&self.people);
            let entry = people.get(&key)?;
            (entry.at, entry.value.clone())
        };
        match self.since(at) {
            Since::Exactly(changes)
                if !changes.iter().any(|c| c.touches_person(community, pubkey)) =>
            {
                Some(value)
            }
            _ => None,
        }
    }

    pub(super) fn put_person(&self, community: i64, pubkey: &str, at: u64, person: Arc<Person>) {
        put(
            &self.people,
            (community, pubkey.to_owned()),
            Entry { at, value: person },
        )
    }

    pub(super) fn channels(&self, community: i64) -> Option<Arc<ChannelTable>> {
        let (at, value) = {
            let channels = lock(&self.channels);
            let entry = channels.get(&community)?;
            (entry.at, entry.value.clone())
        };
        match self.since(at) {
            Since::Exactly(changes) if !changes.iter().any(|c| c.touches_channels(community)) => {
                Some(value)
            }
            _ => None,
        }
    }

    /// The cached table of `community`, fresh or not, with the changes since it was
    /// loaded: enough to refresh only the channels that changed.
    pub(super) fn stale_channels(&self, community: i64) -> Option<(Arc<ChannelTable>, Since)> {
        let (at, value) = {
            let channels = lock(&self.channels);
            let entry = channels.get(&community)?;
            (entry.at, entry.value.clone())
        };
        Some((value, self.since(at)))
    }

    pub(super) fn put_channels(&self, community: i64, at: u64, table: Arc<ChannelTable>) {
        put(&self.channels, community, Entry { at, value: table })
    }

    /// Take a person's decisions out (to bring them forward without copying the set;
    /// they are put back after). A concurrent request meanwhile decides afresh.
    pub(super) fn take_decisions(&self, community: i64, pubkey: &str) -> Option<Decisions> {
        lock(&self.decisions).remove(&(community, pubkey.to_owned()))
    }

    pub(super) fn put_decisions(&self, community: i64, pubkey: &str, decisions: Decisions) {
        put(&self.decisions, (community, pubkey.to_owned()), decisions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(id: &str) -> Change {
        Change::Channel {
            community: 1,
            channel: id.into(),
        }
    }

    #[test]
    fn the_log_answers_exactly_or_unknown() {
        let cache = FactsCache::default();
        let start = cache.position();
        assert!(matches!(cache.since(start), Since::Exactly(c) if c.is_empty()));
        cache.record(channel("a"));
        cache.record(channel("b"));
        match cache.since(start) {
            Since::Exactly(changes) => assert_eq!(changes, vec![channel("a"), channel("b")]),
            Since::Unknown => panic!("both changes are remembered"),
        }
        match cache.since(start + 1) {
            Since::Exactly(changes) => assert_eq!(changes, vec![channel("b")]),
            Since::Unknown => panic!("the last change is remembered"),
        }
        cache.record(Change::All);
        assert!(matches!(cache.since(start + 2), Since::Unknown));
        for i in 0..LOG_LEN {
            cache.record(channel(&i.to_string()));
        }
        assert!(matches!(cache.since(start), Since::Unknown), "trimmed past");
    }

    #[test]
    fn people_survive_changes_that_are_not_theirs() {
        let cache = FactsCache::default();
        let at = cache.position();
        cache.put_person(1, "alice", at, Arc::new(Person::anonymous()));
        cache.record(channel("x"));
        cache.record(Change::Person {
            community: 1,
            pubkey: "bob".into(),
        });
        assert!(cache.person(1, "alice").is_some());
        cache.record(Change::Membership {
            community: 1,
            channel: "x".into(),
            pubkey: "alice".into(),
        });
        assert!(cache.person(1, "alice").is_none());
    }
}
