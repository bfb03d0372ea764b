//! Writing events: insert with NIP-01 replaceable/addressable rules, NIP-09 deletion,
//! moderator removal, and the tag index. Reads of single events by id are
//! `lookups.rs`'; community rows are `communities.rs`'.

use super::conn::Conn;
use super::lookups::known_id;
use super::schema::{event_tags, events};
use crate::error::Reason;
use crate::stored::StoredEvent;
use crate::with_conn;
use buzz_nostr::event::Event;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};

/// Longest tag value the tag index holds; longer values are stored but not indexed.
pub(crate) const MAX_INDEXED_TAG_VALUE: usize = 1_024;
/// How often an insert is retried when another relay process wrote the same
/// replaceable slot at the same moment.
const REPLACE_RETRIES: usize = 3;

diesel::define_sql_function! {
    /// SQLite's rowid of the last row this connection inserted (`events.seq`).
    fn last_insert_rowid() -> diesel::sql_types::BigInt;
}

/// What happened to an event handed to [`insert_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// Stored under this storage sequence number.
    Stored { seq: i64 },
    /// The same id is already stored in this community.
    Duplicate,
    /// The same id was stored and later deleted; it is not accepted again.
    Deleted,
    /// A newer version of this replaceable/addressable event is stored.
    Superseded,
}

/// `treat_none_as_default_value = false`: every column is always bound (a `None` as
/// NULL), so the statement's SQL never changes and diesel reuses one prepared statement
/// instead of preparing it per event (on PostgreSQL it would write `DEFAULT`, which
/// diesel does not cache; `tests/prepared_once.rs`).
#[derive(Insertable)]
#[diesel(table_name = events, treat_none_as_default_value = false)]
struct NewEvent<'a> {
    community_id: i64,
    id: &'a str,
    pubkey: &'a str,
    created_at: i64,
    kind: i32,
    tags: String,
    content: &'a str,
    sig: &'a str,
    received_at: i64,
    channel_id: Option<&'a str>,
    d_tag: Option<String>,
    replace_key: Option<String>,
    /// NIP-40 expiration (unix seconds); reads skip the row from then on.
    expires_at: Option<i64>,
}

#[derive(Insertable)]
#[diesel(table_name = event_tags)]
struct NewTag<'a> {
    event_seq: i64,
    position: i32,
    community_id: i64,
    name: &'a str,
    value: &'a str,
    /// The event's: a tag read walks one value's rows newest first.
    created_at: i64,
}

/// Store `event` in `community_id` (inside the caller's transaction), scoped to
/// `channel_id` (the event's `h` tag, or the `d` tag of relay-signed group state).
pub fn insert_event(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    channel_id: Option<&str>,
    received_at: i64,
) -> Result<InsertOutcome, Reason> {
    if conn.backend() == super::Backend::Sqlite || event.replace_key().is_none() {
        // Only a replaceable slot can be raced: one writer per SQLite database, and
        // identity conflicts are settled by `ON CONFLICT DO NOTHING`. Here the retry
        // savepoint below (two more statements) would be pure cost.
        return insert_once(conn, community_id, event, channel_id, received_at)
            .map_err(Reason::from);
    }
    let mut attempt = 0;
    loop {
        // Each attempt in its own savepoint: a unique violation caused by another relay
        // process writing the same slot rolls back only this attempt, and we look again.
        match conn.savepoint(|c| insert_once(c, community_id, event, channel_id, received_at)) {
            Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _))
                if attempt < REPLACE_RETRIES =>
            {
                attempt += 1;
            }
            Err(DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)) => {
                return Ok(InsertOutcome::Duplicate)
            }
            other => return other.map_err(Reason::from),
        }
    }
}

