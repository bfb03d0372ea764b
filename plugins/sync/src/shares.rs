//! Who may hold how much of the process's record budget (`max_records_in_memory`).
//!
//! Every session holds a [`Charge`]: its records, counted against the whole process, its
//! community and its reader, and one of its reader's sessions. Three rules, checked
//! together under one lock so concurrent opens never overshoot:
//!
//! - a **reader** holds at most `max_sessions_per_pubkey` sessions and
//!   `max_records_per_pubkey` records over all its connections — the client's own doing,
//!   so refused `blocked:`;
//! - every **community** keeps `records_reserved_per_community` free for its readers
//!   (at most a `1/n` part of the budget with `n` communities): a charge may take only
//!   what is left after the other communities' unused reserves — so one community cannot
//!   starve another, and a relay of one community gives it the whole budget;
//! - the **process** holds at most `max_records_in_memory`.
//!
//! The last two are other readers' doing: a retryable `error:`.
//!
//! A charge is taken before the set is read, for as many records as the open could need
//! (the filter's `limit` or `max_sync_records`) or as are left, whichever is fewer; an
//! open with nothing left is refused without reading a row. The read then stops one row
//! past the charge, and the charge shrinks to the set it read.
//!
//! A reader is its authenticated pubkey; before AUTH, its IP address (its connections
//! share one count); with neither, its connection. Counts are this process's: each relay
//! process holds its own sessions and budget.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Whose share a session is charged to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Reader {
    Pubkey(String),
    Address(IpAddr),
    Connection(u64),
}

/// The bounds, as configured.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    pub(crate) max_records: usize,
    pub(crate) per_reader_records: usize,
    pub(crate) per_reader_sessions: usize,
    /// `records_reserved_per_community` as configured (capped per community count here).
    pub(crate) reserved_per_community: usize,
}

/// Why a charge could not be taken, or what bound a charge smaller than asked met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// The reader has its sessions open.
    ReaderSessions(usize),
    /// The reader's records (its share) are spent: `(held, share)`.
    ReaderRecords(usize, usize),
    /// What is left is other communities' reserve.
    Reserved,
    /// The process's budget is spent.
    Process,
}

#[derive(Default)]
struct Ledger {
    total: usize,
    communities: HashMap<i64, usize>,
    /// (sessions, records) per reader.
    readers: HashMap<Reader, (usize, usize)>,
}

pub(crate) struct Shares {
    ledger: Mutex<Ledger>,
    bounds: Bounds,
    /// The relay's communities, each with its effective reserve.
    communities: Vec<i64>,
    reserve: usize,
}

/// One session's hold on the budget; given back when dropped.
pub(crate) struct Charge {
    shares: Arc<Shares>,
    community: i64,
    reader: Reader,
    records: usize,
    /// The bound that made this charge smaller than asked, if one did.
    pub(crate) capped_by: Option<Limit>,
}

