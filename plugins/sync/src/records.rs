//! The record set of one reconciliation: what a REQ of the same filter could return to
//! the same reader, as (created_at, id) pairs.
//!
//! The filter gets a REQ's checks through core's query service (`check_plain`: bounds,
//! `auth-required:` for channel data before AUTH, every plugin's `reject_filter`); the
//! records are read within the reader's scope from the access service, with core's own
//! exclusions (deleted, moderator-removed, expired at this moment), by
//! `store::query_stamps` — indexes and row headers only, no event is loaded. One read
//! transaction (PostgreSQL `REPEATABLE READ`, one SQLite read transaction) reads at most
//! one row more than the room its session was given (`max_sync_records` or what is left
//! of its shares, `shares.rs`), so a set over the bound is refused having cost no more
//! than the bound. The checks and the scope come first ([`check`]), the read after the
//! room is taken ([`read`]). A channel the reader cannot read is outside the scope: it reconciles
//! exactly like an empty one. A set read before and still true is reused
//! (`set_cache.rs`) instead of being read again; on SQLite one that only appends made
//! stale is brought up to date with the rows appended since (`MOST_APPENDED` at most).

use crate::set_cache::{Kept, Lookup, SetCache, SetKey, SharedSet};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{PlainReads, Services};
use buzz_core::store::{append_point, appended_stamps, next_expiry, query_stamps, Scope};
use buzz_nostr::filter::Filter;
use negentropy::{Id, Item, NegentropyStorageBase, NegentropyStorageVector};
use std::sync::Arc;
use std::time::Instant;

/// A sealed record set, ready for a negentropy engine.
pub(crate) struct RecordSet {
    pub(crate) storage: SharedSet,
    pub(crate) records: usize,
}

/// A filter that passed a REQ's checks, with the reader's scope: nothing read yet.
pub(crate) struct Checked {
    filter: Filter,
    scope: Scope,
}

impl Checked {
    /// The most records this filter's set can hold: its `limit`, else `max_records`.
    pub(crate) fn most(&self, max_records: usize) -> usize {
        self.filter
            .limit
            .map_or(max_records, |l| usize::try_from(l).unwrap_or(usize::MAX))
            .min(max_records)
    }
}

/// What a read found.
pub(crate) enum Read {
    Set(RecordSet),
    /// More records than the room it was given (one row past it was read).
    Over,
}

/// Every refusal a REQ of `filter` would get for `ctx`, then the reader's scope.
pub(crate) async fn check(
    services: &Services,
    queries: &dyn PlainReads,
    ctx: &ConnCtx,
    filter: Filter,
) -> Result<Checked, Reason> {
    let mut checked = queries.check_plain(ctx, vec![filter], "NEG-OPEN").await?;
    let filter = checked
        .pop()
        .ok_or_else(|| Reason::Internal(anyhow::anyhow!("a checked NEG-OPEN lost its filter")))?;
    let scope = services
        .access
        .scope_for(ctx, filter.channels().map(<[String]>::to_vec))
        .await?;
    Ok(Checked { filter, scope })
}

/// Rows appended since a base set that one open reads at most, of every community:
/// more, and the whole set is read instead (cheaper than a long range of others' rows).
const MOST_APPENDED: i64 = 10_000;

/// What one read transaction found.
enum Found {
    /// The whole set (at most the room and one row).
    Whole(Vec<(i64, String)>),
    /// The rows appended since the base's point.
    Appended(Arc<Kept>, Vec<(i64, String)>),
}

/// Read the record set of a checked filter, at most `room` records (one row more is read
/// to tell a larger set: [`Read::Over`]), or reuse the one `cache` kept if it is still
/// the set, or bring a kept one up to date with the rows appended since its read.
pub(crate) async fn read(
    services: &Services,
    cache: &SetCache,
    checked: Checked,
    room: usize,
) -> Result<Read, Reason> {
    let Checked { filter, scope } = checked;
    let key = SetKey::of(&scope, &filter);
    let mark = services.store.change_mark().await?;
    let now = services.clock.now_secs();
    let base = match cache.get(&key, mark, now, Instant::now()) {
        Lookup::Fresh(kept) => return Ok(fits(&kept, room)),
        // A set cut by its filter's `limit` loses its oldest rows to new ones: read whole.
        Lookup::Base(kept) if filter.limit.is_none() => Some(kept),
        Lookup::Base(_) | Lookup::Miss => None,
    };
    // The filter's own `limit` keeps its NIP-01 meaning (the newest that many); the room
    // is probed with one row more.
    let probe = u64::try_from(room).unwrap_or(u64::MAX).saturating_add(1);
    let limit = filter.limit.map_or(probe, |l| l.min(probe));
    // The mark taken above, before this read began, vouches for it too.
    let (found, point, valid_until) = services
        .store
        .read(move |mut conn| {
            conn.repeatable_read(|conn| {
                let point = append_point(conn)?;
                let appended = match (&base, point) {
                    (Some(base), Some(until)) => match base.point {
                        Some(since) => appended_stamps(
                            conn,
                            &scope,
                            &filter,
                            since,
                            until,
                            MOST_APPENDED,
                            now,
                        )?
                        .map(|rows| Found::Appended(base.clone(), rows)),
                        None => None,
                    },
                    _ => None,
                };
                let found = match appended {
                    Some(found) => found,
                    None => Found::Whole(query_stamps(conn, &scope, &filter, limit, now)?),
                };
                Ok::<_, Reason>((found, point, next_expiry(conn, now)?))
            })
        })
        .await?;
    let (set, records) = match found {
        // At most `room` rows where one more was asked for: the filter's whole set.
        Found::Whole(stamps) if stamps.len() <= room => seal_off(move || seal(stamps)).await?,
        Found::Appended(base, rows) if base.records + rows.len() <= room => {
            seal_off(move || extend(&base.set, rows)).await?
        }
        Found::Whole(_) | Found::Appended(..) => return Ok(Read::Over),
    };
    let kept = Arc::new(Kept {
        set: SharedSet(Arc::new(set)),
        records,
        mark,
        valid_until,
        point,
    });
    cache.put(key, kept.clone(), Instant::now());
    Ok(fits(&kept, room))
}

