//! Open reconciliation sessions, per WebSocket connection.
//!
//! Bounds: a connection holds at most `max_sessions_per_connection` sessions; a session
//! holds at most `max_sync_records` records (checked before it exists, `records.rs`);
//! every session keeps a [`Charge`] on the process's record budget — its reader's,
//! its community's and the process's shares, `shares.rs` — given back when it is
//! dropped, so memory is bounded however many connections sync at once. A session
//! unused for `idle_timeout_secs`, or open for `max_session_secs` however busy, is
//! dropped (by the sweeper, or when its connection next speaks) and leaves a small
//! marker, so its next `NEG-MSG` hears why; markers are bounded like sessions. A
//! connection's sessions go when it closes.
//!
//! A connection's messages are answered one at a time (core runs them on the
//! connection's task), so a session is taken out while its message is reconciled and
//! put back after: the lock is never held across the work.

use crate::set_cache::SharedSet;
use crate::shares::Charge;
use negentropy::Negentropy;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bytes one record takes in a session: a 64-bit timestamp and a 32-byte id.
pub const RECORD_BYTES: usize = 40;

/// The negentropy state of one open session.
pub(crate) type Engine = Negentropy<'static, SharedSet>;

/// One open reconciliation.
pub(crate) struct Session {
    pub(crate) engine: Engine,
    pub(crate) records: usize,
    opened: Instant,
    last_used: Instant,
    /// This session's hold on the process's record budget.
    _charge: Charge,
}

impl Session {
    /// Bytes this session's record set takes (the records; the engine's own state is a
    /// few words).
    #[cfg(test)]
    pub(crate) fn record_bytes(&self) -> usize {
        self.records * RECORD_BYTES
    }
}

/// Why the relay dropped a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Unused for `idle_timeout_secs`.
    Idle,
    /// Open for `max_session_secs`.
    Lifetime,
}

enum Slot {
    Open(Box<Session>),
    /// Dropped by the relay at this moment: a later `NEG-MSG` is told why.
    TimedOut(Instant, Ended),
    /// Taken out while its message is answered.
    Busy,
}

/// What became of a session a `NEG-MSG` names.
pub(crate) enum Lookup {
    Found(Box<Session>),
    TimedOut(Ended),
    Unknown,
}

/// How long sessions may live.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lifetimes {
    /// Without a message (`idle_timeout_secs`).
    pub(crate) idle: Duration,
    /// At all (`max_session_secs`).
    pub(crate) whole: Duration,
}

pub(crate) struct Sessions {
    by_connection: Mutex<HashMap<u64, HashMap<String, Slot>>>,
    max_per_connection: usize,
    lifetimes: Lifetimes,
}

