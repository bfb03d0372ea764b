//! The SQL of this plugin, written once for SQLite and PostgreSQL with `with_conn!`.
//!
//! Every row predicate — community, channel, deletion, kinds, top-level classification,
//! thread membership, depth, cursor — is evaluated by the database, before `LIMIT`.
//! That is what makes the `limit + 1` probe honest: a page of 600 ineligible rows in
//! front of the eligible ones can never look like exhaustion (NIP-CW "Implementation
//! Gotchas").
//!
//! Index use: channel rows walk `events_by_channel (community_id, channel_id, created_at
//! DESC, id)` in order and probe `thread_metadata`'s primary key per candidate; thread
//! replies walk `thread_metadata_by_root (community_id, root_id, created_at DESC,
//! event_id)`; aux scans start from `event_tags_lookup (community_id, name, value,
//! event_seq)`. None of them reads more of a channel than the page needs.

use crate::cursor::Cursor;
use crate::request::LegacyCursor;
use buzz_core::error::Reason;
use buzz_core::store::schema::{event_tags, events, thread_metadata};
use buzz_core::store::threads::ThreadRow;
use buzz_core::store::{Conn, EventRow};
use buzz_core::with_conn;
use diesel::connection::DefaultLoadingMode;
use diesel::prelude::*;

fn kind_values(kinds: &[u32]) -> Vec<i32> {
    kinds
        .iter()
        .filter_map(|k| i32::try_from(*k).ok())
        .collect()
}

/// Top-level rows of one channel, newest first (`created_at DESC, id ASC`), after
/// `cursor`, at most `take`.
///
/// Top-level: no `thread_metadata` row (stored before metadata existed — fail-open),
/// or depth 0, or a broadcast depth-1 reply; and not deleted.
///
/// Only events that carry `["h", channel]`: rows must be a subset of the plain `#h`
/// stream (NIP-CW "Degradation"). The channel column alone also holds relay-signed
/// group state (39000–39002, tagged `d`), which is replaceable and would otherwise
/// sit at the head of the timeline. The check probes `event_tags`' primary key
/// (`event_seq`, …) per candidate, so it keeps the channel index walk (see the
/// `OFFSET 0` below for why it must stay a per-row probe on PostgreSQL).
pub(crate) fn channel_rows(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel: &str,
    kinds: Option<&[u32]>,
    cursor: Option<&Cursor>,
    take: i64,
    now: i64,
) -> Result<Vec<EventRow>, Reason> {
    if kinds.is_some_and(<[u32]>::is_empty) {
        // `kinds: []` matches nothing (NIP-01); the window is served, empty.
        return Ok(Vec::new());
    }
    let kinds = kinds.map(kind_values);
    Ok(with_conn!(conn, |c| {
        let mut q = events::table
            .left_join(
                thread_metadata::table.on(thread_metadata::community_id
                    .eq(events::community_id)
                    .and(thread_metadata::event_id.eq(events::id))),
            )
            .filter(events::community_id.eq(community_id))
            .filter(events::channel_id.eq(channel))
            .filter(events::deleted_at.is_null())
            // NIP-40: an expired message is not served (as core's REQ does not).
            .filter(events::expires_at.is_null().or(events::expires_at.gt(now)))
            .filter(diesel::dsl::exists(
                event_tags::table
                    .filter(event_tags::event_seq.eq(events::seq))
                    .filter(event_tags::name.eq("h"))
                    .filter(event_tags::value.eq(channel))
                    // `OFFSET 0` keeps PostgreSQL from turning the probe into a semi-join:
                    // as a join its row estimate is far too low (it multiplies the `h`
                    // share by the channel's), so the planner expects fewer rows than
                    // the page and reads the whole channel to sort it (seq scans + hash
                    // semi-join; ~0.3 s at 10k events, seconds at 100k, and always with
                    // the generic plan of the cached prepared statement). As a per-row
                    // subplan the channel index walk stops at the page.
                    .offset(0),
            ))
            .filter(
                thread_metadata::event_id
                    .nullable()
                    .is_null()
                    .or(thread_metadata::deleted.nullable().eq(false).and(
                        thread_metadata::depth
                            .nullable()
                            .eq(0)
                            .or(thread_metadata::depth
                                .nullable()
                                .eq(1)
                                .and(thread_metadata::broadcast.nullable().eq(true))),
                    )),
            )
            .select(EventRow::as_select())
            .into_boxed();
        if let Some(kinds) = &kinds {
            q = q.filter(events::kind.eq_any(kinds.clone()));
        }
        if let Some(cursor) = cursor {
            // `created_at <= ts` first so the index range starts at the cursor; the OR
            // then keeps `created_at < ts OR (created_at = ts AND id > cursor id)`.
            q = q.filter(events::created_at.le(cursor.created_at)).filter(
                events::created_at
                    .lt(cursor.created_at)
                    .or(events::id.gt(cursor.id.clone())),
            );
        }
        q.order((events::created_at.desc(), events::id.asc()))
            .limit(take)
            .load(c)
    })?)
}

