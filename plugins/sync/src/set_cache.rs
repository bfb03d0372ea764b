//! Record sets kept between opens. NIP-77 makes the relay fingerprint a filter's whole
//! set, so an open of a large set costs its size in reads however little differs; clients
//! that poll a quiet community open the same set again and again. The last sets read are
//! kept, sealed, and an open of the same filter by a reader of the same scope reuses one
//! while it is still true:
//!
//! - no write has committed since it was read: the store's change mark is equal
//!   (`buzz_core::store::ChangeMark`, taken before the set's snapshot);
//! - no stored event has expired since: it is used only before the earliest expiry the
//!   read saw ahead (`store::next_expiry`);
//! - it is at most [`MAX_AGE`] old, which bounds what a lost move of PostgreSQL's
//!   shared mark could cost.
//!
//! A set that is no longer the set may still be the start of the next one. On SQLite a
//! kept set also holds the store's append point of its read
//! (`buzz_core::store::AppendPoint`); if every commit since only appended independent
//! events (a team chatting), the next open reads just the rows appended since and adds
//! them to a copy of the set (`records.rs`), instead of reading the whole set again.
//!
//! A scope is the community, whether it reads community-wide rows, and which channels:
//! two readers of one scope may read exactly the same rows, so they share the set (and
//! its memory: sessions hold it through an `Arc`). The kept sets hold at most
//! `max_sync_records` records together (the least recently used goes first); sessions
//! are charged their records as before, whether their set is shared or not.

use buzz_core::store::{AppendPoint, ChangeMark, ChannelScope, Scope};
use buzz_nostr::filter::Filter;
use negentropy::{Bound, Error, Item, NegentropyStorageBase, NegentropyStorageVector};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a kept set is reused.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(30);

/// A sealed record set that sessions and the cache hold together.
#[derive(Clone)]
pub(crate) struct SharedSet(pub(crate) Arc<NegentropyStorageVector>);

impl NegentropyStorageBase for SharedSet {
    fn size(&self) -> Result<usize, Error> {
        self.0.size()
    }

    fn get_item(&self, i: usize) -> Result<Option<Item>, Error> {
        self.0.get_item(i)
    }

    fn iterate(
        &self,
        begin: usize,
        end: usize,
        cb: &mut dyn FnMut(Item, usize) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        self.0.iterate(begin, end, cb)
    }

    fn find_lower_bound(&self, first: usize, last: usize, value: &Bound) -> usize {
        self.0.find_lower_bound(first, last, value)
    }
}

/// Which set: the reader's scope and the filter (its `limit` included).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SetKey {
    community_id: i64,
    community_wide: bool,
    channels: ChannelScope,
    /// The parsed filter's debug text: equal for equal filters (tags are ordered).
    filter: String,
}

impl SetKey {
    pub(crate) fn of(scope: &Scope, filter: &Filter) -> SetKey {
        SetKey {
            community_id: scope.community_id,
            community_wide: scope.community_wide,
            channels: scope.channels.clone(),
            filter: format!("{filter:?}"),
        }
    }
}

impl Hash for SetKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.community_id.hash(state);
        self.community_wide.hash(state);
        self.filter.hash(state);
        // The channels by kind and count: equality compares them whole.
        match &self.channels {
            ChannelScope::All => 0usize.hash(state),
            ChannelScope::None => 1usize.hash(state),
            ChannelScope::Only(set) => (2 + set.len()).hash(state),
        }
    }
}

/// A set as read, and what vouches for it.
pub(crate) struct Kept {
    pub(crate) set: SharedSet,
    pub(crate) records: usize,
    pub(crate) mark: ChangeMark,
    /// Unix seconds: the earliest expiry ahead when it was read (`None`: none).
    pub(crate) valid_until: Option<i64>,
    /// Where its read stood among the store's appends (SQLite; `None` on PostgreSQL).
    pub(crate) point: Option<AppendPoint>,
}

/// What the cache holds for an open.
pub(crate) enum Lookup {
    /// Still the set: reuse it as it is.
    Fresh(Arc<Kept>),
    /// Not the set any more, but unexpired and with an append point: the next set may
    /// be this one and the rows appended since.
    Base(Arc<Kept>),
    Miss,
}

