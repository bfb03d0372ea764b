//! Community rows: one per configured host, created (or renamed) when the relay starts.

use super::conn::Conn;
use super::schema::communities;
use crate::error::Reason;
use crate::with_conn;
use diesel::prelude::*;

/// Insert the community row for `host` if missing; return its id.
pub(super) fn ensure_community(conn: &mut Conn<'_>, host: &str, name: &str) -> Result<i64, Reason> {
    let existing: Option<i64> = with_conn!(conn, |c| communities::table
        .filter(communities::host.eq(host))
        .select(communities::id)
        .first(c)
        .optional())?;
    if let Some(id) = existing {
        with_conn!(conn, |c| diesel::update(
            communities::table.filter(communities::id.eq(id))
        )
        .set(communities::name.eq(name))
        .execute(c))?;
        return Ok(id);
    }
    let id = with_conn!(conn, |c| diesel::insert_into(communities::table)
        .values((communities::host.eq(host), communities::name.eq(name)))
        .returning(communities::id)
        .get_result(c))?;
    Ok(id)
}
