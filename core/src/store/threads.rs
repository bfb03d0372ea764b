//! Conversation thread metadata rows (NIP-10 threads; the OS threads that run reads are
//! `read_workers.rs`'s), computed at ingest in the event's transaction (NIP-CW
//! "Top-level Classification"): parent, root, depth, broadcast, the ancestor path, and
//! on every ancestor the reply and descendant counts and the newest reply time. What a
//! reply *is* (NIP-10 markers, broadcast) is decided in `channels/threads.rs`.
//!
//! Counts cover events that are not deleted: a deletion takes the event out of its
//! ancestors' counts and recomputes their `last_reply_at`.

use crate::error::Reason;
use crate::store::prepared::{self, Val};
use crate::store::schema::{events, thread_metadata};
use crate::store::{Conn, GroupWrites};
use crate::with_conn;
use buzz_nostr::event::Event;
use buzz_nostr::threads::{is_broadcast, marked, reply_parent, MAX_DEPTH};
use diesel::prelude::*;

/// One `thread_metadata` row. `treat_none_as_default_value = false`: every column is
/// always bound (a `None` as NULL), so the insert's SQL never changes and PostgreSQL's
/// connection prepares it once (diesel does not cache an insert that writes `DEFAULT`).
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = thread_metadata, treat_none_as_default_value = false)]
pub struct ThreadRow {
    pub community_id: i64,
    pub event_id: String,
    pub channel_id: String,
    pub pubkey: String,
    pub created_at: i64,
    pub parent_id: Option<String>,
    pub root_id: Option<String>,
    pub depth: i32,
    pub broadcast: bool,
    pub path: String,
    pub deleted: bool,
    pub reply_count: i64,
    pub descendant_count: i64,
    pub last_reply_at: Option<i64>,
}

impl ThreadRow {
    /// Ancestor ids, root first (empty for depth 0).
    pub fn ancestors(&self) -> Vec<&str> {
        self.path.split('/').filter(|s| !s.is_empty()).collect()
    }

    /// NIP-CW: depth 0, or a broadcast depth-1 reply.
    pub fn is_top_level(&self) -> bool {
        self.depth == 0 || (self.depth == 1 && self.broadcast)
    }
}

pub fn load(
    conn: &mut Conn<'_>,
    community_id: i64,
    event_id: &str,
) -> Result<Option<ThreadRow>, Reason> {
    Ok(with_conn!(conn, |c| thread_metadata::table
        .filter(thread_metadata::community_id.eq(community_id))
        .filter(thread_metadata::event_id.eq(event_id))
        .select(ThreadRow::as_select())
        .first(c)
        .optional())?)
}

/// Rows per multi-row statement in [`insert_rows`] (14 columns each, within SQLite's
/// variable limit).
const ROWS_PER_INSERT: usize = 500;

/// Store precomputed rows as they are (bulk loads such as benchmark seeding, where the
/// caller already knows every count); ingest uses [`record`] instead.
pub fn insert_rows(conn: &mut Conn<'_>, rows: &[ThreadRow]) -> Result<(), Reason> {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        with_conn!(conn, |c| diesel::insert_into(thread_metadata::table)
            .values(chunk)
            .execute(c))?;
    }
    Ok(())
}

/// A precomputed row for a bulk load together with the arrival column ingest keeps on it
/// ([`record_arrival`]: on a thread root, the newest reply's `received_at`; `None`
/// elsewhere), so a loaded thread reads like an ingested one to read positions too.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = thread_metadata)]
pub struct LoadedRow {
    #[diesel(embed)]
    pub row: ThreadRow,
    pub last_reply_received_at: Option<i64>,
}

/// Store precomputed rows with their arrival column (bulk loads that must match ingest
/// row for row, such as benchmark seeding).
pub fn insert_loaded(conn: &mut Conn<'_>, rows: &[LoadedRow]) -> Result<(), Reason> {
    // 15 columns a row: still within SQLite's variable limit at this size.
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        with_conn!(conn, |c| diesel::insert_into(thread_metadata::table)
            .values(chunk)
            .execute(c))?;
    }
    Ok(())
}

/// Where [`record`] placed an event, for [`record_arrival`] (which would otherwise
/// read back the row just written: one statement per message on the writer's path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub root_id: Option<String>,
    pub depth: i32,
    pub broadcast: bool,
}

impl Placed {
    /// NIP-CW: depth 0, or a broadcast depth-1 reply (as [`ThreadRow::is_top_level`]).
    pub fn is_top_level(&self) -> bool {
        self.depth == 0 || (self.depth == 1 && self.broadcast)
    }
}

