//! Captures in the relay's database (the embedded default, used without Redis): the
//! `snapshot_captures` row is the quota index entry (a lease or a registered capture),
//! `snapshot_records` holds the records. Quota changes and registration go through the
//! store's writer, so each is one transaction; on PostgreSQL a transaction-scoped
//! advisory lock serialises them across relay processes sharing the database.

use super::redis::info;
use super::{bytes_for, slot_for, CaptureInfo, CaptureStore, Lease, Quota, Refusal, SWEEP_STEP};
use crate::manifest::{names, Header, Manifest};
use buzz_core::error::Reason;
use buzz_core::store::{Conn, Store};
use buzz_core::with_conn;
use diesel::prelude::*;

diesel::table! {
    snapshot_captures (id) {
        id -> Text,
        community_id -> BigInt,
        reader -> Text,
        state -> Text,
        until_ms -> BigInt,
        bytes -> BigInt,
        pages -> BigInt,
        entries -> BigInt,
        query -> Text,
        created_ms -> BigInt,
    }
}

diesel::table! {
    snapshot_records (capture_id, name) {
        capture_id -> Text,
        name -> Text,
        value -> Text,
    }
}

const LEASE: &str = "lease";
const READY: &str = "ready";
/// Rows per multi-row insert (3 parameters each: within both backends' limits).
const ROWS_PER_INSERT: usize = 500;
/// The advisory lock key of snapshot quota changes ("snapshot" in ASCII).
const QUOTA_LOCK: i64 = 0x736e_6170_7368_6f74;

pub(crate) struct DbCaptures {
    store: Store,
}

impl DbCaptures {
    pub(crate) fn new(store: Store) -> DbCaptures {
        DbCaptures { store }
    }
}

/// Serialise quota changes across processes (PostgreSQL; SQLite has one writer).
fn lock_quota(conn: &mut Conn<'_>) -> Result<(), Reason> {
    if let Conn::Pg(c) = conn {
        diesel::sql_query("SELECT pg_advisory_xact_lock($1)")
            .bind::<diesel::sql_types::BigInt, _>(QUOTA_LOCK)
            .execute(*c)?;
    }
    Ok(())
}

fn drop_capture(conn: &mut Conn<'_>, id: &str) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::delete(
        snapshot_records::table.filter(snapshot_records::capture_id.eq(id))
    )
    .execute(c))?;
    with_conn!(conn, |c| diesel::delete(
        snapshot_captures::table.filter(snapshot_captures::id.eq(id))
    )
    .execute(c))?;
    Ok(())
}

/// Remove up to `step` expired captures and every lapsed lease.
fn sweep_in(conn: &mut Conn<'_>, now_ms: i64, step: usize) -> Result<usize, Reason> {
    with_conn!(conn, |c| diesel::delete(
        snapshot_captures::table
            .filter(snapshot_captures::state.eq(LEASE))
            .filter(snapshot_captures::until_ms.le(now_ms))
    )
    .execute(c))?;
    let expired: Vec<String> = with_conn!(conn, |c| snapshot_captures::table
        .filter(snapshot_captures::until_ms.le(now_ms))
        .select(snapshot_captures::id)
        .order(snapshot_captures::until_ms.asc())
        .limit(i64::try_from(step).unwrap_or(i64::MAX))
        .load(c))?;
    for id in &expired {
        drop_capture(conn, id)?;
    }
    Ok(expired.len())
}

