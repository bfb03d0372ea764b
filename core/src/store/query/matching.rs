//! Reading the matches of NIP-01 filters within a scope, without loading the events:
//! as keys (`query_keys`, with the PostgreSQL wide probe), as `(created_at, id)` stamps
//! (`query_stamps`, NIP-77) and as a count (`count_matching`, NIP-45); `query_events`
//! reads keys and then loads them by seq (`by_seq.rs`). A filter with a tag other than
//! `#h` is read by walking that tag's index newest first (`tag_walk.rs`).

use super::by_seq::load_events;
use super::filter_sql::{
    conditions, narrowed, narrowed_fields, readable_for, scoped, Readable, INLINE_CHANNELS,
};
use super::scope::{ChannelScope, Scope};
use super::tag_walk::{tag_walked, walk_rest, Lateral, TagWalk, Where};
use crate::error::Reason;
use crate::store::conn::Conn;
use crate::store::one_of::one_of;
use crate::store::schema::{event_tags, events};
use crate::store::tag_on_row::tag_on_row;
use crate::with_conn;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use diesel::prelude::*;

diesel::define_sql_function! {
    /// Characters of a text column (both backends): the size estimate of a stored event.
    fn length(x: diesel::sql_types::Text) -> diesel::sql_types::Integer;
}

/// What a query needs to know about a matching row before reading it: where it sorts and
/// roughly how big it is, so an answer can be read a page at a time within a byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventKey {
    pub seq: i64,
    pub created_at: i64,
    /// Characters of content plus tags (a lower bound of the wire size, close enough to
    /// size a page).
    pub size: usize,
}