/// Compute and store the metadata of a just-stored conversation event (a top-level
/// message's row through `writes`, which may write it with the rest of its group).
pub fn record(
    conn: &mut Conn<'_>,
    writes: &mut GroupWrites,
    community_id: i64,
    event: &Event,
    channel_id: &str,
) -> Result<Placed, Reason> {
    let broadcast = is_broadcast(event);
    let Some(parent_id) = reply_parent(event) else {
        writes.top_level_row(conn, community_id, event, channel_id, broadcast)?;
        return Ok(Placed {
            root_id: None,
            depth: 0,
            broadcast,
        });
    };
    let parent: Option<(Option<String>, Option<i64>, String, i64)> =
        with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::id.eq(parent_id))
            .select((
                events::channel_id,
                events::deleted_at,
                events::pubkey,
                events::created_at
            ))
            .first(c)
            .optional())?;
    let Some((parent_channel, parent_deleted, parent_pubkey, parent_created_at)) = parent else {
        return Err(Reason::invalid("reply parent not found"));
    };
    if parent_deleted.is_some() {
        return Err(Reason::invalid("reply parent not found"));
    }
    if parent_channel.as_deref() != Some(channel_id) {
        return Err(Reason::invalid(
            "parent event belongs to a different channel",
        ));
    }
    let parent_meta = match load(conn, community_id, parent_id)? {
        Some(meta) => meta,
        None => {
            // A parent stored before metadata existed is top-level (NIP-CW fail-open);
            // give it a row now so it can carry its thread's counts.
            let legacy = Event {
                id: parent_id.to_owned(),
                pubkey: parent_pubkey,
                created_at: parent_created_at,
                ..event.clone()
            };
            insert(
                conn,
                community_id,
                &legacy,
                channel_id,
                None,
                None,
                0,
                false,
                "/".into(),
            )?;
            load(conn, community_id, parent_id)?
                .ok_or_else(|| Reason::Internal(anyhow::anyhow!("legacy parent row vanished")))?
        }
    };
    let depth = parent_meta.depth + 1;
    if depth > MAX_DEPTH {
        return Err(Reason::invalid("thread depth limit exceeded"));
    }
    let root = parent_meta
        .root_id
        .clone()
        .unwrap_or_else(|| parent_id.to_owned());
    if let Some(claimed) = marked(event, "root") {
        if claimed != root {
            return Err(Reason::invalid(
                "root marker does not match the parent's thread",
            ));
        }
    }
    let path = format!("{}{}/", parent_meta.path, parent_id);
    insert(
        conn,
        community_id,
        event,
        channel_id,
        Some(parent_id),
        Some(&root),
        depth,
        broadcast,
        path.clone(),
    )?;

    let ancestors: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    count_reply(conn, community_id, parent_id, &ancestors, event.created_at)?;
    Ok(Placed {
        root_id: Some(root),
        depth,
        broadcast,
    })
}

/// A new reply under `parent_id` (whose ancestor path, root first and the parent last,
/// is `ancestors`), made at `created_at`: one more reply on the parent, one more
/// descendant and a newer last reply on every ancestor. Prepared statements, not
/// diesel's `update()`: these run for every reply, and diesel prepares an UPDATE anew on
/// every call (`store::prepared`); the ancestor list is at most [`MAX_DEPTH`] long, so
/// a connection keeps one statement per depth.
fn count_reply(
    conn: &mut Conn<'_>,
    community_id: i64,
    parent_id: &str,
    ancestors: &[String],
    created_at: i64,
) -> Result<(), Reason> {
    prepared::execute(
        conn,
        "UPDATE thread_metadata SET reply_count = reply_count + 1 \
         WHERE community_id = ? AND event_id = ?",
        &[Val::I(community_id), Val::T(parent_id)],
    )?;
    let list = vec!["?"; ancestors.len()].join(", ");
    let mut binds = vec![Val::I(community_id)];
    binds.extend(ancestors.iter().map(|id| Val::T(id)));
    prepared::execute(
        conn,
        &format!(
            "UPDATE thread_metadata SET descendant_count = descendant_count + 1 \
             WHERE community_id = ? AND event_id IN ({list})"
        ),
        &binds,
    )?;
    let mut binds = vec![Val::I(created_at), Val::I(community_id)];
    binds.extend(ancestors.iter().map(|id| Val::T(id)));
    binds.push(Val::I(created_at));
    prepared::execute(
        conn,
        &format!(
            "UPDATE thread_metadata SET last_reply_at = ? \
             WHERE community_id = ? AND event_id IN ({list}) \
             AND (last_reply_at IS NULL OR last_reply_at < ?)"
        ),
        &binds,
    )?;
    Ok(())
}