/// What a thread-reply scan selects.
#[derive(Debug, Clone)]
pub(crate) struct ReplyScan<'a> {
    pub(crate) community_id: i64,
    pub(crate) channel: &'a str,
    pub(crate) root: &'a str,
    /// `None`: every kind (the legacy path does not restrict rows by kind).
    pub(crate) kinds: Option<&'a [u32]>,
    pub(crate) max_depth: i64,
    pub(crate) take: i64,
    /// Relay time (unix seconds): replies expired by then (NIP-40) are not read.
    pub(crate) now: i64,
}

/// The predicates both reply scans share (root, channel, depth 1..=max, not deleted,
/// kinds), as a boxed query. A macro because inside `with_conn!` the boxed query's type
/// differs per backend.
macro_rules! replies_of {
    ($scan:expr, $max_depth:expr, $kinds:expr) => {{
        let mut q = thread_metadata::table
            .inner_join(
                events::table.on(events::community_id
                    .eq(thread_metadata::community_id)
                    .and(events::id.eq(thread_metadata::event_id))),
            )
            .filter(thread_metadata::community_id.eq($scan.community_id))
            .filter(thread_metadata::root_id.eq($scan.root))
            .filter(thread_metadata::channel_id.eq($scan.channel))
            .filter(thread_metadata::deleted.eq(false))
            .filter(thread_metadata::depth.between(1, $max_depth))
            .filter(events::channel_id.eq($scan.channel))
            .filter(events::deleted_at.is_null())
            .filter(
                events::expires_at
                    .is_null()
                    .or(events::expires_at.gt($scan.now)),
            )
            .select(EventRow::as_select())
            .into_boxed();
        if let Some(kinds) = $kinds {
            q = q.filter(events::kind.eq_any(kinds.clone()));
        }
        q
    }};
}

impl ReplyScan<'_> {
    /// Replies newest first (`created_at DESC, id ASC`), after a window cursor.
    pub(crate) fn newest_first(
        &self,
        conn: &mut Conn<'_>,
        cursor: Option<&Cursor>,
    ) -> Result<Vec<EventRow>, Reason> {
        let max_depth = i32::try_from(self.max_depth).unwrap_or(i32::MAX);
        let kinds = self.kinds.map(kind_values);
        Ok(with_conn!(conn, |c| {
            let mut q = replies_of!(self, max_depth, &kinds);
            if let Some(cursor) = cursor {
                q = q
                    .filter(thread_metadata::created_at.le(cursor.created_at))
                    .filter(
                        thread_metadata::created_at
                            .lt(cursor.created_at)
                            .or(thread_metadata::event_id.gt(cursor.id.clone())),
                    );
            }
            q.order((
                thread_metadata::created_at.desc(),
                thread_metadata::event_id.asc(),
            ))
            .limit(self.take)
            .load(c)
        })?)
    }

    /// Replies oldest first (`created_at ASC, id ASC`), after a legacy cursor.
    pub(crate) fn oldest_first(
        &self,
        conn: &mut Conn<'_>,
        cursor: &LegacyCursor,
    ) -> Result<Vec<EventRow>, Reason> {
        let max_depth = i32::try_from(self.max_depth).unwrap_or(i32::MAX);
        let kinds = self.kinds.map(kind_values);
        Ok(with_conn!(conn, |c| {
            let mut q = replies_of!(self, max_depth, &kinds);
            match cursor {
                LegacyCursor::Start => {}
                LegacyCursor::After {
                    created_at,
                    id: None,
                } => q = q.filter(thread_metadata::created_at.gt(*created_at)),
                LegacyCursor::After {
                    created_at,
                    id: Some(id),
                } => {
                    q = q
                        .filter(thread_metadata::created_at.ge(*created_at))
                        .filter(
                            thread_metadata::created_at
                                .gt(*created_at)
                                .or(thread_metadata::event_id.gt(id.clone())),
                        )
                }
            }
            q.order((
                thread_metadata::created_at.asc(),
                thread_metadata::event_id.asc(),
            ))
            .limit(self.take)
            .load(c)
        })?)
    }
}