/// Keys of the events matching `filter` (deleted and, at `now`, expired ones excluded),
/// newest first (`created_at DESC, id ASC`), at most `limit`, with the `id` for ordering.
pub fn query_keys(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Vec<(EventKey, String)>, Reason> {
    if limit == 0 || filter.is_empty_match() {
        return Ok(Vec::new());
    }
    if let Some(keys) = probe_wide(conn, scope, filter, limit, now)? {
        return Ok(keys);
    }
    let Some((readable, _installed)) = readable_for(conn, scope, filter.channels()) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let walk = TagWalk::of(filter);
    if let (Some(walk), Conn::Pg(c)) = (&walk, &mut *conn) {
        let columns = (
            events::seq,
            event_tags::created_at,
            events::id,
            length(events::content) + length(events::tags),
        );
        let Some(q) = lateral(walk, scope, &readable, now, columns, limit) else {
            return Ok(Vec::new());
        };
        let rows: Vec<(i64, i64, String, i32)> = q.load(*c)?;
        return Ok(rows
            .into_iter()
            .map(|(seq, created_at, id, size)| key_of(seq, created_at, id, size))
            .collect());
    }
    let rows: Vec<(i64, i64, String, i32)> = with_conn!(conn, |c| {
        if let Some(walk) = &walk {
            let q = events::table
                .inner_join(event_tags::table)
                .select((
                    events::seq,
                    event_tags::created_at,
                    events::id,
                    length(events::content) + length(events::tags),
                ))
                .into_boxed();
            let q = tag_walked!(q, walk, scope.community_id);
            let Some(q) = scoped!(q, scope, &readable, None, now) else {
                return Ok(Vec::new());
            };
            walk_rest!(q, walk)
                .order((event_tags::created_at.desc(), events::id.asc()))
                .limit(limit)
                .load(c)
        } else {
            let q = events::table
                .select((
                    events::seq,
                    events::created_at,
                    events::id,
                    length(events::content) + length(events::tags),
                ))
                .into_boxed();
            let Some(q) = scoped!(q, scope, &readable, filter.channels(), now) else {
                return Ok(Vec::new());
            };
            narrowed!(q, filter, scope.community_id)
                .order((events::created_at.desc(), events::id.asc()))
                .limit(limit)
                .load(c)
        }
    })?;
    Ok(rows
        .into_iter()
        .map(|(seq, created_at, id, size)| key_of(seq, created_at, id, size))
        .collect())
}

/// PostgreSQL's statement for `walk` ([`Lateral`]): the same tag rows, scope and rest of
/// the filter as the SQLite join's, written by the same macros. `None` when the scope
/// lets nothing match.
fn lateral<S>(
    walk: &TagWalk,
    scope: &Scope,
    readable: &Option<Readable>,
    now: i64,
    columns: S,
    limit: i64,
) -> Option<Lateral<S>> {
    let tags = tag_walked!(Where::<event_tags::table>::new(), walk, scope.community_id);
    let rows = scoped!(Where::<events::table>::new(), scope, readable, None, now)?;
    let rows = walk_rest!(rows, walk);
    Some(Lateral {
        columns,
        tags,
        rows,
        limit,
    })
}

fn key_of(seq: i64, created_at: i64, id: String, size: i32) -> (EventKey, String) {
    let size = usize::try_from(size).unwrap_or(0);
    (
        EventKey {
            seq,
            created_at,
            size,
        },
        id,
    )
}

/// PostgreSQL, a reader of many channels, a filter naming none (a community-wide REQ):
/// binding the reader's whole set as an array costs per channel on every query (12× at
/// 20,000 channels vs 10). Instead read a short prefix of the matches in answer order
/// without the channel condition and keep the readable ones here, a hash lookup a row —
/// exact, because the order is total: the first `limit` readable rows of a prefix are the
/// first overall, and a prefix shorter than asked for was everything. `None` (the caller
/// binds the set) when the prefix holds too few readable rows to decide: a reader of few
/// of a busy community's channels.
fn probe_wide(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Option<Vec<(EventKey, String)>>, Reason> {
    let ChannelScope::Only(set) = &scope.channels else {
        return Ok(None);
    };
    let Conn::Pg(c) = conn else {
        return Ok(None);
    };
    if filter.channels().is_some() || set.len() <= INLINE_CHANNELS {
        return Ok(None);
    }
    let probe = limit.saturating_mul(4).saturating_add(64);
    let unscoped = Scope {
        community_id: scope.community_id,
        community_wide: true,
        channels: ChannelScope::All,
        expiry: std::collections::HashMap::new(),
    };
    let probe_rows = i64::try_from(probe).unwrap_or(i64::MAX);
    let rows: Vec<(i64, i64, String, i32, Option<String>)> = if let Some(walk) = TagWalk::of(filter)
    {
        // A tag filter's prefix is read down the tag index too, as `query_keys` reads it.
        let columns = (
            events::seq,
            event_tags::created_at,
            events::id,
            length(events::content) + length(events::tags),
            events::channel_id,
        );
        let Some(q) = lateral(&walk, &unscoped, &None, now, columns, probe_rows) else {
            return Ok(Some(Vec::new()));
        };
        q.load(*c)?
    } else {
        let q = events::table
            .select((
                events::seq,
                events::created_at,
                events::id,
                length(events::content) + length(events::tags),
                events::channel_id,
            ))
            .into_boxed();
        let Some(q) = scoped!(q, &unscoped, &None::<Readable>, filter.channels(), now) else {
            return Ok(Some(Vec::new()));
        };
        narrowed!(q, filter, scope.community_id)
            .order((events::created_at.desc(), events::id.asc()))
            .limit(probe_rows)
            .load(*c)?
    };
    let complete = (rows.len() as u64) < probe;
    let kept: Vec<(EventKey, String)> = rows
        .into_iter()
        .filter(|row| match &row.4 {
            None => scope.community_wide,
            Some(channel) => set.contains(channel),
        })
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|(seq, created_at, id, size, _)| key_of(seq, created_at, id, size))
        .collect();
    if complete || kept.len() as u64 >= limit {
        Ok(Some(kept))
    } else {
        Ok(None)
    }
}

/// The `(created_at, id)` pairs of the events matching `filter` within `scope` at `now`
/// (deleted and expired ones excluded, exactly as [`query_keys`] excludes them), newest
/// first, at most `limit`: what a set reconciliation (NIP-77) compares, read from the
/// `events` indexes and row headers alone — no content, tags or signature is read or
/// sent. A caller bounding the set asks for one more than it accepts to learn that there
/// are more. Run it inside [`Conn::repeatable_read`] with the reads it must agree with.
pub fn query_stamps(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Vec<(i64, String)>, Reason> {
    if limit == 0 || filter.is_empty_match() {
        return Ok(Vec::new());
    }
    let Some((readable, _installed)) = readable_for(conn, scope, filter.channels()) else {
        return Ok(Vec::new());
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let walk = TagWalk::of(filter);
    if let (Some(walk), Conn::Pg(c)) = (&walk, &mut *conn) {
        let columns = (event_tags::created_at, events::id);
        let Some(q) = lateral(walk, scope, &readable, now, columns, limit) else {
            return Ok(Vec::new());
        };
        return Ok(q.load(*c)?);
    }
    let rows: Vec<(i64, String)> = with_conn!(conn, |c| {
        if let Some(walk) = &walk {
            let q = events::table
                .inner_join(event_tags::table)
                .select((event_tags::created_at, events::id))
                .into_boxed();
            let q = tag_walked!(q, walk, scope.community_id);
            let Some(q) = scoped!(q, scope, &readable, None, now) else {
                return Ok(Vec::new());
            };
            walk_rest!(q, walk)
                .order((event_tags::created_at.desc(), events::id.asc()))
                .limit(limit)
                .load(c)
        } else {
            let q = events::table
                .select((events::created_at, events::id))
                .into_boxed();
            let Some(q) = scoped!(q, scope, &readable, filter.channels(), now) else {
                return Ok(Vec::new());
            };
            narrowed!(q, filter, scope.community_id)
                .order((events::created_at.desc(), events::id.asc()))
                .limit(limit)
                .load(c)
        }
    })?;
    Ok(rows)
}

/// NIP-45: how many events match any of `filters` within `scope` at `now` — each event
/// once, however many filters match it; `limit` does not bound it. One statement: the
/// filters' conditions OR'd, under the same scope, deletion and expiry rules as
/// [`query_keys`]. Counts no further than `cap` (at least 1): past it the answer is `cap`,
/// approximate (NIP-45), so a COUNT over a whole community stops after `cap` rows
/// instead of scanning them all.
pub fn count_matching(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filters: &[Filter],
    now: i64,
    cap: u64,
) -> Result<Count, Reason> {
    let none = Count {
        count: 0,
        approximate: false,
    };
    let filters: Vec<&Filter> = filters.iter().filter(|f| !f.is_empty_match()).collect();
    if filters.is_empty() {
        return Ok(none);
    }
    let cap = cap.max(1);
    // One row past the cap says "more than cap" without reading on.
    let rows_read = i64::try_from(cap).unwrap_or(i64::MAX - 1) + 1;
    // One channel list for the statement: the channels the filters name when every
    // filter names some (each filter's `#h` condition narrows further), else the
    // reader's whole set.
    let named: Option<Vec<String>> = filters
        .iter()
        .map(|f| f.channels().map(<[String]>::to_vec))
        .collect::<Option<Vec<_>>>()
        .map(|lists| lists.concat());
    let Some((readable, _installed)) = readable_for(conn, scope, named.as_deref()) else {
        return Ok(none);
    };
    let community_id = scope.community_id;
    let seqs: Vec<i64> = match conn {
        Conn::Sqlite(c) => {
            let q = events::table.select(events::seq).into_boxed();
            let Some(mut q) = scoped!(q, scope, &readable, named.as_deref(), now) else {
                return Ok(none);
            };
            let mut any = conditions!(diesel::sqlite::Sqlite, filters[0], community_id);
            for f in &filters[1..] {
                let next = conditions!(diesel::sqlite::Sqlite, f, community_id);
                any = Box::new(any.or(next));
            }
            q = q.filter(any).limit(rows_read);
            q.load(*c)?
        }
        Conn::Pg(c) => {
            let q = events::table.select(events::seq).into_boxed();
            let Some(mut q) = scoped!(q, scope, &readable, named.as_deref(), now) else {
                return Ok(none);
            };
            let mut any = conditions!(diesel::pg::Pg, filters[0], community_id);
            for f in &filters[1..] {
                let next = conditions!(diesel::pg::Pg, f, community_id);
                any = Box::new(any.or(next));
            }
            q = q.filter(any).limit(rows_read);
            q.load(*c)?
        }
    };
    let counted = u64::try_from(seqs.len()).unwrap_or(u64::MAX);
    Ok(Count {
        count: counted.min(cap),
        approximate: counted > cap,
    })
}

/// A NIP-45 count: `approximate` when counting stopped at the relay's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub count: u64,
    pub approximate: bool,
}

/// Events matching `filter` (deleted and expired ones excluded), newest first (`created_at DESC,
/// id ASC`), at most `limit`, read whole (for callers that need them all at once).
pub fn query_events(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Vec<Event>, Reason> {
    let seqs: Vec<i64> = query_keys(conn, scope, filter, limit, now)?
        .into_iter()
        .map(|(key, _)| key.seq)
        .collect();
    load_events(conn, scope.community_id, &seqs)
}