fn insert_once(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    channel_id: Option<&str>,
    received_at: i64,
) -> Result<InsertOutcome, DieselError> {
    let replace_key = event.replace_key();
    if replace_key.is_some() {
        // Replaceable slots are settled before the insert, so look for the id first.
        if let Some(known) = known_id(conn, community_id, &event.id)? {
            return Ok(known);
        }
    }
    if let Some(key) = &replace_key {
        let current: Option<(i64, i64, String)> = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::replace_key.eq(key))
            .select((events::seq, events::created_at, events::id))
            .first(c)
            .optional())?;
        if let Some((seq, created_at, id)) = current {
            // NIP-01: keep the newest; on a tie keep the lowest id.
            let incoming_is_newer =
                event.created_at > created_at || (event.created_at == created_at && event.id < id);
            if !incoming_is_newer {
                return Ok(InsertOutcome::Superseded);
            }
            with_conn!(conn, |c| diesel::delete(
                event_tags::table.filter(event_tags::event_seq.eq(seq))
            )
            .execute(c))?;
            with_conn!(conn, |c| diesel::delete(
                events::table.filter(events::seq.eq(seq))
            )
            .execute(c))?;
        }
    }

    let tags_json = serde_json::to_string(&event.tags)
        .map_err(|e| DieselError::SerializationError(Box::new(e)))?;
    let row = NewEvent {
        community_id,
        id: &event.id,
        pubkey: &event.pubkey,
        created_at: event.created_at,
        kind: event.kind as i32,
        tags: tags_json,
        content: &event.content,
        sig: &event.sig,
        received_at,
        channel_id,
        d_tag: event.d_tag(),
        replace_key,
        // Ingest refused a malformed tag; a relay-made event has none.
        expires_at: event.expiration().ok().flatten(),
    };
    // The common case: insert unless the id is already stored.
    let seq: Option<i64> = match conn {
        // SQLite runs a statement with RETURNING like one with a trigger, which makes it
        // copy every page it touches into a statement journal first. A plain insert
        // followed by `last_insert_rowid()` (same connection, nothing in between) skips
        // that copy, the largest single cost of the writer.
        Conn::Sqlite(c) => {
            let inserted = diesel::insert_into(events::table)
                .values(&row)
                .on_conflict((events::community_id, events::id))
                .do_nothing()
                .execute(*c)?;
            match inserted {
                0 => None,
                _ => Some(diesel::select(last_insert_rowid()).get_result(*c)?),
            }
        }
        Conn::Pg(c) => diesel::insert_into(events::table)
            .values(&row)
            .on_conflict((events::community_id, events::id))
            .do_nothing()
            .returning(events::seq)
            .get_result(*c)
            .optional()?,
    };
    let Some(seq) = seq else {
        return Ok(known_id(conn, community_id, &event.id)?.unwrap_or(InsertOutcome::Duplicate));
    };

    match conn {
        // One row per statement: fixed SQL (one cached prepared statement), and unlike a
        // multi-row VALUES list no statement journal. Statements are cheap in-process.
        Conn::Sqlite(c) => {
            let tags =
                event
                    .tags
                    .iter()
                    .enumerate()
                    .filter_map(|(position, tag)| match tag.as_slice() {
                        [name, value, ..]
                            if !name.is_empty() && value.len() <= MAX_INDEXED_TAG_VALUE =>
                        {
                            Some(NewTag {
                                event_seq: seq,
                                position: position as i32,
                                community_id,
                                name,
                                value,
                                created_at: event.created_at,
                            })
                        }
                        _ => None,
                    });
            for row in tags {
                diesel::insert_into(event_tags::table)
                    .values(&row)
                    .execute(*c)?;
            }
        }
        // Over the network a statement is a round trip: one for all its tags, in a
        // statement prepared once per connection.
        Conn::Pg(c) => {
            super::group_insert::insert_tags(c, seq, community_id, event)?;
        }
    }
    Ok(InsertOutcome::Stored { seq })
}