/// Kind and channel of a stored event in any deletion state (retained tombstones
/// included), or `None` when the community holds no such event.
pub(crate) fn event_facts(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<(i32, Option<String>)>, Reason> {
    Ok(with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(events::id.eq(id))
        .select((events::kind, events::channel_id))
        .first(c)
        .optional())?)
}

/// `thread_metadata` rows of these events (soft-deleted ones included).
pub(crate) fn thread_rows(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<Vec<ThreadRow>, Reason> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(with_conn!(conn, |c| thread_metadata::table
        .filter(thread_metadata::community_id.eq(community_id))
        .filter(thread_metadata::event_id.eq_any(ids))
        .select(ThreadRow::as_select())
        .load(c))?)
}

/// One author's newest live reply under one thread root.
#[derive(Debug, Clone, Queryable)]
pub(crate) struct RootAuthor {
    pub(crate) root: Option<String>,
    pub(crate) author: String,
    pub(crate) newest: Option<i64>,
}

/// Authors of the live replies under each of `roots` (thread roots, depth 0), with the
/// time of their newest reply. One statement for a whole page, instead of one per
/// summarized row.
pub(crate) fn root_participants(
    conn: &mut Conn<'_>,
    community_id: i64,
    roots: &[String],
) -> Result<Vec<RootAuthor>, Reason> {
    if roots.is_empty() {
        return Ok(Vec::new());
    }
    Ok(with_conn!(conn, |c| thread_metadata::table
        .filter(thread_metadata::community_id.eq(community_id))
        .filter(thread_metadata::root_id.eq_any(roots))
        .filter(thread_metadata::deleted.eq(false))
        .group_by((thread_metadata::root_id, thread_metadata::pubkey))
        .select((
            thread_metadata::root_id,
            thread_metadata::pubkey,
            diesel::dsl::max(thread_metadata::created_at),
        ))
        .load(c))?)
}

/// Events of `kinds` carrying an `e` tag whose value (the tag's second element) is one
/// of `targets` — an id elsewhere in a tag or in the content does not count. Tombstones
/// included (the caller decides what to do with them), at most `take` rows (an event
/// naming two targets is read once per target), handed to `visit` one at a time as the
/// database yields them so a budget can stop the scan early.
///
/// Driven from the tag index and deliberately without `ORDER BY`: any ordering on
/// `events` invites the planner to walk a whole-community time index instead, which
/// costs the size of the community. Callers order what they serve.
pub(crate) fn targeting(
    conn: &mut Conn<'_>,
    community_id: i64,
    targets: &[String],
    kinds: &[i32],
    take: i64,
    now: i64,
    visit: &mut dyn FnMut(EventRow) -> Result<(), Reason>,
) -> Result<(), Reason> {
    with_conn!(conn, |c| {
        let rows = event_tags::table
            .inner_join(events::table.on(events::seq.eq(event_tags::event_seq)))
            .filter(event_tags::community_id.eq(community_id))
            .filter(event_tags::name.eq("e"))
            .filter(event_tags::value.eq_any(targets))
            .filter(events::community_id.eq(community_id))
            .filter(events::kind.eq_any(kinds))
            // NIP-40: expired reactions and edits are not served, nor followed.
            .filter(events::expires_at.is_null().or(events::expires_at.gt(now)))
            .limit(take)
            .select(EventRow::as_select())
            .load_iter::<EventRow, DefaultLoadingMode>(c)?;
        for row in rows {
            visit(row?)?;
        }
        Ok(())
    })
}
