//! NIP-40 purge: expired events leave the disk. Reads already skip them
//! (`store/query/`); this deletes them, a batch at a time, with every row of core's
//! that references them. Plugins take out their own rows through
//! `Plugin::on_events_purged`, in the same transaction (`crate::expiry` runs both).

use crate::error::Reason;
use crate::store::prepared::{self, Val};
use crate::store::schema::{event_tags, events, thread_metadata};
use crate::store::{threads, Conn};
use crate::with_conn;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer, Text};

/// Rows one `DELETE … IN (…)` names.
const DELETE_CHUNK: usize = 500;

/// One expired event the purge is deleting, as plugins' `on_events_purged` hooks see it.
#[derive(Debug, Clone, PartialEq, Eq, QueryableByName)]
pub struct PurgedEvent {
    #[diesel(sql_type = BigInt)]
    pub seq: i64,
    #[diesel(sql_type = BigInt)]
    pub community_id: i64,
    #[diesel(sql_type = Text)]
    pub id: String,
    #[diesel(sql_type = Integer)]
    pub kind: i32,
}

/// Pick at most `batch` events expired at `now_secs` (oldest expiry first) and lock
/// them. On PostgreSQL several processes purge at once: `SKIP LOCKED` hands each its
/// own rows, so none waits on another's batch or deletes a row twice.
pub fn pick_expired(
    conn: &mut Conn<'_>,
    now_secs: i64,
    batch: u32,
) -> Result<Vec<PurgedEvent>, Reason> {
    let lock = match conn {
        Conn::Sqlite(_) => "",
        Conn::Pg(_) => " FOR UPDATE SKIP LOCKED",
    };
    let text = format!(
        "SELECT seq, community_id, id, kind FROM events \
         WHERE expires_at IS NOT NULL AND expires_at <= ? \
         ORDER BY expires_at LIMIT ?{lock}"
    );
    prepared::load(conn, &text, &[Val::I(now_secs), Val::I(i64::from(batch))])
}

/// Bytes (content + tags JSON) `pubkey` holds in `community_id` in events that expire
/// after `now_secs` (`limits.max_expiring_bytes_per_pubkey`).
pub fn expiring_bytes(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    now_secs: i64,
) -> Result<i64, Reason> {
    #[derive(QueryableByName)]
    struct Sum {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let rows: Vec<Sum> = prepared::load(
        conn,
        "SELECT CAST(COALESCE(SUM(octet_length(content) + octet_length(tags)), 0) AS BIGINT) AS n \
         FROM events WHERE community_id = ? AND pubkey = ? \
         AND expires_at IS NOT NULL AND expires_at > ?",
        &[Val::I(community_id), Val::T(pubkey), Val::I(now_secs)],
    )?;
    Ok(rows.first().map_or(0, |row| row.n))
}

/// Delete `purged` with their tag rows and thread rows. A purged reply leaves its
/// thread as a deleted one does (its ancestors' counts and newest reply time
/// recomputed, `threads::on_deleted`), then its row goes too.
pub fn delete_purged(conn: &mut Conn<'_>, purged: &[PurgedEvent]) -> Result<(), Reason> {
    for event in purged {
        threads::on_deleted(conn, event.community_id, &event.id)?;
        let row = thread_metadata::table
            .filter(thread_metadata::community_id.eq(event.community_id))
            .filter(thread_metadata::event_id.eq(&event.id));
        with_conn!(conn, |c| diesel::delete(row).execute(c))?;
    }
    let seqs: Vec<i64> = purged.iter().map(|event| event.seq).collect();
    // A list is one bound variable per value on SQLite: chunks keep any configured
    // batch size under its variable limit.
    for chunk in seqs.chunks(DELETE_CHUNK) {
        with_conn!(conn, |c| diesel::delete(
            event_tags::table.filter(event_tags::event_seq.eq_any(chunk))
        )
        .execute(c))?;
        with_conn!(conn, |c| diesel::delete(
            events::table.filter(events::seq.eq_any(chunk))
        )
        .execute(c))?;
    }
    Ok(())
}
