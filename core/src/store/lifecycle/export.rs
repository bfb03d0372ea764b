//! Events out as NIP-01 JSON lines in arrival order (`seq`), read a page of keys at a
//! time so memory stays the same however many there are.

use super::Progress;
use crate::error::Reason;
use crate::store::query::{row_to_event, EventRow};
use crate::store::schema::{communities, events};
use crate::store::{Conn, StoreError};
use crate::with_conn;
use diesel::prelude::*;
use std::io::Write;

/// Rows read per statement.
const PAGE: i64 = 2_000;

/// What to export: one community or all, and a `created_at` window (NIP-01 `since` /
/// `until`, inclusive).
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportRange {
    pub community_id: Option<i64>,
    pub since: Option<i64>,
    pub until: Option<i64>,
}

/// The community stored for `host` (already normalized), if any.
pub fn community_by_host(conn: &mut Conn<'_>, host: &str) -> Result<Option<i64>, Reason> {
    Ok(with_conn!(conn, |c| communities::table
        .filter(communities::host.eq(host))
        .select(communities::id)
        .first(c)
        .optional())?)
}

/// Every stored host, for messages naming what exists.
pub fn community_hosts(conn: &mut Conn<'_>) -> Result<Vec<String>, Reason> {
    Ok(with_conn!(conn, |c| communities::table
        .order(communities::id)
        .select(communities::host)
        .load(c))?)
}

/// How many events [`export`] will write (for the progress bar).
pub fn count(conn: &mut Conn<'_>, range: ExportRange) -> Result<i64, Reason> {
    Ok(with_conn!(conn, |c| {
        let mut q = events::table
            .filter(events::deleted_at.is_null())
            .into_boxed();
        if let Some(id) = range.community_id {
            q = q.filter(events::community_id.eq(id));
        }
        if let Some(since) = range.since {
            q = q.filter(events::created_at.ge(since));
        }
        if let Some(until) = range.until {
            q = q.filter(events::created_at.le(until));
        }
        q.count().get_result(c)
    })?)
}

/// One page of `range` after `after` (a `seq`), in `seq` order.
fn page(conn: &mut Conn<'_>, range: ExportRange, after: i64) -> Result<Vec<EventRow>, Reason> {
    Ok(with_conn!(conn, |c| {
        let mut q = events::table
            .filter(events::seq.gt(after))
            .filter(events::deleted_at.is_null())
            .into_boxed();
        if let Some(id) = range.community_id {
            q = q.filter(events::community_id.eq(id));
        }
        if let Some(since) = range.since {
            q = q.filter(events::created_at.ge(since));
        }
        if let Some(until) = range.until {
            q = q.filter(events::created_at.le(until));
        }
        q.order(events::seq)
            .limit(PAGE)
            .select(EventRow::as_select())
            .load(c)
    })?)
}

/// Write every stored, undeleted event of `range` to `out`, one NIP-01 JSON object per
/// line, in arrival order; relay-signed events included (they are stored events too).
/// Returns how many were written. Events that arrive meanwhile are appended when their
/// `seq` is reached: the file is what was stored when its last page was read.
pub fn export(
    conn: &mut Conn<'_>,
    range: ExportRange,
    out: &mut dyn Write,
    progress: &dyn Progress,
) -> Result<u64, Reason> {
    let total = count(conn, range)?;
    progress.begin("exporting events", u64::try_from(total).ok());
    let mut after = 0;
    let mut written = 0u64;
    let io = |e: std::io::Error| Reason::Internal(anyhow::anyhow!("writing the export: {e}"));
    loop {
        let rows = page(conn, range, after)?;
        let Some(last) = rows.last() else { break };
        after = last.seq;
        let n = rows.len() as u64;
        for row in rows {
            let event = row_to_event(row).map_err(|e: StoreError| Reason::Internal(e.into()))?;
            out.write_all(event.to_json().as_bytes()).map_err(io)?;
            out.write_all(b"\n").map_err(io)?;
        }
        written += n;
        progress.advance(n);
    }
    out.flush().map_err(io)?;
    progress.end();
    Ok(written)
}