impl Sessions {
    pub(crate) fn new(max_per_connection: usize, lifetimes: Lifetimes) -> Self {
        Sessions {
            by_connection: Mutex::new(HashMap::new()),
            max_per_connection,
            lifetimes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, HashMap<String, Slot>>> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep going.
        self.by_connection
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Close `sub` on `connection` if open (NEG-CLOSE, a replacing NEG-OPEN, NEG-ERR).
    pub(crate) fn close(&self, connection: u64, sub: &str) {
        let removed = {
            let mut all = self.lock();
            let removed = all.get_mut(&connection).and_then(|c| c.remove(sub));
            if all.get(&connection).is_some_and(HashMap::is_empty) {
                all.remove(&connection);
            }
            removed
        };
        // Dropped outside the lock: freeing a large record set takes a moment.
        drop(removed);
    }

    /// May `connection` open one more session? Counts open and busy sessions, after
    /// expiring its idle and old ones; `Err` carries `max_sessions_per_connection`.
    pub(crate) fn has_room(&self, connection: u64, now: Instant) -> Result<(), usize> {
        let mut dropped = Vec::new();
        let result = {
            let mut all = self.lock();
            let Some(slots) = all.get_mut(&connection) else {
                return Ok(());
            };
            expire(slots, now, self.lifetimes, &mut dropped);
            let open = slots
                .values()
                .filter(|s| !matches!(s, Slot::TimedOut(..)))
                .count();
            if open >= self.max_per_connection {
                Err(self.max_per_connection)
            } else {
                Ok(())
            }
        };
        drop(dropped);
        result
    }

    /// Register a new session under `sub`.
    pub(crate) fn open(
        &self,
        connection: u64,
        sub: String,
        engine: Engine,
        charge: Charge,
        now: Instant,
    ) {
        let session = Session {
            engine,
            records: charge.records(),
            opened: now,
            last_used: now,
            _charge: charge,
        };
        let replaced = self
            .lock()
            .entry(connection)
            .or_default()
            .insert(sub, Slot::Open(Box::new(session)));
        drop(replaced);
    }

    /// Take `sub`'s session out to answer a message (put it back with [`Self::put_back`]).
    pub(crate) fn take(&self, connection: u64, sub: &str, now: Instant) -> Lookup {
        let mut dropped = Vec::new();
        let found = {
            let mut all = self.lock();
            let Some(slots) = all.get_mut(&connection) else {
                return Lookup::Unknown;
            };
            expire(slots, now, self.lifetimes, &mut dropped);
            match slots.get_mut(sub) {
                Some(slot @ Slot::Open(_)) => match std::mem::replace(slot, Slot::Busy) {
                    Slot::Open(session) => Lookup::Found(session),
                    _ => Lookup::Unknown,
                },
                Some(Slot::TimedOut(_, why)) => {
                    // Told once; the id is free again.
                    let why = *why;
                    slots.remove(sub);
                    Lookup::TimedOut(why)
                }
                Some(Slot::Busy) | None => Lookup::Unknown,
            }
        };
        drop(dropped);
        found
    }

    /// Put a session back after its message was answered. If the slot is gone meanwhile
    /// (the connection closed, a NEG-CLOSE), the session is dropped.
    pub(crate) fn put_back(
        &self,
        connection: u64,
        sub: &str,
        mut session: Box<Session>,
        now: Instant,
    ) {
        session.last_used = now;
        let mut all = self.lock();
        if let Some(slot @ Slot::Busy) = all.get_mut(&connection).and_then(|c| c.get_mut(sub)) {
            *slot = Slot::Open(session);
            return;
        }
        drop(all);
        drop(session);
    }

    /// The connection ended: drop all its sessions.
    pub(crate) fn connection_closed(&self, connection: u64) {
        let removed = self.lock().remove(&connection);
        drop(removed);
    }

    /// Drop every session idle past the timeout or open past its lifetime, on every
    /// connection (the sweeper), and forget old markers. Returns how many were dropped.
    pub(crate) fn sweep(&self, now: Instant) -> usize {
        let mut dropped = Vec::new();
        {
            let mut all = self.lock();
            for slots in all.values_mut() {
                expire(slots, now, self.lifetimes, &mut dropped);
            }
            all.retain(|_, slots| !slots.is_empty());
        }
        let n = dropped.len();
        drop(dropped);
        n
    }

    /// Sessions open now (busy ones included) and the records they hold, process-wide.
    pub(crate) fn totals(&self) -> (usize, usize) {
        let all = self.lock();
        let mut sessions = 0;
        let mut records = 0;
        for slot in all.values().flat_map(HashMap::values) {
            match slot {
                Slot::Open(s) => {
                    sessions += 1;
                    records += s.records;
                }
                Slot::Busy => sessions += 1,
                Slot::TimedOut(..) => {}
            }
        }
        (sessions, records)
    }
}

/// Why `session` must go at `now`, if it must.
fn ended(session: &Session, now: Instant, lifetimes: Lifetimes) -> Option<Ended> {
    if now.saturating_duration_since(session.opened) >= lifetimes.whole {
        Some(Ended::Lifetime)
    } else if now.saturating_duration_since(session.last_used) >= lifetimes.idle {
        Some(Ended::Idle)
    } else {
        None
    }
}

/// Turn `slots`' idle and old sessions into markers (their sessions into `dropped`, freed
/// by the caller outside the lock); forget markers after [`MARKER_TTL`], and keep at most
/// [`MAX_MARKERS`].
fn expire(
    slots: &mut HashMap<String, Slot>,
    now: Instant,
    lifetimes: Lifetimes,
    dropped: &mut Vec<Session>,
) {
    for slot in slots.values_mut() {
        if let Slot::Open(session) = slot {
            if let Some(why) = ended(session, now, lifetimes) {
                if let Slot::Open(session) = std::mem::replace(slot, Slot::TimedOut(now, why)) {
                    dropped.push(*session);
                }
            }
        }
    }
    slots.retain(|_, slot| match slot {
        Slot::TimedOut(at, _) => now.saturating_duration_since(*at) < MARKER_TTL,
        _ => true,
    });
    let markers = slots
        .values()
        .filter(|s| matches!(s, Slot::TimedOut(..)))
        .count();
    if markers > MAX_MARKERS {
        let mut oldest: Vec<(Instant, String)> = slots
            .iter()
            .filter_map(|(sub, s)| match s {
                Slot::TimedOut(at, _) => Some((*at, sub.clone())),
                _ => None,
            })
            .collect();
        oldest.sort();
        for (_, sub) in oldest.into_iter().take(markers - MAX_MARKERS) {
            slots.remove(&sub);
        }
    }
}

/// Markers of timed-out sessions kept per connection.
const MAX_MARKERS: usize = 64;
/// How long a marker is kept: a client back from a long pause still hears why its
/// session is gone (a marker is a few dozen bytes).
const MARKER_TTL: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shares::{Bounds, Reader, Shares};
    use negentropy::NegentropyStorageVector;
    use std::sync::Arc;

    fn engine(records: u64) -> Engine {
        let mut storage = NegentropyStorageVector::with_capacity(records as usize);
        for i in 0..records {
            let mut id = [0u8; 32];
            id[..8].copy_from_slice(&i.to_be_bytes());
            storage
                .insert(i, negentropy::Id::from_byte_array(id))
                .expect("insert");
        }
        storage.seal().expect("seal");
        Negentropy::owned(SharedSet(Arc::new(storage)), 0).expect("engine")
    }

    fn lifetimes(idle: u64, whole: u64) -> Lifetimes {
        Lifetimes {
            idle: Duration::from_secs(idle),
            whole: Duration::from_secs(whole),
        }
    }

    /// A process budget of `max` records, one community, no per-reader bound to speak of.
    fn budget(max: usize) -> Arc<Shares> {
        Arc::new(Shares::new(
            Bounds {
                max_records: max,
                per_reader_records: max,
                per_reader_sessions: 1_000,
                reserved_per_community: 0,
            },
            vec![1],
        ))
    }

    /// Open `sub` on `conn` with a set of `records` (the whole set or nothing, as the
    /// plugin does), each connection its own reader.
    fn open(
        sessions: &Sessions,
        shares: &Arc<Shares>,
        conn: u64,
        sub: &str,
        records: usize,
        at: Instant,
    ) -> bool {
        if sessions.has_room(conn, at).is_err() {
            return false;
        }
        match shares.take(1, Reader::Connection(conn), records) {
            Ok(charge) if charge.records() == records => {
                sessions.open(conn, sub.into(), engine(records as u64), charge, at);
                true
            }
            _ => false,
        }
    }

    #[test]
    fn a_connection_holds_at_most_its_sessions() {
        let sessions = Sessions::new(2, lifetimes(60, 600));
        let shares = budget(1_000);
        let t = Instant::now();
        assert!(open(&sessions, &shares, 1, "a", 10, t));
        assert!(open(&sessions, &shares, 1, "b", 10, t));
        assert!(!open(&sessions, &shares, 1, "c", 10, t), "a third session");
        // Another connection has its own room.
        assert!(open(&sessions, &shares, 2, "a", 10, t));
        // A taken (busy) session still counts.
        let Lookup::Found(s) = sessions.take(1, "a", t) else {
            panic!("open session")
        };
        assert!(!open(&sessions, &shares, 1, "c", 10, t));
        sessions.put_back(1, "a", s, t);
        sessions.close(1, "a");
        assert!(
            open(&sessions, &shares, 1, "c", 10, t),
            "room after a close"
        );
    }

    #[test]
    fn the_process_budget_bounds_records_held_and_frees_on_drop() {
        let sessions = Sessions::new(8, lifetimes(60, 600));
        let shares = budget(100);
        let t = Instant::now();
        assert!(open(&sessions, &shares, 1, "a", 60, t));
        assert!(!open(&sessions, &shares, 2, "a", 41, t), "over the budget");
        assert!(open(&sessions, &shares, 2, "a", 40, t));
        assert_eq!(shares.held(), 100);
        assert_eq!(sessions.totals(), (2, 100));
        sessions.connection_closed(1);
        assert_eq!(shares.held(), 40, "a closed connection frees its records");
        sessions.close(2, "a");
        assert_eq!(shares.held(), 0);
        assert_eq!(sessions.totals(), (0, 0));
    }

    #[test]
    fn a_session_holds_forty_bytes_per_record() {
        let sessions = Sessions::new(1, lifetimes(60, 600));
        let shares = budget(10_000);
        let t = Instant::now();
        assert!(open(&sessions, &shares, 1, "a", 10_000, t));
        let Lookup::Found(s) = sessions.take(1, "a", t) else {
            panic!("open")
        };
        assert_eq!(s.record_bytes(), 400_000);
        assert_eq!(std::mem::size_of::<negentropy::Item>(), RECORD_BYTES);
    }

    #[test]
    fn idle_sessions_are_dropped_and_say_so_once() {
        let idle = Duration::from_secs(5);
        let sessions = Sessions::new(1, lifetimes(5, 600));
        let shares = budget(1_000);
        let t = Instant::now();
        assert!(open(&sessions, &shares, 1, "a", 10, t));
        assert!(matches!(sessions.take(1, "b", t), Lookup::Unknown));
        // Used just before the timeout: still open, and its clock restarts.
        let Lookup::Found(s) = sessions.take(1, "a", t + idle / 2) else {
            panic!("still open")
        };
        sessions.put_back(1, "a", s, t + idle / 2);
        assert_eq!(sessions.sweep(t + idle), 0);
        assert_eq!(sessions.sweep(t + idle / 2 + idle), 1);
        assert_eq!(shares.held(), 0, "its records are freed");
        // The connection has room again at once.
        assert!(sessions.has_room(1, t + idle * 2).is_ok());
        let later = t + idle / 2 + idle + Duration::from_secs(1);
        assert!(matches!(
            sessions.take(1, "a", later),
            Lookup::TimedOut(Ended::Idle)
        ));
        assert!(matches!(sessions.take(1, "a", later), Lookup::Unknown));
    }

    #[test]
    fn a_session_ends_at_its_lifetime_however_busy() {
        let sessions = Sessions::new(1, lifetimes(5, 12));
        let shares = budget(1_000);
        let t = Instant::now();
        assert!(open(&sessions, &shares, 1, "a", 10, t));
        // Renewed every four seconds: never idle, yet gone at twelve.
        for step in 1..=2 {
            let at = t + Duration::from_secs(4 * step);
            let Lookup::Found(s) = sessions.take(1, "a", at) else {
                panic!("open at {step}")
            };
            sessions.put_back(1, "a", s, at);
        }
        assert_eq!(sessions.sweep(t + Duration::from_secs(11)), 0);
        assert_eq!(sessions.sweep(t + Duration::from_secs(12)), 1);
        assert_eq!(shares.held(), 0, "its records are freed");
        assert!(matches!(
            sessions.take(1, "a", t + Duration::from_secs(12)),
            Lookup::TimedOut(Ended::Lifetime)
        ));
    }

    #[test]
    fn a_session_returned_after_its_connection_closed_is_dropped() {
        let sessions = Sessions::new(1, lifetimes(60, 600));
        let shares = budget(100);
        let t = Instant::now();
        assert!(open(&sessions, &shares, 1, "a", 10, t));
        let Lookup::Found(s) = sessions.take(1, "a", t) else {
            panic!("open")
        };
        sessions.connection_closed(1);
        sessions.put_back(1, "a", s, t);
        assert_eq!(sessions.totals(), (0, 0));
        assert_eq!(shares.held(), 0);
    }
}
