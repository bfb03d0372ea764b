//! The record set of one reconciliation: what a REQ of the same filter could return to
//! the same reader, as (created_at, id) pairs.
//!
//! The filter gets a REQ's checks through core's query service (`check_plain`: bounds,
//! `auth-required:` for channel data before AUTH, every plugin's `check_filter`); the
//! records are read within the reader's scope from the access service, with core's own
//! exclusions (deleted, moderator-removed, expired at this moment), by
//! `store::query_stamps` — indexes and row headers only, no event is loaded. One read
//! transaction (PostgreSQL `REPEATABLE READ`, one SQLite read transaction) reads at most
//! `max_sync_records + 1` rows, so a set over the bound is refused having cost no more
//! than the bound. A channel the reader cannot read is outside the scope: it reconciles
//! exactly like an empty one.

use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::Services;
use buzz_core::query::QueryService;
use buzz_core::store::query_stamps;
use buzz_nostr::filter::Filter;
use negentropy::{Id, NegentropyStorageVector};

/// A sealed record set, ready for a negentropy engine.
pub(crate) struct RecordSet {
    pub(crate) storage: NegentropyStorageVector,
    pub(crate) records: usize,
}

/// Read the record set of `filter` for `ctx`, or refuse it (`blocked:` past
/// `max_records`, every refusal a REQ of the filter would get).
pub(crate) async fn read(
    services: &Services,
    queries: &QueryService,
    ctx: &ConnCtx,
    filter: Filter,
    max_records: usize,
) -> Result<RecordSet, Reason> {
    let mut checked = queries.check_plain(ctx, vec![filter], "NEG-OPEN").await?;
    let filter = checked
        .pop()
        .ok_or_else(|| Reason::Internal(anyhow::anyhow!("a checked NEG-OPEN lost its filter")))?;
    let scope = services
        .access
        .scope_for(ctx, filter.channels().map(<[String]>::to_vec))
        .await?;
    let now = services.clock.now_secs();
    // The filter's own `limit` keeps its NIP-01 meaning (the newest that many); the bound
    // is probed with one row more.
    let probe = u64::try_from(max_records)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let limit = filter.limit.map_or(probe, |l| l.min(probe));
    let stamps = services
        .store
        .read(move |mut conn| {
            conn.repeatable_read(|conn| query_stamps(conn, &scope, &filter, limit, now))
        })
        .await?;
    if stamps.len() > max_records {
        return Err(Reason::Blocked(format!(
            "this filter matches more than {max_records} events, the most one sync may \
             cover (max_sync_records); narrow it with since/until or by channel"
        )));
    }
    tokio::task::spawn_blocking(move || seal(stamps))
        .await
        .map_err(|e| Reason::Internal(anyhow::anyhow!("sealing a record set: {e}")))?
}

/// The stamps as a sorted negentropy storage.
fn seal(stamps: Vec<(i64, String)>) -> Result<RecordSet, Reason> {
    let records = stamps.len();
    let mut storage = NegentropyStorageVector::with_capacity(records);
    for (created_at, id) in stamps {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(&id, &mut bytes)
            .map_err(|e| Reason::Internal(anyhow::anyhow!("stored event id {id:?}: {e}")))?;
        // Stored events have passed the clock-skew check; a negative time cannot occur
        // and would sort first anyway.
        let at = u64::try_from(created_at).unwrap_or(0);
        storage
            .insert(at, Id::from_byte_array(bytes))
            .map_err(|e| Reason::Internal(anyhow::anyhow!("record set: {e}")))?;
    }
    storage
        .seal()
        .map_err(|e| Reason::Internal(anyhow::anyhow!("record set: {e}")))?;
    Ok(RecordSet { storage, records })
}
