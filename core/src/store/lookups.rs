//! Looking stored events up by id: whether they exist (deleted or not), their channel and
//! author, which of a list are stored — what checks before and during a write ask.

use super::conn::Conn;
use super::events::InsertOutcome;
use super::schema::events;
use crate::error::Reason;
use crate::with_conn;
use diesel::prelude::*;
use diesel::result::Error as DieselError;

/// Are all of `ids` stored community-wide events of `community_id` (no channel; deleted
/// or expired ones too — those are then simply not served)? What an unauthenticated
/// reader may look up by id: a channel event's id answers like an unknown one.
pub fn all_community_wide(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<bool, Reason> {
    let wanted: std::collections::HashSet<&String> = ids.iter().collect();
    let found: i64 = with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(super::one_of::one_of(events::id, ids.to_vec()))
        .filter(events::channel_id.is_null())
        .count()
        .get_result(c))?;
    Ok(usize::try_from(found).is_ok_and(|n| n == wanted.len()))
}

/// Is `id` already stored here? `Duplicate`, or `Deleted` for a soft-deleted row.
pub(super) fn known_id(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<InsertOutcome>, DieselError> {
    let existing: Option<Option<i64>> = with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(events::id.eq(id))
        .select(events::deleted_at)
        .first(c)
        .optional())?;
    Ok(existing.map(|deleted_at| match deleted_at {
        Some(_) => InsertOutcome::Deleted,
        None => InsertOutcome::Duplicate,
    }))
}

/// The channel of a stored, undeleted event: `None` when there is no such event,
/// `Some(None)` when it is not channel-scoped.
pub fn event_channel(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<Option<String>>, Reason> {
    Ok(with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(events::id.eq(id))
        .filter(events::deleted_at.is_null())
        .select(events::channel_id)
        .first(c)
        .optional())?)
}

/// The channel (`None`: community-wide) and author of a stored, undeleted event.
pub fn event_home(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<(Option<String>, String)>, Reason> {
    Ok(with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(events::id.eq(id))
        .filter(events::deleted_at.is_null())
        .select((events::channel_id, events::pubkey))
        .first(c)
        .optional())?)
}

/// Was `id` ever stored in `community_id` (removed since or not)?
pub fn event_known(conn: &mut Conn<'_>, community_id: i64, id: &str) -> Result<bool, Reason> {
    Ok(known_id(conn, community_id, id)?.is_some())
}

/// Which of `ids` are stored in `community_id` and not deleted (chunked: any number).
pub fn stored_ids(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<std::collections::HashSet<String>, Reason> {
    let mut found = std::collections::HashSet::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let rows: Vec<String> = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::id.eq_any(chunk))
            .filter(events::deleted_at.is_null())
            .select(events::id)
            .load(c))?;
        found.extend(rows);
    }
    Ok(found)
}