/// Store a run of independent events at once, inside the caller's transaction (bulk
/// loads: benchmark seeding, imports); one outcome per event, in order. The rows are
/// exactly those ingest stores for them, because this is ingest's own insert: on
/// PostgreSQL the grouped insert of a group commit (`group_insert.rs`: two statements
/// however many events), on SQLite [`insert_event`] per event (statements are in-process
/// calls there). What ingest does *besides* the insert (thread metadata, arrival
/// columns) is the caller's. Only events [`buzz_nostr::kinds::independent`] accepts:
/// anything else settles a replaceable slot or changes other rows, and must go through
/// ingest.
pub fn insert_independent(
    conn: &mut Conn<'_>,
    events: &[StoredEvent],
) -> Result<Vec<InsertOutcome>, Reason> {
    if let Some(other) = events
        .iter()
        .find(|e| !buzz_nostr::kinds::independent(&e.event))
    {
        return Err(Reason::invalid(format!(
            "event {} (kind {}) is not independent: store it through ingest",
            other.event.id, other.event.kind
        )));
    }
    match conn {
        Conn::Pg(c) => {
            let group: Vec<&StoredEvent> = events.iter().collect();
            Ok(super::group_insert::insert_group(c, &group)?)
        }
        Conn::Sqlite(_) => events
            .iter()
            .map(|e| {
                insert_event(
                    conn,
                    e.community_id,
                    &e.event,
                    e.channel.as_deref(),
                    e.received_at,
                )
            })
            .collect(),
    }
}

/// Store a relay-authored replaceable/addressable event, removing whatever version is
/// stored under its key first: the relay knows its own newest state, even when two
/// versions share a second.
pub fn replace_relay_event(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    channel_id: Option<&str>,
    received_at: i64,
) -> Result<InsertOutcome, Reason> {
    if let Some(key) = event.replace_key() {
        let old: Vec<i64> = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::replace_key.eq(&key))
            .select(events::seq)
            .load(c))?;
        for seq in old {
            with_conn!(conn, |c| diesel::delete(
                event_tags::table.filter(event_tags::event_seq.eq(seq))
            )
            .execute(c))?;
            with_conn!(conn, |c| diesel::delete(
                events::table.filter(events::seq.eq(seq))
            )
            .execute(c))?;
        }
    }
    insert_event(conn, community_id, event, channel_id, received_at)
}

/// A row soft-deleted by [`apply_deletion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedRow {
    pub seq: i64,
    pub id: String,
    pub kind: i32,
    pub channel_id: Option<String>,
}

/// NIP-09: soft-delete the events a kind-5 `deletion` names by `e` and `a` tags, when
/// they belong to the deletion's author. Returns the rows that were deleted now.
pub fn apply_deletion(
    conn: &mut Conn<'_>,
    community_id: i64,
    deletion: &Event,
    now_secs: i64,
) -> Result<Vec<DeletedRow>, Reason> {
    let ids: Vec<&str> = deletion.tag_values("e").collect();
    let coords: Vec<&str> = deletion
        .tag_values("a")
        .filter(|a| a.split(':').nth(1) == Some(deletion.pubkey.as_str()))
        .collect();
    let mut deleted = Vec::new();
    for chunk in ids.chunks(500) {
        let rows: Vec<(i64, String, i32, Option<String>)> = with_conn!(conn, |c| {
            diesel::update(
                events::table
                    .filter(events::community_id.eq(community_id))
                    .filter(events::id.eq_any(chunk))
                    .filter(events::pubkey.eq(&deletion.pubkey))
                    .filter(events::kind.ne(5))
                    .filter(events::deleted_at.is_null()),
            )
            .set(events::deleted_at.eq(now_secs))
            .returning((events::seq, events::id, events::kind, events::channel_id))
            .get_results(c)
        })?;
        deleted.extend(rows);
    }
    for coord in coords {
        let rows: Vec<(i64, String, i32, Option<String>)> = with_conn!(conn, |c| {
            diesel::update(
                events::table
                    .filter(events::community_id.eq(community_id))
                    .filter(events::replace_key.eq(coord))
                    .filter(events::created_at.le(deletion.created_at))
                    .filter(events::deleted_at.is_null()),
            )
            .set(events::deleted_at.eq(now_secs))
            .returning((events::seq, events::id, events::kind, events::channel_id))
            .get_results(c)
        })?;
        deleted.extend(rows);
    }
    Ok(deleted
        .into_iter()
        .map(|(seq, id, kind, channel_id)| DeletedRow {
            seq,
            id,
            kind,
            channel_id,
        })
        .collect())
}

/// Mark one event deleted at `now` (a moderator's removal), whoever wrote it.
pub fn soft_delete_event(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
    now: i64,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::update(
        events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::id.eq(id))
            .filter(events::deleted_at.is_null())
    )
    .set(events::deleted_at.eq(now))
    .execute(c))?;
    Ok(())
}
