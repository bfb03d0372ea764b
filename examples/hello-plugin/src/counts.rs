//! The `hello_counts` table: stored events per community and kind. Written inside each
//! event's transaction, so a count never includes an event that rolled back.

use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_core::with_conn;
use diesel::prelude::*;
use std::collections::BTreeMap;

diesel::table! {
    hello_counts (community_id, kind) {
        community_id -> BigInt,
        kind -> BigInt,
        count -> BigInt,
    }
}

/// Stored events per kind, in kind order (serializes as `{"1": 3, "7": 1}`).
pub type KindCounts = BTreeMap<u32, u64>;

/// Count one more event of `kind` in `community_id`; returns the new count.
pub(crate) fn bump(conn: &mut Conn<'_>, community_id: i64, kind: u32) -> Result<u64, Reason> {
    let kind = i64::from(kind);
    let count: i64 = with_conn!(conn, |c| diesel::insert_into(hello_counts::table)
        .values((
            hello_counts::community_id.eq(community_id),
            hello_counts::kind.eq(kind),
            hello_counts::count.eq(1_i64),
        ))
        .on_conflict((hello_counts::community_id, hello_counts::kind))
        .do_update()
        .set(hello_counts::count.eq(hello_counts::count + 1))
        .returning(hello_counts::count)
        .get_result(c))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// The counts of one community (empty when nothing was stored there yet).
pub(crate) fn of_community(conn: &mut Conn<'_>, community_id: i64) -> Result<KindCounts, Reason> {
    let rows: Vec<(i64, i64)> = with_conn!(conn, |c| hello_counts::table
        .filter(hello_counts::community_id.eq(community_id))
        .select((hello_counts::kind, hello_counts::count))
        .load(c))?;
    Ok(rows
        .into_iter()
        .filter_map(|(kind, count)| Some((u32::try_from(kind).ok()?, u64::try_from(count).ok()?)))
        .collect())
}

/// Every community's counts, for the admin panel: (community id, kind, count).
pub(crate) fn all(conn: &mut Conn<'_>) -> Result<Vec<(i64, i64, i64)>, Reason> {
    Ok(with_conn!(conn, |c| hello_counts::table
        .select((
            hello_counts::community_id,
            hello_counts::kind,
            hello_counts::count
        ))
        .order((hello_counts::community_id, hello_counts::kind))
        .load(c))?)
}

/// Forget one community's counts.
pub(crate) fn reset(conn: &mut Conn<'_>, community_id: i64) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::delete(
        hello_counts::table.filter(hello_counts::community_id.eq(community_id))
    )
    .execute(c))?;
    Ok(())
}