/// The row of a top-level message (depth 0, no parent), written now
/// ([`GroupWrites::top_level_row`] writes a group's at once).
pub(crate) fn insert_top_level(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    channel_id: &str,
    broadcast: bool,
) -> Result<(), Reason> {
    insert(
        conn,
        community_id,
        event,
        channel_id,
        None,
        None,
        0,
        broadcast,
        "/".into(),
    )
}

#[allow(clippy::too_many_arguments)]
fn insert(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    channel_id: &str,
    parent_id: Option<&str>,
    root_id: Option<&str>,
    depth: i32,
    broadcast: bool,
    path: String,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::insert_into(thread_metadata::table)
        .values((
            thread_metadata::community_id.eq(community_id),
            thread_metadata::event_id.eq(&event.id),
            thread_metadata::channel_id.eq(channel_id),
            thread_metadata::pubkey.eq(&event.pubkey),
            thread_metadata::created_at.eq(event.created_at),
            thread_metadata::parent_id.eq(parent_id),
            thread_metadata::root_id.eq(root_id),
            thread_metadata::depth.eq(depth),
            thread_metadata::broadcast.eq(broadcast),
            thread_metadata::path.eq(path),
        ))
        .execute(c))?;
    Ok(())
}

/// Take a deleted event out of its thread: flag it, decrement its ancestors' counts and
/// recompute their newest reply time from what remains.
pub fn on_deleted(conn: &mut Conn<'_>, community_id: i64, event_id: &str) -> Result<(), Reason> {
    let Some(row) = load(conn, community_id, event_id)? else {
        return Ok(());
    };
    if row.deleted {
        return Ok(());
    }
    let this = thread_metadata::table
        .filter(thread_metadata::community_id.eq(community_id))
        .filter(thread_metadata::event_id.eq(event_id));
    with_conn!(conn, |c| diesel::update(this)
        .set(thread_metadata::deleted.eq(true))
        .execute(c))?;
    let (Some(parent), Some(root)) = (row.parent_id.clone(), row.root_id.clone()) else {
        return Ok(());
    };
    let ancestors: Vec<String> = row.ancestors().into_iter().map(str::to_owned).collect();
    let of = |ids: Vec<String>| {
        thread_metadata::table
            .filter(thread_metadata::community_id.eq(community_id))
            .filter(thread_metadata::event_id.eq_any(ids))
    };
    with_conn!(conn, |c| diesel::update(of(vec![parent]))
        .set(thread_metadata::reply_count.eq(thread_metadata::reply_count - 1))
        .execute(c))?;
    with_conn!(conn, |c| diesel::update(of(ancestors.clone()))
        .set(thread_metadata::descendant_count.eq(thread_metadata::descendant_count - 1))
        .execute(c))?;
    for ancestor in ancestors {
        let newest: Option<i64> = with_conn!(conn, |c| thread_metadata::table
            .filter(thread_metadata::community_id.eq(community_id))
            .filter(thread_metadata::root_id.eq(&root))
            .filter(thread_metadata::deleted.eq(false))
            .filter(thread_metadata::path.like(format!("%/{ancestor}/%")))
            .select(diesel::dsl::max(thread_metadata::created_at))
            .first(c))?;
        with_conn!(conn, |c| diesel::update(of(vec![ancestor.clone()]))
            .set(thread_metadata::last_reply_at.eq(newest))
            .execute(c))?;
    }
    Ok(())
}

/// Keep the arrival columns (what read positions are compared against) in step with a
/// just-recorded conversation message (after [`record`], same transaction): a message in the channel
/// timeline (top-level, or a broadcast reply) raises
/// `channels.last_timeline_received_at`; a reply raises its root's
/// `thread_metadata.last_reply_received_at`. Both only move forward, so processes whose
/// clocks differ never move them back. Deletions leave them alone: readers probe past a
/// position anyway, which also rules out a deleted newest message.
pub fn record_arrival(
    conn: &mut Conn<'_>,
    writes: &mut GroupWrites,
    community_id: i64,
    placed: &Placed,
    channel_id: &str,
    received_at: i64,
) -> Result<(), Reason> {
    if placed.is_top_level() {
        writes.timeline_arrival(conn, community_id, channel_id, received_at)?;
    }
    if let Some(root) = &placed.root_id {
        // Prepared, not diesel's `update()`: this runs for every reply, and diesel
        // prepares an UPDATE anew on every call (`store::prepared`).
        prepared::execute(
            conn,
            "UPDATE thread_metadata SET last_reply_received_at = ? \
             WHERE community_id = ? AND event_id = ? \
             AND (last_reply_received_at IS NULL OR last_reply_received_at < ?)",
            &[
                Val::I(received_at),
                Val::I(community_id),
                Val::T(root),
                Val::I(received_at),
            ],
        )?;
    }
    Ok(())
}