#[async_trait::async_trait]
impl CaptureStore for DbCaptures {
    async fn reserve(
        &self,
        lease: &Lease,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason> {
        let lease = lease.clone();
        self.store
            .write(move |conn| {
                lock_quota(conn)?;
                sweep_in(conn, now_ms, SWEEP_STEP)?;
                let active: Vec<(i64, String)> = with_conn!(conn, |c| snapshot_captures::table
                    .filter(snapshot_captures::until_ms.gt(now_ms))
                    .select((snapshot_captures::community_id, snapshot_captures::reader))
                    .load(c))?;
                if let Err(refusal) = slot_for(&lease, &active, &quota) {
                    return Ok(Err(refusal));
                }
                with_conn!(conn, |c| diesel::insert_into(snapshot_captures::table)
                    .values((
                        snapshot_captures::id.eq(&lease.id),
                        snapshot_captures::community_id.eq(lease.community),
                        snapshot_captures::reader.eq(&lease.reader),
                        snapshot_captures::state.eq(LEASE),
                        snapshot_captures::until_ms.eq(lease.until_ms),
                        snapshot_captures::bytes.eq(0_i64),
                        snapshot_captures::pages.eq(0_i64),
                        snapshot_captures::entries.eq(0_i64),
                        snapshot_captures::query.eq(""),
                        snapshot_captures::created_ms.eq(now_ms),
                    ))
                    .execute(c))?;
                Ok(Ok(()))
            })
            .await
    }

    async fn register(
        &self,
        manifest: &Manifest,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason> {
        let manifest = manifest.clone();
        self.store
            .write(move |conn| {
                lock_quota(conn)?;
                let h = &manifest.header;
                let held: i64 = with_conn!(conn, |c| snapshot_captures::table
                    .filter(snapshot_captures::id.eq(&h.id))
                    .filter(snapshot_captures::state.eq(LEASE))
                    .filter(snapshot_captures::until_ms.gt(now_ms))
                    .count()
                    .get_result(c))?;
                if held == 0 {
                    drop_capture(conn, &h.id)?;
                    return Ok(Err(Refusal::Lapsed));
                }
                let charged: Vec<(i64, i64)> = with_conn!(conn, |c| snapshot_captures::table
                    .filter(snapshot_captures::state.eq(READY))
                    .filter(snapshot_captures::until_ms.gt(now_ms))
                    .select((snapshot_captures::community_id, snapshot_captures::bytes))
                    .load(c))?;
                let charged: Vec<(i64, u64)> = charged
                    .into_iter()
                    .map(|(c, b)| (c, u64::try_from(b).unwrap_or(0)))
                    .collect();
                if let Err(refusal) = bytes_for(h.community, h.bytes, &charged, &quota) {
                    drop_capture(conn, &h.id)?;
                    return Ok(Err(refusal));
                }
                let bytes = i64::try_from(h.bytes).unwrap_or(i64::MAX);
                let served = names::served(0);
                let rows: Vec<_> = manifest
                    .records
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .chain(std::iter::once((served.as_str(), "1")))
                    .map(|(n, v)| {
                        (
                            snapshot_records::capture_id.eq(h.id.as_str()),
                            snapshot_records::name.eq(n),
                            snapshot_records::value.eq(v),
                        )
                    })
                    .collect();
                for chunk in rows.chunks(ROWS_PER_INSERT) {
                    with_conn!(conn, |c| diesel::insert_into(snapshot_records::table)
                        .values(chunk)
                        .execute(c))?;
                }
                with_conn!(conn, |c| diesel::update(
                    snapshot_captures::table.filter(snapshot_captures::id.eq(&h.id))
                )
                .set((
                    snapshot_captures::state.eq(READY),
                    snapshot_captures::until_ms.eq(h.expires_ms),
                    snapshot_captures::bytes.eq(bytes),
                    snapshot_captures::pages.eq(i64::from(h.pages)),
                    snapshot_captures::entries.eq(i64::try_from(h.entries).unwrap_or(i64::MAX)),
                    snapshot_captures::query.eq(&h.query),
                    snapshot_captures::created_ms.eq(h.created_ms),
                ))
                .execute(c))?;
                Ok(Ok(()))
            })
            .await
    }

    async fn release(&self, id: &str) {
        let id = id.to_owned();
        let released = self
            .store
            .write(move |conn| {
                with_conn!(conn, |c| diesel::delete(
                    snapshot_captures::table
                        .filter(snapshot_captures::id.eq(&id))
                        .filter(snapshot_captures::state.eq(LEASE))
                )
                .execute(c))?;
                Ok(())
            })
            .await;
        if let Err(reason) = released {
            tracing::warn!(%reason, "snapshot lease not released; it expires by itself");
        }
    }

    async fn records(&self, id: &str, wanted: &[String]) -> Result<Vec<Option<String>>, Reason> {
        let (id, wanted) = (id.to_owned(), wanted.to_vec());
        self.store
            .read(move |mut conn| {
                let mut found = std::collections::HashMap::new();
                for chunk in wanted.chunks(ROWS_PER_INSERT) {
                    let rows: Vec<(String, String)> =
                        with_conn!(&mut conn, |c| snapshot_records::table
                            .filter(snapshot_records::capture_id.eq(&id))
                            .filter(snapshot_records::name.eq_any(chunk))
                            .select((snapshot_records::name, snapshot_records::value))
                            .load(c))?;
                    found.extend(rows);
                }
                Ok(wanted.iter().map(|n| found.remove(n)).collect())
            })
            .await
    }

    async fn mark_served(&self, id: &str, page: u32) -> Result<bool, Reason> {
        let id = id.to_owned();
        self.store
            .write(move |conn| {
                let exists: i64 = with_conn!(conn, |c| snapshot_captures::table
                    .filter(snapshot_captures::id.eq(&id))
                    .filter(snapshot_captures::state.eq(READY))
                    .count()
                    .get_result(c))?;
                if exists == 0 {
                    return Ok(false);
                }
                with_conn!(conn, |c| diesel::insert_into(snapshot_records::table)
                    .values((
                        snapshot_records::capture_id.eq(&id),
                        snapshot_records::name.eq(names::served(page)),
                        snapshot_records::value.eq("1"),
                    ))
                    .on_conflict_do_nothing()
                    .execute(c))?;
                Ok(true)
            })
            .await
    }

    async fn sweep(&self, now_ms: i64, step: usize) -> Result<usize, Reason> {
        self.store
            .write(move |conn| {
                lock_quota(conn)?;
                sweep_in(conn, now_ms, step)
            })
            .await
    }

    async fn forget_community(&self, community: i64) -> Result<usize, Reason> {
        self.store
            .write(move |conn| {
                lock_quota(conn)?;
                let ids: Vec<(String, String)> = with_conn!(conn, |c| snapshot_captures::table
                    .filter(snapshot_captures::community_id.eq(community))
                    .select((snapshot_captures::id, snapshot_captures::state))
                    .load(c))?;
                for (id, _) in &ids {
                    drop_capture(conn, id)?;
                }
                Ok(ids.iter().filter(|(_, s)| s == READY).count())
            })
            .await
    }

    async fn list(&self) -> Result<Vec<CaptureInfo>, Reason> {
        self.store.read(|mut conn| list_in(&mut conn)).await
    }
}

/// Every capture and lease in the database (also what `buzz-admin` shows).
pub(crate) fn list_in(conn: &mut Conn<'_>) -> Result<Vec<CaptureInfo>, Reason> {
    let rows: Vec<(String, i64, String, String, i64)> =
        with_conn!(conn, |c| snapshot_captures::table
            .select((
                snapshot_captures::id,
                snapshot_captures::community_id,
                snapshot_captures::reader,
                snapshot_captures::state,
                snapshot_captures::until_ms,
            ))
            .order(snapshot_captures::created_ms.asc())
            .load(c))?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, community, reader, state, until_ms) in rows {
        if state == LEASE {
            out.push(CaptureInfo {
                id,
                community,
                reader,
                registered: false,
                query: String::new(),
                created_ms: 0,
                until_ms,
                entries: 0,
                pages: 0,
                pages_served: 0,
                bytes: 0,
            });
            continue;
        }
        let header: Option<String> = with_conn!(conn, |c| snapshot_records::table
            .filter(snapshot_records::capture_id.eq(&id))
            .filter(snapshot_records::name.eq(names::HEADER))
            .select(snapshot_records::value)
            .first(c)
            .optional())?;
        let Some(header) = header else { continue };
        let h: Header = serde_json::from_str(&header).map_err(|e| Reason::Internal(e.into()))?;
        let served: i64 = with_conn!(conn, |c| snapshot_records::table
            .filter(snapshot_records::capture_id.eq(&id))
            .filter(snapshot_records::name.like("s:%"))
            .count()
            .get_result(c))?;
        out.push(info(h, usize::try_from(served).unwrap_or(0)));
    }
    Ok(out)
}
