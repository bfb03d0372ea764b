//! Facts cache: the people and channels policies decide on, kept between requests and
//! dropped wholesale whenever an access-changing event is stored.
//!
//! Why: without it every write costs a blocking database read before its policy call.
//! Correctness: each entry remembers the epoch it was loaded in; [`FactsCache::invalidate`]
//! bumps the epoch. Ingest bumps it right after committing an access-changing event (so
//! this process never serves stale facts after answering `OK`), and a bus listener bumps
//! it for such events from other relay processes (stale for at most the bus latency).
//! Time-dependent facts (timeouts, TTL expiry) are stored raw and judged at use time.

use super::facts::Person;
use crate::store::channel_state::ChannelRow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Entries kept before the cache starts over (bounds memory under many distinct users).
const MAX_ENTRIES: usize = 50_000;

struct Entry<T> {
    epoch: u64,
    value: Arc<T>,
}

#[derive(Default)]
pub(super) struct FactsCache {
    epoch: AtomicU64,
    people: Mutex<HashMap<(i64, String), Entry<Person>>>,
    /// Community id → its channels (not deleted; TTL judged at use).
    channels: Mutex<HashMap<i64, Entry<Vec<ChannelRow>>>>,
}

fn get<K: std::hash::Hash + Eq, T>(
    map: &Mutex<HashMap<K, Entry<T>>>,
    key: &K,
    epoch: u64,
) -> Option<Arc<T>> {
    let map = map.lock().ok()?;
    map.get(key)
        .filter(|e| e.epoch == epoch)
        .map(|e| e.value.clone())
}

fn put<K: std::hash::Hash + Eq, T>(
    map: &Mutex<HashMap<K, Entry<T>>>,
    key: K,
    epoch: u64,
    value: Arc<T>,
) {
    if let Ok(mut map) = map.lock() {
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(key, Entry { epoch, value });
    }
}

impl FactsCache {
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Forget everything loaded so far.
    pub(super) fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn person(&self, community: i64, pubkey: &str, epoch: u64) -> Option<Arc<Person>> {
        get(&self.people, &(community, pubkey.to_owned()), epoch)
    }

    pub(super) fn put_person(&self, community: i64, pubkey: &str, epoch: u64, person: Arc<Person>) {
        put(&self.people, (community, pubkey.to_owned()), epoch, person)
    }

    pub(super) fn channels(&self, community: i64, epoch: u64) -> Option<Arc<Vec<ChannelRow>>> {
        get(&self.channels, &community, epoch)
    }

    pub(super) fn put_channels(&self, community: i64, epoch: u64, rows: Arc<Vec<ChannelRow>>) {
        put(&self.channels, community, epoch, rows)
    }
}
