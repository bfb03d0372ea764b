//! Loading events by seq, the keys `matching.rs` read: whole ([`load_events`]) or as
//! wire JSON ([`load_wire_events`]), in the order given, by primary key alone.

use super::rows::{row_to_event, row_to_wire, EventRow, WireEvent, WireRow};
use crate::error::Reason;
use crate::store::conn::Conn;
use crate::store::one_of::one_of;
use crate::store::schema::events;
use crate::with_conn;
use buzz_nostr::event::Event;
use diesel::prelude::*;

/// The events `seqs` name in `community_id`, in the order given; rows deleted since their
/// keys were read are left out.
pub fn load_events(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
) -> Result<Vec<Event>, Reason> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    // By primary key alone: with `community_id = ?` in the statement SQLite may walk a
    // whole-community index instead of looking the rows up (issue 23); the community is
    // checked on the rows instead.
    let rows: Vec<EventRow> = with_conn!(conn, |c| events::table
        .filter(one_of(events::seq, seqs.to_vec()))
        .filter(events::deleted_at.is_null())
        .select(EventRow::as_select())
        .load(c))?;
    in_seq_order(rows, seqs, |r| (r.seq, r.community_id == community_id))
        .into_iter()
        .map(|r| row_to_event(r).map_err(Reason::from))
        .collect()
}

/// Rows read by primary key, in the order of `seqs`, keeping those `key` accepts (the
/// caller's community): `key` gives a row's seq and whether to keep it.
fn in_seq_order<R>(rows: Vec<R>, seqs: &[i64], key: impl Fn(&R) -> (i64, bool)) -> Vec<R> {
    let mut by_seq: std::collections::HashMap<i64, R> = rows
        .into_iter()
        .filter_map(|r| match key(&r) {
            (seq, true) => Some((seq, r)),
            (_, false) => None,
        })
        .collect();
    seqs.iter().filter_map(|seq| by_seq.remove(seq)).collect()
}

/// [`load_events`] as wire JSON: the events `seqs` name in `community_id`, in the order
/// given, rows deleted since their keys were read left out.
pub fn load_wire_events(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
) -> Result<Vec<WireEvent>, Reason> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    // By primary key alone, as in `load_events`.
    let rows: Vec<WireRow> = with_conn!(conn, |c| events::table
        .filter(one_of(events::seq, seqs.to_vec()))
        .filter(events::deleted_at.is_null())
        .select(WireRow::as_select())
        .load(c))?;
    in_seq_order(rows, seqs, |r| (r.seq, r.community_id == community_id))
        .into_iter()
        .map(|r| row_to_wire(r).map_err(Reason::from))
        .collect()
}
