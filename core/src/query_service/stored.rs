//! Core's part of a query answer, read from the store a page at a time.
//!
//! Matches are read as keys first (`store::query_keys`: seq, time, size); `StoredAnswer`
//! then reads the events a page at a time within a byte budget, so no answer is ever held
//! whole. A REQ reads them as wire JSON (`store::load_wire_events`: written from the row,
//! the stored tags JSON checked and copied rather than parsed and serialized again), and
//! its first page in the same trip to the read threads as the keys (`FirstPage`: the
//! page's room is taken on the read thread without waiting, right before the page is
//! read; with no room the page waits like any other), so a one-page answer costs one
//! thread hand-off, not two. Plugins' stored answers (keys in the plugin's order) are
//! appended with `StoredAnswer::extend` (`core/tests/plugin_keys.rs`).

use crate::error::Reason;
use crate::store::{load_events, load_wire_events, Conn, EventKey, Store, WireEvent};
use buzz_nostr::event::Event;
use std::collections::HashSet;

/// Most rows one page reads (each is one SQL parameter).
const MAX_PAGE_ROWS: usize = 256;
/// What an event costs on the wire besides its content and tags (id, pubkey, sig, keys,
/// framing): added to each key's size when a page is sized.
const EVENT_OVERHEAD: usize = 400;

/// How a caller that sends pages within a byte bound (a WebSocket REQ) has the first
/// page read together with the keys: one trip to the store's read threads instead of
/// two, which for the common answer of one page halves the thread hand-offs a REQ waits
/// on. `room` is asked, on the read thread, for the page's estimated bytes right after
/// the keys are known and before the page is read — so the page is counted against the
/// caller's bound before it exists, as every later page is — and must not wait: `None`
/// (no room now) leaves the page to be read after the caller has waited for room.
pub struct FirstPage<R> {
    /// The page's byte budget, as for [`StoredAnswer::next_wire_page`].
    pub budget: usize,
    pub room: Box<dyn FnOnce(usize) -> Option<R> + Send>,
}

/// The keys of core's matches in wire order, and how far they have been read.
pub struct StoredAnswer {
    store: Store,
    community_id: i64,
    keys: Vec<EventKey>,
    next: usize,
}

impl StoredAnswer {
    pub(crate) fn empty(store: Store) -> Self {
        Self::new(store, 0, Vec::new())
    }

    pub(crate) fn new(store: Store, community_id: i64, keys: Vec<EventKey>) -> Self {
        StoredAnswer {
            store,
            community_id,
            keys,
            next: 0,
        }
    }

    /// The answer to the matches of several filters: each event once, newest first,
    /// ties by id.
    pub(crate) fn merged(
        store: Store,
        community_id: i64,
        mut matches: Vec<(EventKey, String)>,
    ) -> Self {
        let mut seen = HashSet::new();
        matches.retain(|(key, _)| seen.insert(key.seq));
        matches.sort_by(|(a, a_id), (b, b_id)| {
            b.created_at.cmp(&a.created_at).then_with(|| a_id.cmp(b_id))
        });
        let keys = matches.into_iter().map(|(key, _)| key).collect();
        Self::new(store, community_id, keys)
    }

    /// Add a plugin's keys after these ([`crate::plugin::QueryAnswer::Stored`]), in its
    /// order. One answer is one community's, so the keys are `community_id`'s (the
    /// caller's, which core's own matches are too).
    pub(crate) fn extend(&mut self, community_id: i64, keys: Vec<EventKey>) {
        if keys.is_empty() {
            return;
        }
        self.community_id = community_id;
        self.keys.extend(keys);
    }

    /// Read the first page on `conn`, the connection the keys were just read on, if
    /// `first` finds room for it (see [`FirstPage`]); `None` leaves every page to
    /// [`Self::next_wire_page`].
    pub(crate) fn read_first<R>(
        &mut self,
        conn: &mut Conn<'_>,
        first: FirstPage<R>,
    ) -> Result<Option<(R, Vec<WireEvent>)>, Reason> {
        let bytes = self.next_page_bytes(first.budget);
        if bytes == 0 {
            return Ok(None);
        }
        let Some(room) = (first.room)(bytes) else {
            return Ok(None);
        };
        let Some(seqs) = self.take_page(first.budget) else {
            return Ok(None);
        };
        let page = load_wire_events(conn, self.community_id, &seqs)?;
        Ok(Some((room, page)))
    }

    /// Nothing matched.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Where the next page ends for `budget` bytes (at least one row), and about how
    /// many bytes it is on the wire.
    fn page_end(&self, budget: usize) -> (usize, usize) {
        let mut end = self.next;
        let mut bytes = 0;
        while end < self.keys.len() && end - self.next < MAX_PAGE_ROWS {
            let size = self.keys[end].size.saturating_add(EVENT_OVERHEAD);
            if end > self.next && bytes + size > budget {
                break;
            }
            bytes += size;
            end += 1;
        }
        (end, bytes)
    }

    /// About how many bytes the next page for `budget` is (0: nothing left), so a
    /// caller can reserve room for it before it is read.
    pub fn next_page_bytes(&self, budget: usize) -> usize {
        self.page_end(budget).1
    }

    /// The next events, about `budget` bytes of them (at least one row); `None` when all
    /// were read. An event deleted since the query matched is skipped (a page may then
    /// be empty).
    pub async fn next_page(&mut self, budget: usize) -> Result<Option<Vec<Event>>, Reason> {
        let Some(seqs) = self.take_page(budget) else {
            return Ok(None);
        };
        let community_id = self.community_id;
        self.store
            .read_more(move |mut conn| load_events(&mut conn, community_id, &seqs))
            .await
            .map(Some)
    }

    /// [`Self::next_page`] as each event's wire JSON (what a REQ answer sends).
    pub async fn next_wire_page(
        &mut self,
        budget: usize,
    ) -> Result<Option<Vec<WireEvent>>, Reason> {
        let Some(seqs) = self.take_page(budget) else {
            return Ok(None);
        };
        let community_id = self.community_id;
        self.store
            .read_more(move |mut conn| load_wire_events(&mut conn, community_id, &seqs))
            .await
            .map(Some)
    }

    /// The next page's sequence numbers, marked read; `None` when all were read.
    fn take_page(&mut self, budget: usize) -> Option<Vec<i64>> {
        let (end, _) = self.page_end(budget);
        if end == self.next {
            return None;
        }
        let seqs: Vec<i64> = self.keys[self.next..end].iter().map(|k| k.seq).collect();
        self.next = end;
        Some(seqs)
    }
}
