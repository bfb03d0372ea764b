//! How long a set read from `events` stays true: a mark that moves whenever a committed
//! write could have changed any event's rows, and the next moment a stored event expires.
//! A reader that keeps a read between requests (a plugin's NIP-77 record sets, say)
//! reuses it only while both say nothing changed.
//!
//! Every write goes through the one writer, so the writer moves the mark after each
//! commit — after the commit and before any of the batch's answers leave: a client that
//! got `OK true` and reads next never finds the mark from before its write. Only a batch
//! made entirely of writes that vouched for changing no event row
//! (`Store::write_own_rows`: a plugin's read state, its index, its progress) leaves the
//! mark alone, so background work such as the search backfill or read markers does not
//! undo every kept set. A read leaves out what expired at its moment, and
//! [`next_expiry`] tells when that changes.
//!
//! Why a read is never stale: the reader takes the mark *before* its read transaction
//! begins. A write committed after that moves the mark after its commit, so after the
//! mark was read; a write committed before it is in the read, whatever the mark says.
//!
//! SQLite has one writing process, this one: the mark is a counter in memory. On
//! PostgreSQL other processes write too, so each moves a shared sequence
//! (`event_changes`) as well, and the mark is both numbers.
//!
//! A moved mark says only that something may have changed. Most commits of a chatting
//! team append messages and change nothing else, and a kept set can take those in
//! without being read again: on SQLite every commit that did more than append
//! independent events (`buzz_nostr::kinds::independent`: no deletion, no replaced slot,
//! no channel or membership change) counts itself in the `event_rewrites` row, in its own
//! transaction. An [`AppendPoint`] read in a reader's transaction is that count and the
//! last `seq`; between two points with the same count only rows after the first point's
//! `seq` are new (`seq` grows in commit order: one writer), and
//! `store::query::appended_stamps` reads just those. On PostgreSQL several processes
//! commit sequence numbers out of order, so there are no points and a changed mark means
//! a read.

use crate::error::Reason;
use crate::store::schema::events;
use crate::store::{prepared, Conn};
use crate::with_conn;
use diesel::dsl::min;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the writes stood when a read began: equal marks, no event changed between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeMark {
    /// This process's commits.
    local: u64,
    /// Every process's commits (PostgreSQL's `event_changes`); `None` on SQLite.
    shared: Option<i64>,
}

impl ChangeMark {
    /// A mark of `local` commits on SQLite, for tests of what keeps a read.
    #[doc(hidden)]
    pub fn for_tests(local: u64) -> ChangeMark {
        ChangeMark {
            local,
            shared: None,
        }
    }
}

/// The process's counter of commits (any of which may have changed events).
#[derive(Debug, Default)]
pub(crate) struct ChangeCounter(AtomicU64);

impl ChangeCounter {
    /// A batch that may have changed events committed (called by the writer, before
    /// answering it).
    pub(crate) fn committed(&self, conn: &mut Conn<'_>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        if let Conn::Pg(_) = conn {
            // A failure here leaves other processes' marks where they were until the
            // next commit moves the sequence; their reuse is bounded in time by the
            // reader (a kept set is reused for a few seconds at most).
            // A statement the connection keeps prepared: this runs after every commit.
            if let Err(err) = prepared::execute(conn, "SELECT nextval('event_changes')", &[]) {
                tracing::warn!(error = %err, "moving the shared change mark failed");
            }
        }
    }

    /// The mark on SQLite, where this process is the only writer.
    pub(crate) fn local_mark(&self) -> ChangeMark {
        ChangeMark {
            local: self.0.load(Ordering::SeqCst),
            shared: None,
        }
    }

    /// The mark as of now, read before the read transaction it is to vouch for.
    pub(crate) fn mark(&self, conn: &mut Conn<'_>) -> Result<ChangeMark, Reason> {
        let local = self.0.load(Ordering::SeqCst);
        let shared = match conn {
            Conn::Sqlite(_) => None,
            // Before its first `nextval` a sequence shows `last_value` 1 as it does after
            // it; `is_called` tells the two apart. Kept prepared: every kept-set check
            // runs it.
            Conn::Pg(_) => Some(
                prepared::first::<SequenceValue>(
                    conn,
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS value \
                     FROM event_changes",
                    &[],
                )?
                .map_or(0, |row| row.value),
            ),
        };
        Ok(ChangeMark { local, shared })
    }
}

#[derive(QueryableByName)]
struct SequenceValue {
    #[diesel(sql_type = BigInt)]
    value: i64,
}

/// The earliest `expires_at` after `now` of any stored event (every community's): until
/// then no read made at `now` loses an event to NIP-40. `None`: nothing will expire.
pub fn next_expiry(conn: &mut Conn<'_>, now: i64) -> Result<Option<i64>, Reason> {
    Ok(with_conn!(conn, |c| events::table
        .filter(events::expires_at.gt(now))
        .select(min(events::expires_at))
        .first::<Option<i64>>(c))?)
}

/// Where a SQLite read transaction stood: the commits that rewrote events so far and the
/// last event `seq` (see the module doc). Read with [`append_point`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendPoint {
    pub(crate) rewrites: i64,
    pub(crate) last_seq: i64,
}

impl AppendPoint {
    /// Whether everything committed between `self` and `later` only appended events.
    pub fn only_appends_until(&self, later: &AppendPoint) -> bool {
        self.rewrites == later.rewrites && self.last_seq <= later.last_seq
    }

    /// The last event `seq` the read could see.
    pub fn last_seq(&self) -> i64 {
        self.last_seq
    }

    /// A point for tests of what keeps a read.
    #[doc(hidden)]
    pub fn for_tests(rewrites: i64, last_seq: i64) -> AppendPoint {
        AppendPoint { rewrites, last_seq }
    }
}

#[derive(QueryableByName)]
struct PointRow {
    #[diesel(sql_type = BigInt)]
    rewrites: i64,
    #[diesel(sql_type = BigInt)]
    last_seq: i64,
}

/// The point of the caller's read transaction (call it inside the transaction whose
/// rows it is to describe); `None` on PostgreSQL, which has none.
pub fn append_point(conn: &mut Conn<'_>) -> Result<Option<AppendPoint>, Reason> {
    if let Conn::Pg(_) = conn {
        return Ok(None);
    }
    let row = prepared::first::<PointRow>(
        conn,
        "SELECT (SELECT count FROM event_rewrites WHERE id = 1) AS rewrites, \
                (SELECT COALESCE(MAX(seq), 0) FROM events) AS last_seq",
        &[],
    )?
    .ok_or_else(|| Reason::Internal(anyhow::anyhow!("the append point read no row")))?;
    Ok(Some(AppendPoint {
        rewrites: row.rewrites,
        last_seq: row.last_seq,
    }))
}

/// Count a commit that does more than append independent events, in its transaction
/// (the writer calls it before the batch's jobs). Nothing on PostgreSQL. A failure fails
/// the batch: a rewrite left uncounted would let a kept set miss it.
pub(crate) fn note_rewrite(conn: &mut Conn<'_>) -> diesel::QueryResult<()> {
    if let Conn::Sqlite(c) = conn {
        prepared::CachedStatement::new(
            "UPDATE event_rewrites SET count = count + 1 WHERE id = 1",
            &[],
        )
        .execute(*c)?;
    }
    Ok(())
}
