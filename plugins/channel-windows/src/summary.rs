//! The NIP-CW `39005` summary of one event's thread: counts from its metadata row and
//! the latest distinct participants of its subtree.

use buzz_core::error::Reason;
use buzz_core::store::schema::thread_metadata;
use buzz_core::store::threads::ThreadRow;
use buzz_core::store::Conn;
use buzz_core::with_conn;
use diesel::prelude::*;

/// Participants a summary lists.
pub(crate) const MAX_PARTICIPANTS: i64 = 10;

/// What a NIP-CW 39005 summary says about one event's thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadSummary {
    pub event_id: String,
    pub reply_count: i64,
    pub descendant_count: i64,
    pub last_reply_at: Option<i64>,
    /// Up to ten distinct authors of the subtree, most recent first.
    pub participants: Vec<String>,
}

/// Summary of the subtree under `row`.
pub(crate) fn summary(conn: &mut Conn<'_>, row: &ThreadRow) -> Result<ThreadSummary, Reason> {
    let root = row.root_id.clone().unwrap_or_else(|| row.event_id.clone());
    let pattern = format!("%/{}/%", row.event_id);
    let participants: Vec<(String, Option<i64>)> = with_conn!(conn, |c| thread_metadata::table
        .filter(thread_metadata::community_id.eq(row.community_id))
        .filter(thread_metadata::root_id.eq(&root))
        .filter(thread_metadata::deleted.eq(false))
        .filter(thread_metadata::path.like(&pattern))
        .group_by(thread_metadata::pubkey)
        .select((
            thread_metadata::pubkey,
            diesel::dsl::max(thread_metadata::created_at)
        ))
        .order((
            diesel::dsl::max(thread_metadata::created_at).desc(),
            thread_metadata::pubkey.asc()
        ))
        .limit(MAX_PARTICIPANTS)
        .load(c))?;
    Ok(ThreadSummary {
        event_id: row.event_id.clone(),
        reply_count: row.reply_count,
        descendant_count: row.descendant_count,
        last_reply_at: row.last_reply_at,
        participants: participants.into_iter().map(|(p, _)| p).collect(),
    })
}