/// Sealing sorts up to the whole set: off the runtime's threads.
async fn seal_off(
    work: impl FnOnce() -> Result<(NegentropyStorageVector, usize), Reason> + Send + 'static,
) -> Result<(NegentropyStorageVector, usize), Reason> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Reason::Internal(anyhow::anyhow!("sealing a record set: {e}")))?
}

/// A kept set as this open's answer: larger than its room is [`Read::Over`], as a read
/// would have found.
fn fits(kept: &Kept, room: usize) -> Read {
    if kept.records > room {
        Read::Over
    } else {
        Read::Set(RecordSet {
            storage: kept.set.clone(),
            records: kept.records,
        })
    }
}

/// The stamps as a sorted negentropy storage, and how many.
fn seal(stamps: Vec<(i64, String)>) -> Result<(NegentropyStorageVector, usize), Reason> {
    seal_into(NegentropyStorageVector::with_capacity(stamps.len()), stamps)
}

/// A copy of `base` with `appended` added, sealed (sessions may still hold `base`). The
/// two are merged in order, so sealing finds the items sorted and only checks them: a
/// sort of the whole set for a few new rows cost more than the read they replaced.
fn extend(
    base: &SharedSet,
    appended: Vec<(i64, String)>,
) -> Result<(NegentropyStorageVector, usize), Reason> {
    let failed = |e: negentropy::Error| Reason::Internal(anyhow::anyhow!("record set: {e}"));
    let mut new = appended
        .into_iter()
        .map(|(created_at, id)| item(created_at, &id))
        .collect::<Result<Vec<Item>, Reason>>()?;
    new.sort_unstable();
    let size = base.size().map_err(failed)?;
    let mut storage = NegentropyStorageVector::with_capacity(size + new.len());
    let mut new = new.into_iter().peekable();
    base.iterate(0, size, &mut |old, _| {
        while let Some(next) = new.next_if(|next| *next < old) {
            storage.insert(next.timestamp, next.id)?;
        }
        storage.insert(old.timestamp, old.id)?;
        Ok(true)
    })
    .map_err(failed)?;
    for next in new {
        storage.insert(next.timestamp, next.id).map_err(failed)?;
    }
    seal_into(storage, Vec::new())
}

/// A stored stamp as a negentropy item.
fn item(created_at: i64, id: &str) -> Result<Item, Reason> {
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(id, &mut bytes)
        .map_err(|e| Reason::Internal(anyhow::anyhow!("stored event id {id:?}: {e}")))?;
    // Stored events have passed the clock-skew check; a negative time cannot occur and
    // would sort first anyway.
    let at = u64::try_from(created_at).unwrap_or(0);
    Ok(Item::with_timestamp_and_id(at, Id::from_byte_array(bytes)))
}

/// `stamps` inserted into unsealed `storage`, then sealed: sorted, and how many records.
fn seal_into(
    mut storage: NegentropyStorageVector,
    stamps: Vec<(i64, String)>,
) -> Result<(NegentropyStorageVector, usize), Reason> {
    for (created_at, id) in stamps {
        let item = item(created_at, &id)?;
        storage
            .insert(item.timestamp, item.id)
            .map_err(|e| Reason::Internal(anyhow::anyhow!("record set: {e}")))?;
    }
    storage
        .seal()
        .map_err(|e| Reason::Internal(anyhow::anyhow!("record set: {e}")))?;
    let records = storage
        .size()
        .map_err(|e| Reason::Internal(anyhow::anyhow!("record set: {e}")))?;
    Ok((storage, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> String {
        hex::encode([n; 32])
    }

    fn items(set: &NegentropyStorageVector) -> Vec<(u64, u8)> {
        let mut out = Vec::new();
        let size = set.size().expect("sealed");
        set.iterate(0, size, &mut |item, _| {
            out.push((item.timestamp, item.id.as_bytes()[0]));
            Ok(true)
        })
        .expect("iterate");
        out
    }

    #[test]
    fn appended_rows_merge_in_order_wherever_they_fall() {
        let (base, records) =
            seal(vec![(10, id(1)), (20, id(2)), (20, id(4)), (30, id(5))]).expect("seal");
        assert_eq!(records, 4);
        let base = SharedSet(Arc::new(base));
        // Older than all, a tie broken by id, between, and newest; given out of order.
        let appended = vec![(40, id(9)), (5, id(7)), (20, id(3)), (25, id(6))];
        let (set, records) = extend(&base, appended).expect("extend");
        assert_eq!(records, 8);
        assert_eq!(
            items(&set),
            vec![
                (5, 7),
                (10, 1),
                (20, 2),
                (20, 3),
                (20, 4),
                (25, 6),
                (30, 5),
                (40, 9)
            ]
        );
        assert_eq!(items(&base.0).len(), 4, "the base is left as it was");
    }
}
