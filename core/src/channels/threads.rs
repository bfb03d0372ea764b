//! Thread metadata, computed at ingest in the event's transaction (NIP-CW
//! "Top-level Classification"): parent, root, depth, broadcast, the ancestor path, and
//! on every ancestor the reply and descendant counts and the newest reply time.
//!
//! Counts cover events that are not deleted: a deletion takes the event out of its
//! ancestors' counts and recomputes their `last_reply_at`.

use crate::error::Reason;
use crate::event::Event;
use crate::store::schema::{events, thread_metadata};
use crate::store::Conn;
use crate::with_conn;
use diesel::prelude::*;

/// Deepest reply accepted.
pub const MAX_DEPTH: i32 = 100;
/// Participants a summary lists.
pub const MAX_PARTICIPANTS: i64 = 10;

/// One `thread_metadata` row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = thread_metadata)]
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

fn is_hex64(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn marked<'a>(event: &'a Event, marker: &str) -> Option<&'a str> {
    event
        .tags
        .iter()
        .find(|t| t.len() >= 4 && t[0] == "e" && t[3] == marker && is_hex64(&t[1]))
        .map(|t| t[1].as_str())
}

/// The parent of a reply: its NIP-10 marked `reply` e-tag. `None` = not a reply.
pub fn reply_parent(event: &Event) -> Option<&str> {
    marked(event, "reply")
}

/// The exact tag `["broadcast", "1"]`.
pub fn is_broadcast(event: &Event) -> bool {
    event
        .tags
        .iter()
        .any(|t| t.len() == 2 && t[0] == "broadcast" && t[1] == "1")
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

/// Compute and store the metadata of a just-stored conversation event.
pub fn record(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    channel_id: &str,
) -> Result<(), Reason> {
    let broadcast = is_broadcast(event);
    let Some(parent_id) = reply_parent(event) else {
        return insert(
            conn,
            community_id,
            event,
            channel_id,
            None,
            None,
            0,
            broadcast,
            "/".into(),
        );
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
    let of = |ids: Vec<String>| {
        thread_metadata::table
            .filter(thread_metadata::community_id.eq(community_id))
            .filter(thread_metadata::event_id.eq_any(ids))
    };
    with_conn!(conn, |c| diesel::update(of(vec![parent_id.to_owned()]))
        .set(thread_metadata::reply_count.eq(thread_metadata::reply_count + 1))
        .execute(c))?;
    with_conn!(conn, |c| diesel::update(of(ancestors.clone()))
        .set(thread_metadata::descendant_count.eq(thread_metadata::descendant_count + 1))
        .execute(c))?;
    with_conn!(conn, |c| diesel::update(
        of(ancestors.clone()).filter(
            thread_metadata::last_reply_at
                .is_null()
                .or(thread_metadata::last_reply_at.lt(event.created_at))
        )
    )
    .set(thread_metadata::last_reply_at.eq(event.created_at))
    .execute(c))?;
    Ok(())
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

/// What a NIP-CW 39005 summary says about one event's thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSummary {
    pub event_id: String,
    pub reply_count: i64,
    pub descendant_count: i64,
    pub last_reply_at: Option<i64>,
    /// Up to ten distinct authors of the subtree, most recent first.
    pub participants: Vec<String>,
}

/// Summary of the subtree under `row`.
pub fn summary(conn: &mut Conn<'_>, row: &ThreadRow) -> Result<ThreadSummary, Reason> {
    let root = row.root_id.clone().unwrap_or_else(|| row.event_id.clone());
    let pattern = format!("%/{}/%", row.event_id);
    let participants: Vec<(String, Option<i64>)> = with_conn!(conn, |c| thread_metadata::table
        .filter(thread_metadata::community_id.eq(row.community_id))
        .filter(thread_metadata::root_id.eq(&root))
        .filter(thread_metadata::deleted.eq(false))
        .filter(thread_metadata::path.like(&pattern))
        .group_by(thread_metadata::pubkey)
        .select((
            thread_metadata::pubkey,
            diesel::dsl::max(thread_metadata::created_at)
        ))
        .order((
            diesel::dsl::max(thread_metadata::created_at).desc(),
            thread_metadata::pubkey.asc()
        ))
        .limit(MAX_PARTICIPANTS)
        .load(c))?;
    Ok(ThreadSummary {
        event_id: row.event_id.clone(),
        reply_count: row.reply_count,
        descendant_count: row.descendant_count,
        last_reply_at: row.last_reply_at,
        participants: participants.into_iter().map(|(p, _)| p).collect(),
    })
}
