//! `channels` rows: create, edit, delete, the live set, bulk seeding and the timeline
//! arrival mark, changed inside the event's storage transaction.

use super::members::set_member;
use crate::error::Reason;
use crate::store::prepared::{self, Val};
use crate::store::schema::channels;
use crate::store::Conn;
use crate::with_conn;
use buzz_nostr::channel_tags::requested_privacy;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// One `channels` row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = channels)]
pub struct ChannelRow {
    pub community_id: i64,
    pub id: String,
    pub name: String,
    pub about: String,
    pub private: bool,
    pub channel_type: String,
    pub archived: bool,
    pub ttl_seconds: Option<i64>,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub deleted_at: Option<i64>,
}

impl ChannelRow {
    /// Deleted, or past its TTL: behaves as if it did not exist.
    pub fn is_gone(&self, now: i64) -> bool {
        self.deleted_at.is_some() || self.expires_at.is_some_and(|t| t <= now)
    }
}

pub fn load_channel(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<ChannelRow>, Reason> {
    Ok(with_conn!(conn, |c| channels::table
        .filter(channels::community_id.eq(community_id))
        .filter(channels::id.eq(id))
        .select(ChannelRow::as_select())
        .first(c)
        .optional())?)
}

/// [`load_channel`], holding the channel row until the transaction ends (PostgreSQL
/// `FOR NO KEY UPDATE`: unlike `FOR UPDATE` it does not wait for the key-share locks
/// that inserting member rows takes through their foreign key, which would deadlock two
/// such transactions). Changes to one channel's derived state (the relay-signed 39000–39002)
/// made by several relay processes then run one after the other, each reading what the
/// previous one committed; without it, two processes adding members at the same moment
/// each publish a member list missing the other's member. SQLite has one writer.
pub fn lock_channel(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<ChannelRow>, Reason> {
    match conn {
        Conn::Pg(c) => Ok(channels::table
            .filter(channels::community_id.eq(community_id))
            .filter(channels::id.eq(id))
            .select(ChannelRow::as_select())
            .for_no_key_update()
            .first(*c)
            .optional()?),
        Conn::Sqlite(_) => load_channel(conn, community_id, id),
    }
}

/// Create the channel of a 9007 event; its author becomes owner.
pub fn create_channel(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
    event: &buzz_nostr::event::Event,
) -> Result<(), Reason> {
    let ttl = event.tag_value("ttl").and_then(|t| t.parse::<i64>().ok());
    // Checked before storage (`channels::validate`): a refusal cannot reach this point.
    let private = requested_privacy(event)?.unwrap_or(false);
    let row = (
        channels::community_id.eq(community_id),
        channels::id.eq(id),
        channels::name.eq(event.tag_value("name").unwrap_or_default()),
        channels::about.eq(event.tag_value("about").unwrap_or_default()),
        channels::private.eq(private),
        channels::channel_type.eq(event.tag_value("channel_type").unwrap_or("stream")),
        channels::archived.eq(false),
        channels::ttl_seconds.eq(ttl),
        channels::created_by.eq(&event.pubkey),
        channels::created_at.eq(event.created_at),
        channels::expires_at.eq(ttl.map(|t| event.created_at.saturating_add(t))),
    );
    let inserted = with_conn!(conn, |c| diesel::insert_into(channels::table)
        .values(row)
        .execute(c));
    match inserted {
        Ok(_) => {}
        Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
            return Err(Reason::Duplicate("channel already exists".into()))
        }
        Err(e) => return Err(e.into()),
    }
    set_member(
        conn,
        community_id,
        id,
        &event.pubkey,
        "owner",
        event.created_at,
    )
}

/// Apply a 9002 edit.
pub fn edit_channel(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
    event: &buzz_nostr::event::Event,
) -> Result<(), Reason> {
    let target = channels::table
        .filter(channels::community_id.eq(community_id))
        .filter(channels::id.eq(id));
    if let Some(name) = event.tag_value("name") {
        with_conn!(conn, |c| diesel::update(target)
            .set(channels::name.eq(name))
            .execute(c))?;
    }
    if let Some(about) = event.tag_value("about") {
        with_conn!(conn, |c| diesel::update(target)
            .set(channels::about.eq(about))
            .execute(c))?;
    }
    if let Some(archived) = event.tag_value("archived") {
        let archived = archived == "true";
        with_conn!(conn, |c| diesel::update(target)
            .set(channels::archived.eq(archived))
            .execute(c))?;
    }
    if let Some(private) = requested_privacy(event)? {
        with_conn!(conn, |c| diesel::update(target)
            .set(channels::private.eq(private))
            .execute(c))?;
    }
    Ok(())
}

pub fn delete_channel(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
    now: i64,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::update(
        channels::table
            .filter(channels::community_id.eq(community_id))
            .filter(channels::id.eq(id))
    )
    .set(channels::deleted_at.eq(now))
    .execute(c))?;
    Ok(())
}

/// Every channel of the community that is not deleted (TTL expiry is judged by the
/// caller at use time, since these rows are cached).
pub fn live_channels(conn: &mut Conn<'_>, community_id: i64) -> Result<Vec<ChannelRow>, Reason> {
    Ok(with_conn!(conn, |c| channels::table
        .filter(channels::community_id.eq(community_id))
        .filter(channels::deleted_at.is_null())
        .select(ChannelRow::as_select())
        .load(c))?)
}

/// [`live_channels`], at most `limit` of them (a caller bounding its work asks for one
/// more than it will take, to tell "exactly the bound" from "over it").
pub fn live_channels_at_most(
    conn: &mut Conn<'_>,
    community_id: i64,
    limit: usize,
) -> Result<Vec<ChannelRow>, Reason> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    Ok(with_conn!(conn, |c| channels::table
        .filter(channels::community_id.eq(community_id))
        .filter(channels::deleted_at.is_null())
        .order(channels::id.asc())
        .limit(limit)
        .select(ChannelRow::as_select())
        .load(c))?)
}

/// Rows per multi-row statement in [`insert_rows`] (12 columns each, within SQLite's
/// variable limit).
const ROWS_PER_INSERT: usize = 500;

/// Store channel rows as they are (bulk loads such as benchmark and test seeding); ingest
/// creates channels with [`create_channel`] instead. No membership or group state is
/// made.
pub fn insert_rows(conn: &mut Conn<'_>, rows: &[ChannelRow]) -> Result<(), Reason> {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        with_conn!(conn, |c| diesel::insert_into(channels::table)
            .values(chunk)
            .execute(c))?;
    }
    Ok(())
}

/// Raise `channels.last_timeline_received_at` to `received_at` (never lower it): a
/// timeline message arrived (`threads::record_arrival`).
pub fn note_timeline_arrival(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
    received_at: i64,
) -> Result<(), Reason> {
    // Prepared, not diesel's `update()`: this runs for every top-level message, and
    // diesel prepares an UPDATE anew on every call (`store::prepared`).
    prepared::execute(
        conn,
        "UPDATE channels SET last_timeline_received_at = ? \
         WHERE community_id = ? AND id = ? \
         AND (last_timeline_received_at IS NULL OR last_timeline_received_at < ?)",
        &[
            Val::I(received_at),
            Val::I(community_id),
            Val::T(channel_id),
            Val::I(received_at),
        ],
    )?;
    Ok(())
}