impl Shares {
    pub(crate) fn new(bounds: Bounds, communities: Vec<i64>) -> Self {
        let n = communities.len().max(1);
        let reserve = bounds.reserved_per_community.min(bounds.max_records / n);
        Shares {
            ledger: Mutex::new(Ledger::default()),
            bounds,
            communities,
            reserve,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ledger> {
        // Plain counters: a panic elsewhere leaves them consistent.
        self.ledger
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Take a session for `reader` in `community` with room for up to `want` records
    /// (fewer when less is left: see [`Charge::capped_by`]); refused when the reader has
    /// its sessions, or when `want` is positive and no record is left.
    pub(crate) fn take(
        self: &Arc<Self>,
        community: i64,
        reader: Reader,
        want: usize,
    ) -> Result<Charge, Limit> {
        let mut ledger = self.lock();
        let (sessions, held) = ledger.readers.get(&reader).copied().unwrap_or_default();
        if sessions >= self.bounds.per_reader_sessions {
            return Err(Limit::ReaderSessions(self.bounds.per_reader_sessions));
        }
        let share = self.bounds.per_reader_records.min(self.bounds.max_records);
        let reader_room = share.saturating_sub(held);
        let free = self.bounds.max_records.saturating_sub(ledger.total);
        let others_reserve: usize = self
            .communities
            .iter()
            .filter(|c| **c != community)
            .map(|c| {
                let used = ledger.communities.get(c).copied().unwrap_or(0);
                self.reserve.saturating_sub(used)
            })
            .sum();
        let process_room = free.saturating_sub(others_reserve);
        let (room, bound) = if reader_room <= process_room {
            (reader_room, Limit::ReaderRecords(held, share))
        } else if free > process_room {
            (process_room, Limit::Reserved)
        } else {
            (process_room, Limit::Process)
        };
        if want > 0 && room == 0 {
            return Err(bound);
        }
        let records = want.min(room);
        ledger.total += records;
        *ledger.communities.entry(community).or_default() += records;
        let entry = ledger.readers.entry(reader.clone()).or_default();
        entry.0 += 1;
        entry.1 += records;
        drop(ledger);
        Ok(Charge {
            shares: self.clone(),
            community,
            reader,
            records,
            capped_by: (records < want).then_some(bound),
        })
    }

    /// Records held now by the whole process.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.lock().total
    }

    fn give_back(&self, community: i64, reader: &Reader, records: usize, session: bool) {
        let mut ledger = self.lock();
        ledger.total = ledger.total.saturating_sub(records);
        if let Some(used) = ledger.communities.get_mut(&community) {
            *used = used.saturating_sub(records);
            if *used == 0 {
                ledger.communities.remove(&community);
            }
        }
        if let Some((sessions, held)) = ledger.readers.get_mut(reader) {
            *held = held.saturating_sub(records);
            if session {
                *sessions = sessions.saturating_sub(1);
            }
            if *sessions == 0 && *held == 0 {
                ledger.readers.remove(reader);
            }
        }
    }
}

impl Charge {
    /// Records this charge holds room for.
    pub(crate) fn records(&self) -> usize {
        self.records
    }

    /// Keep room for `records` only (the set that was read); never grows.
    pub(crate) fn shrink(&mut self, records: usize) {
        if records < self.records {
            let freed = self.records - records;
            self.shares
                .give_back(self.community, &self.reader, freed, false);
            self.records = records;
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.shares
            .give_back(self.community, &self.reader, self.records, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(max: usize, per_reader: usize, reserve: usize, communities: &[i64]) -> Arc<Shares> {
        Arc::new(Shares::new(
            Bounds {
                max_records: max,
                per_reader_records: per_reader,
                per_reader_sessions: 3,
                reserved_per_community: reserve,
            },
            communities.to_vec(),
        ))
    }

    fn key(name: &str) -> Reader {
        Reader::Pubkey(name.into())
    }

    #[test]
    fn a_reader_holds_its_share_and_its_sessions() {
        let s = shares(100, 40, 0, &[1]);
        let a = s.take(1, key("a"), 30).expect("30 of 40");
        let b = s.take(1, key("a"), 30).expect("the 10 left");
        assert_eq!(b.records(), 10);
        assert_eq!(b.capped_by, Some(Limit::ReaderRecords(30, 40)));
        assert_eq!(
            s.take(1, key("a"), 1).err(),
            Some(Limit::ReaderRecords(40, 40))
        );
        // An empty set needs no records, only a session: the third.
        let c = s.take(1, key("a"), 0).expect("a third session");
        assert_eq!(s.take(1, key("a"), 0).err(), Some(Limit::ReaderSessions(3)));
        // Another reader has its own share.
        assert_eq!(s.take(1, key("b"), 40).expect("b").records(), 40);
        drop((a, c));
        assert_eq!(s.take(1, key("a"), 40).expect("freed").records(), 30);
    }

    #[test]
    fn a_charge_shrinks_to_its_set_and_is_given_back() {
        let s = shares(100, 100, 0, &[1]);
        let mut a = s.take(1, key("a"), 60).expect("60");
        a.shrink(5);
        assert_eq!(s.held(), 5);
        a.shrink(50);
        assert_eq!(a.records(), 5, "never grows");
        drop(a);
        assert_eq!(s.held(), 0);
        assert!(s.lock().readers.is_empty() && s.lock().communities.is_empty());
    }

    #[test]
    fn other_communities_keep_their_reserve() {
        let s = shares(60, 60, 20, &[1, 2]);
        let a = s.take(1, key("a"), 60).expect("what is not reserved");
        assert_eq!(a.records(), 40);
        assert_eq!(a.capped_by, Some(Limit::Reserved));
        assert_eq!(s.take(1, key("b"), 1).err(), Some(Limit::Reserved));
        let b = s.take(2, key("b"), 60).expect("the reserve");
        assert_eq!(b.records(), 20);
        assert_eq!(s.take(2, key("c"), 1).err(), Some(Limit::Process));
        // A reserve in use is not kept twice: community 2 above its reserve frees none.
        drop(a);
        assert_eq!(s.take(1, key("c"), 60).expect("c").records(), 40);
    }

    #[test]
    fn one_community_holds_everything_and_reserves_fit_the_budget() {
        let s = shares(60, 60, 1_000, &[1]);
        assert_eq!(s.take(1, key("a"), 60).expect("all").records(), 60);
        // Three communities, a reserve larger than a third: each keeps a third.
        let s = shares(60, 60, 1_000, &[1, 2, 3]);
        assert_eq!(s.take(1, key("a"), 60).expect("a third").records(), 20);
    }
}
