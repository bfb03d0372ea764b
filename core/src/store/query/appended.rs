//! The stamps of rows appended since an earlier read: how a set kept between requests
//! (`query_stamps`' answer) is brought up to date without reading it again, when
//! [`crate::store::AppendPoint`] says that only appends happened in between.
//!
//! The rows are read by `seq` range, the events table's own key, so the read costs the
//! rows appended since (of every community) and never a walk of the kept set's index.

use super::filter_sql::{narrowed, narrowed_fields, readable_for, scoped, Readable};
use super::scope::{ChannelScope, Scope};
use crate::error::Reason;
use crate::store::conn::Conn;
use crate::store::one_of::one_of;
use crate::store::schema::{event_tags, events};
use crate::store::tag_on_row::tag_on_row;
use crate::store::AppendPoint;
use buzz_nostr::filter::Filter;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool};

/// `(created_at, id)` of the rows appended after `since` and up to `until` that `filter`
/// matches within `scope` at `now` (deleted and expired ones excluded, as
/// [`super::query_stamps`] does), in no particular order.
///
/// `None` when the rows cannot be read this way, and the caller must read the whole set:
/// the points are not of one writer's appends only (`since` is not before `until`, or a
/// rewrite came between), more than `most_rows` rows were appended (of any community),
/// or the filter names a tag other than `#h` (whose rows a range read would check by a
/// lookup per row rather than down the tag's index). A filter's `limit` is not applied:
/// the caller decides what appended rows do to a set cut by one.
pub fn appended_stamps(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    since: AppendPoint,
    until: AppendPoint,
    most_rows: i64,
    now: i64,
) -> Result<Option<Vec<(i64, String)>>, Reason> {
    if !since.only_appends_until(&until)
        || until.last_seq - since.last_seq > most_rows
        || filter.tags.keys().any(|name| name != "h")
    {
        return Ok(None);
    }
    if until.last_seq == since.last_seq || filter.is_empty_match() {
        return Ok(Some(Vec::new()));
    }
    let Some((readable, _installed)) = readable_for(conn, scope, filter.channels()) else {
        return Ok(Some(Vec::new()));
    };
    let Conn::Sqlite(c) = conn else {
        // Points are never made on PostgreSQL (`append_point`), so this is not reached.
        return Ok(None);
    };
    // The planner estimates a range of the key from its bounds alone, and with the
    // statistics of a large community a channel's or an author's index looks cheaper:
    // `likelihood` tells it how few rows the range holds (a constant: SQLite takes no
    // parameter there), so the range is what it reads.
    let range = sql::<Bool>("likelihood(events.seq > ")
        .bind::<BigInt, _>(since.last_seq)
        .sql(", 0.0001) AND likelihood(events.seq <= ")
        .bind::<BigInt, _>(until.last_seq)
        .sql(", 0.0001)");
    let q = events::table
        .select((events::created_at, events::id))
        .filter(range)
        .into_boxed();
    let Some(q) = scoped!(q, scope, &readable, filter.channels(), now) else {
        return Ok(Some(Vec::new()));
    };
    let rows = narrowed!(q, filter, scope.community_id).load(*c)?;
    Ok(Some(rows))
}