struct Entry {
    kept: Arc<Kept>,
    read_at: Instant,
    used_at: Instant,
}

pub(crate) struct SetCache {
    entries: Mutex<HashMap<SetKey, Entry>>,
    max_records: usize,
}

impl SetCache {
    /// Keeps at most `max_records` records over all its sets.
    pub(crate) fn new(max_records: usize) -> SetCache {
        SetCache {
            entries: Mutex::new(HashMap::new()),
            max_records,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SetKey, Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The kept set for `key` if it is still the set under `mark` at `now_secs`, else
    /// one it may be brought up from. A base is not bounded by [`MAX_AGE`]: its append
    /// point, read in the same transaction as its rows, vouches for it exactly (the age
    /// bounds only what a lost move of PostgreSQL's shared mark could cost).
    pub(crate) fn get(
        &self,
        key: &SetKey,
        mark: ChangeMark,
        now_secs: i64,
        now: Instant,
    ) -> Lookup {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(key) else {
            return Lookup::Miss;
        };
        let unexpired = entry.kept.valid_until.is_none_or(|t| now_secs < t);
        if unexpired
            && entry.kept.mark == mark
            && now.saturating_duration_since(entry.read_at) < MAX_AGE
        {
            entry.used_at = now;
            return Lookup::Fresh(entry.kept.clone());
        }
        if unexpired && entry.kept.point.is_some() {
            return Lookup::Base(entry.kept.clone());
        }
        let stale = entries.remove(key);
        drop(entries);
        drop(stale);
        Lookup::Miss
    }

    /// Keep `kept` as read at `now`, dropping the least recently used sets to make room.
    /// A set larger than the whole cache is not kept.
    pub(crate) fn put(&self, key: SetKey, kept: Arc<Kept>, now: Instant) {
        if kept.records > self.max_records {
            return;
        }
        let mut dropped = Vec::new();
        {
            let mut entries = self.lock();
            if let Some(old) = entries.remove(&key) {
                dropped.push(old);
            }
            let mut held: usize = entries.values().map(|e| e.kept.records).sum();
            while held + kept.records > self.max_records {
                let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, e)| e.used_at)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                if let Some(old) = entries.remove(&oldest) {
                    held -= old.kept.records;
                    dropped.push(old);
                }
            }
            entries.insert(
                key,
                Entry {
                    kept,
                    read_at: now,
                    used_at: now,
                },
            );
        }
        // Freed outside the lock: a large set takes a moment to free.
        drop(dropped);
    }

