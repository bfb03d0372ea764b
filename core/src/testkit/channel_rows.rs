//! Every row a channel's events left in storage, without storage-local numbers: the
//! proof that two ways of storing the same events (ingest over the wire, a bulk load)
//! stored the same thing.

use crate::error::Reason;
use crate::store::schema::{channels, event_tags, events, thread_metadata};
use crate::store::Store;
use diesel::prelude::*;

/// One `events` row minus `seq` (a storage-local number).
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct EventRows {
    pub community_id: i64,
    pub id: String,
    pub pubkey: String,
    pub created_at: i64,
    pub kind: i32,
    pub tags: String,
    pub content: String,
    pub sig: String,
    pub received_at: i64,
    pub channel_id: Option<String>,
    pub deleted_at: Option<i64>,
    pub d_tag: Option<String>,
    pub replace_key: Option<String>,
}

/// One `event_tags` row, its event named by id instead of `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct TagRow {
    pub event_id: String,
    pub position: i32,
    pub community_id: i64,
    pub name: String,
    pub value: String,
}

/// One `thread_metadata` row, every column.
#[derive(Debug, Clone, PartialEq, Eq, Queryable)]
pub struct ThreadRows {
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
    pub last_reply_received_at: Option<i64>,
}

/// The rows of the events `ids` (in `community_id`), ordered by id (tags by id and
/// position), and their channel's `last_timeline_received_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRows {
    pub events: Vec<EventRows>,
    pub tags: Vec<TagRow>,
    pub threads: Vec<ThreadRows>,
    pub last_timeline_received_at: Option<i64>,
}

/// Read the stored rows of `ids` in `channel`.
pub async fn channel_rows(
    store: &Store,
    community_id: i64,
    channel: &str,
    ids: Vec<String>,
) -> Result<ChannelRows, Reason> {
    let channel = channel.to_owned();
    store
        .read(move |mut conn| {
            let events = crate::with_conn!(&mut conn, |c| events::table
                .filter(events::community_id.eq(community_id))
                .filter(events::id.eq_any(&ids))
                .order(events::id)
                .select((
                    events::community_id,
                    events::id,
                    events::pubkey,
                    events::created_at,
                    events::kind,
                    events::tags,
                    events::content,
                    events::sig,
                    events::received_at,
                    events::channel_id,
                    events::deleted_at,
                    events::d_tag,
                    events::replace_key,
                ))
                .load(c))?;
            let tags = crate::with_conn!(&mut conn, |c| event_tags::table
                .inner_join(events::table.on(events::seq.eq(event_tags::event_seq)))
                .filter(events::community_id.eq(community_id))
                .filter(events::id.eq_any(&ids))
                .order((events::id, event_tags::position))
                .select((
                    events::id,
                    event_tags::position,
                    event_tags::community_id,
                    event_tags::name,
                    event_tags::value,
                ))
                .load(c))?;
            let threads = crate::with_conn!(&mut conn, |c| thread_metadata::table
                .filter(thread_metadata::community_id.eq(community_id))
                .filter(thread_metadata::event_id.eq_any(&ids))
                .order(thread_metadata::event_id)
                .select((
                    thread_metadata::community_id,
                    thread_metadata::event_id,
                    thread_metadata::channel_id,
                    thread_metadata::pubkey,
                    thread_metadata::created_at,
                    thread_metadata::parent_id,
                    thread_metadata::root_id,
                    thread_metadata::depth,
                    thread_metadata::broadcast,
                    thread_metadata::path,
                    thread_metadata::deleted,
                    thread_metadata::reply_count,
                    thread_metadata::descendant_count,
                    thread_metadata::last_reply_at,
                    thread_metadata::last_reply_received_at,
                ))
                .load(c))?;
            let last_timeline_received_at: Option<i64> = crate::with_conn!(&mut conn, |c| {
                channels::table
                    .filter(channels::community_id.eq(community_id))
                    .filter(channels::id.eq(&channel))
                    .select(channels::last_timeline_received_at)
                    .first(c)
            })?;
            Ok(ChannelRows {
                events,
                tags,
                threads,
                last_timeline_received_at,
            })
        })
        .await
}
