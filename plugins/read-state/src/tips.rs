//! A thread's tip on its followers' rows: what the sidebar's walk needs to list a page of
//! followed threads with an unread reply in order, from one index
//! (`idx_read_state_unread_threads`) and without reading any thread:
//!
//! - `thread_rank`: minus the author time of the newest nondeleted reply (the root's
//!   `thread_metadata.last_reply_at`, which core keeps through deletions), so ascending
//!   rank, then root id, is the sidebar's order;
//! - `thread_news_at`: the arrival of the newest-arrived nondeleted reply. A row is in the
//!   walk's index while it follows and `thread_news_at > position`.
//!
//! Kept in the message's transaction: a reply raises it on every following row of its
//! thread (one statement over `idx_read_state_thread_rows`, whose `root_id <> ''` is
//! repeated in it so both backends use that partial index; rows that follow later take
//! it when they follow), a deletion of a reply recomputes it. Unfollowed rows keep a stale tip and take a fresh one when
//! they follow again. Rows written by relay processes on older code carry no tip: like
//! the arrival columns, their thread shows once a reply arrives through new code.

use crate::scope::{Message, Skew};
use crate::sql::{execute, first, OptI64, Val};
use buzz_core::error::Reason;
use buzz_core::store::Conn;

/// One thread's tip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tip {
    /// Author time of the newest nondeleted reply.
    pub latest_at: Option<i64>,
    /// Arrival (microseconds) of the newest-arrived nondeleted reply.
    pub news_at: Option<i64>,
}

impl Tip {
    /// `thread_rank`: ascending is the sidebar's order (newest latest reply first).
    pub(crate) fn rank(&self) -> Option<i64> {
        self.latest_at.map(|t| -t)
    }

    /// The tip of the thread rooted at `root`, read just after a reply was stored: core
    /// has raised both of the root's columns through it, and the reply that just arrived
    /// is the newest arrival.
    pub(crate) fn after_reply(root: &Message) -> Tip {
        Tip {
            latest_at: root.last_reply_at,
            news_at: root.last_reply_received_at,
        }
    }

    /// The tip of the thread rooted at `root` as it is now, after a deletion (core has
    /// recomputed `last_reply_at`). The newest arrival among nondeleted replies is found
    /// near the newest reply in author time: a reply that arrived after the newest one's
    /// arrival (itself at least `latest - skew`) was written at least `latest - 2 skew`,
    /// so only that window of the thread is read, never its history.
    pub(crate) fn now(
        conn: &mut Conn<'_>,
        community_id: i64,
        root: &Message,
        skew: Skew,
    ) -> Result<Tip, Reason> {
        let Some(latest_at) = root.last_reply_at else {
            return Ok(Tip::default());
        };
        // Replies from before the arrival columns existed are reached by no position.
        if root.last_reply_received_at.is_none() {
            return Ok(Tip {
                latest_at: Some(latest_at),
                news_at: None,
            });
        }
        let news_at = first::<OptI64>(
            conn,
            "SELECT MAX(e.received_at) AS v FROM thread_metadata t JOIN events e \
             ON e.community_id = t.community_id AND e.id = t.event_id \
             WHERE t.community_id = ? AND t.root_id = ? AND t.channel_id = ? \
             AND t.created_at >= ? AND e.deleted_at IS NULL",
            &[
                Val::I(community_id),
                Val::T(&root.id),
                Val::T(&root.channel_id),
                Val::I(latest_at - 2 * skew.secs),
            ],
        )?
        .and_then(|r| r.v);
        Ok(Tip {
            latest_at: Some(latest_at),
            news_at,
        })
    }
}

/// A reply arrived at `at` in the thread `root`, whose newest reply is now `latest_at`:
/// every following row of the thread takes it (one statement, one row per follower).
pub(crate) fn note_reply(
    conn: &mut Conn<'_>,
    community_id: i64,
    root: &str,
    latest_at: Option<i64>,
    at: i64,
) -> Result<(), Reason> {
    execute(
        conn,
        "UPDATE read_state_frontiers SET thread_rank = ?, \
         thread_news_at = CASE WHEN thread_news_at IS NULL OR thread_news_at < ? \
             THEN ? ELSE thread_news_at END \
         WHERE community_id = ? AND root_id = ? AND root_id <> '' AND following = TRUE",
        &[
            Val::N(latest_at.map(|t| -t)),
            Val::I(at),
            Val::I(at),
            Val::I(community_id),
            Val::T(root),
        ],
    )?;
    Ok(())
}

/// Every following row of the thread `root` takes `tip` (after a deletion: it may go
/// back, the deleted reply no longer counts).
pub(crate) fn set(
    conn: &mut Conn<'_>,
    community_id: i64,
    root: &str,
    tip: Tip,
) -> Result<(), Reason> {
    execute(
        conn,
        "UPDATE read_state_frontiers SET thread_rank = ?, thread_news_at = ? \
         WHERE community_id = ? AND root_id = ? AND root_id <> '' AND following = TRUE",
        &[
            Val::N(tip.rank()),
            Val::N(tip.news_at),
            Val::I(community_id),
            Val::T(root),
        ],
    )?;
    Ok(())
}