    /// Sets kept and the records they hold (for tests and status).
    pub(crate) fn totals(&self) -> (usize, usize) {
        let entries = self.lock();
        (
            entries.len(),
            entries.values().map(|e| e.kept.records).sum(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_core::store::ChannelSet;

    fn scope(channels: ChannelScope) -> Scope {
        Scope {
            community_id: 1,
            community_wide: true,
            channels,
            expiry: HashMap::new(),
        }
    }

    fn kept(records: usize, mark: ChangeMark, valid_until: Option<i64>) -> Arc<Kept> {
        kept_at(records, mark, valid_until, None)
    }

    fn kept_at(
        records: usize,
        mark: ChangeMark,
        valid_until: Option<i64>,
        point: Option<AppendPoint>,
    ) -> Arc<Kept> {
        Arc::new(Kept {
            set: SharedSet(Arc::new(NegentropyStorageVector::new())),
            records,
            mark,
            valid_until,
            point,
        })
    }

    impl Lookup {
        fn is_fresh(&self) -> bool {
            matches!(self, Lookup::Fresh(_))
        }
        fn is_base(&self) -> bool {
            matches!(self, Lookup::Base(_))
        }
        fn is_miss(&self) -> bool {
            matches!(self, Lookup::Miss)
        }
    }

    fn key(filter: &str) -> SetKey {
        let filter = Filter::parse(&serde_json::from_str(filter).expect("json")).expect("filter");
        SetKey::of(&scope(ChannelScope::None), &filter)
    }

    #[test]
    fn a_set_is_reused_only_under_its_mark_before_its_expiry_and_age() {
        let cache = SetCache::new(100);
        let (mark, later) = (ChangeMark::for_tests(1), ChangeMark::for_tests(2));
        let t0 = Instant::now();
        cache.put(key("{}"), kept(10, mark, Some(1_000)), t0);
        assert!(cache.get(&key("{}"), mark, 999, t0).is_fresh());
        assert!(cache.get(&key("{\"kinds\":[1]}"), mark, 999, t0).is_miss());
        assert!(
            cache.get(&key("{}"), later, 999, t0).is_miss(),
            "another mark"
        );
        assert_eq!(cache.totals(), (0, 0), "a stale set is dropped");

        cache.put(key("{}"), kept(10, mark, Some(1_000)), t0);
        assert!(
            cache.get(&key("{}"), mark, 1_000, t0).is_miss(),
            "at its expiry"
        );
        cache.put(key("{}"), kept(10, mark, None), t0);
        assert!(
            cache
                .get(&key("{}"), mark, i64::MAX, t0 + MAX_AGE)
                .is_miss(),
            "too old"
        );
    }

    #[test]
    fn a_set_with_an_append_point_is_a_base_until_its_expiry_whatever_its_age() {
        let cache = SetCache::new(100);
        let (mark, later) = (ChangeMark::for_tests(1), ChangeMark::for_tests(2));
        let point = Some(AppendPoint::for_tests(3, 40));
        let t0 = Instant::now();
        cache.put(key("{}"), kept_at(10, mark, Some(1_000), point), t0);
        assert!(cache.get(&key("{}"), mark, 999, t0).is_fresh());
        assert!(
            cache.get(&key("{}"), later, 999, t0).is_base(),
            "another mark"
        );
        assert!(
            cache.get(&key("{}"), mark, 999, t0 + MAX_AGE).is_base(),
            "too old to reuse as it is"
        );
        assert_eq!(cache.totals(), (1, 10), "a base stays until replaced");
        assert!(
            cache.get(&key("{}"), later, 1_000, t0).is_miss(),
            "at its expiry"
        );
        assert_eq!(cache.totals(), (0, 0), "an expired set is dropped");
    }

    #[test]
    fn scopes_of_other_channels_do_not_share_a_set() {
        let cache = SetCache::new(100);
        let mark = ChangeMark::for_tests(1);
        let now = Instant::now();
        let filter = Filter::default();
        let one: ChannelSet = ["a".to_owned()].into_iter().collect();
        let other: ChannelSet = ["b".to_owned()].into_iter().collect();
        let of = |set: &ChannelSet| SetKey::of(&scope(ChannelScope::Only(set.clone())), &filter);
        cache.put(of(&one), kept(1, mark, None), now);
        assert!(cache.get(&of(&one), mark, 0, now).is_fresh());
        assert!(cache.get(&of(&other), mark, 0, now).is_miss());
    }

    #[test]
    fn the_kept_records_stay_within_the_bound_least_recently_used_first() {
        let cache = SetCache::new(100);
        let mark = ChangeMark::for_tests(1);
        let t = Instant::now();
        let at = |ms| t + Duration::from_millis(ms);
        cache.put(key("{\"kinds\":[1]}"), kept(40, mark, None), at(0));
        cache.put(key("{\"kinds\":[2]}"), kept(40, mark, None), at(1));
        // Kind 1 used since: kind 2 is the least recently used.
        assert!(cache
            .get(&key("{\"kinds\":[1]}"), mark, 0, at(2))
            .is_fresh());
        cache.put(key("{\"kinds\":[3]}"), kept(40, mark, None), at(3));
        assert_eq!(cache.totals(), (2, 80));
        assert!(cache.get(&key("{\"kinds\":[2]}"), mark, 0, at(4)).is_miss());
        assert!(cache
            .get(&key("{\"kinds\":[1]}"), mark, 0, at(4))
            .is_fresh());
        // Larger than the whole bound: not kept, nothing dropped for it.
        cache.put(key("{\"kinds\":[4]}"), kept(101, mark, None), at(5));
        assert_eq!(cache.totals(), (2, 80));
    }
}
