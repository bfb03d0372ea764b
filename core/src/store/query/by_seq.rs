//! Loading events by seq, the keys `matching.rs` read: whole ([`load_events`]) or as
//! wire JSON ([`load_wire_events`]), in the order given, by primary key alone. Both are
//! one loader (`load_by_seq`) over the row type they select.

use super::rows::{row_to_event, row_to_wire, EventRow, WireEvent, WireRow};
use crate::error::Reason;
use crate::store::conn::Conn;
use crate::store::one_of::{one_of, OneOf};
use crate::store::schema::events;
use crate::store::StoreError;
use crate::with_conn;
use buzz_nostr::event::Event;
use diesel::dsl::{Filter, IsNull};
use diesel::prelude::*;

/// The events `seqs` name in `community_id`, in the order given; rows deleted since their
/// keys were read are left out.
pub fn load_events(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
) -> Result<Vec<Event>, Reason> {
    load_by_seq(
        conn,
        community_id,
        seqs,
        |conn, live| with_conn!(conn, |c| live.select(EventRow::as_select()).load(c)),
        |r: &EventRow| (r.seq, r.community_id),
        row_to_event,
    )
}

/// [`load_events`] as wire JSON: the events `seqs` name in `community_id`, in the order
/// given, rows deleted since their keys were read left out.
pub fn load_wire_events(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
) -> Result<Vec<WireEvent>, Reason> {
    load_by_seq(
        conn,
        community_id,
        seqs,
        |conn, live| with_conn!(conn, |c| live.select(WireRow::as_select()).load(c)),
        |r: &WireRow| (r.seq, r.community_id),
        row_to_wire,
    )
}

/// The rows `seqs` name that are not deleted, by primary key alone.
type LiveBySeq = Filter<Filter<events::table, OneOf<events::seq, i64>>, IsNull<events::deleted_at>>;

/// The rows `seqs` name in `community_id`, in the order given, each made a `T` by
/// `convert`; rows deleted since their keys were read are left out. `read` selects the
/// caller's columns from the live rows `seqs` name; `key` gives a row's seq and community.
fn load_by_seq<R, T>(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
    read: impl FnOnce(&mut Conn<'_>, LiveBySeq) -> QueryResult<Vec<R>>,
    key: impl Fn(&R) -> (i64, i64),
    convert: impl Fn(R) -> Result<T, StoreError>,
) -> Result<Vec<T>, Reason> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    // By primary key alone: with `community_id = ?` in the statement SQLite may walk a
    // whole-community index instead of looking the rows up (issue 23); the community is
    // checked on the rows instead.
    let live: LiveBySeq = events::table
        .filter(one_of(events::seq, seqs.to_vec()))
        .filter(events::deleted_at.is_null());
    let mut by_seq: std::collections::HashMap<i64, R> = read(conn, live)?
        .into_iter()
        .filter_map(|r| {
            let (seq, community) = key(&r);
            (community == community_id).then_some((seq, r))
        })
        .collect();
    seqs.iter()
        .filter_map(|seq| by_seq.remove(seq))
        .map(|r| convert(r).map_err(Reason::from))
        .collect()
}
