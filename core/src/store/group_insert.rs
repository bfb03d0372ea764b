//! PostgreSQL: many independent events inserted with two statements, whatever their
//! number — one for the event rows, one for their tag index rows (the latter also
//! serves the one-event path).
//!
//! Over the network every statement is a round trip and a trip through the server's
//! executor, so a group commit that inserted row by row paid that cost per event (and
//! per tag list). Here the rows travel as one array per column (`UNNEST`), so the SQL
//! text never changes with the group's size: diesel prepares each statement once per
//! connection and later groups only bind and execute.
//!
//! Only events whose insert depends on no other row go through here (no replaceable
//! slot to settle; see `writer/groups.rs` for how a group is formed). Identity conflicts
//! are settled by `ON CONFLICT DO NOTHING`, exactly as in the one-event path: a row not
//! inserted is looked up and answered `Duplicate` or `Deleted`.

use super::events::{InsertOutcome, MAX_INDEXED_TAG_VALUE};
use super::lookups::known_id;
use crate::stored::StoredEvent;
use buzz_nostr::event::Event;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::Error as DieselError;
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text};
use std::collections::HashMap;

/// Insert `group` (in the caller's transaction) and answer one outcome per event, in
/// order. Storage sequence numbers follow the group's order, so events of one
/// connection keep their order.
pub(crate) fn insert_group(
    conn: &mut PgConnection,
    group: &[&StoredEvent],
) -> Result<Vec<InsertOutcome>, DieselError> {
    let rows = EventColumns::of(group)?;
    let inserted: Vec<(i64, i64, String)> = rows.load(conn)?;
    let mut stored: HashMap<(i64, &str), i64> = inserted
        .iter()
        .map(|(seq, community_id, id)| ((*community_id, id.as_str()), *seq))
        .collect();

    let mut outcomes = Vec::with_capacity(group.len());
    let mut tags = TagColumns::default();
    for stored_event in group {
        let event = &stored_event.event;
        // `remove`: when one id comes twice in a group, the first is stored and the
        // second finds it, as it would one event later.
        match stored.remove(&(stored_event.community_id, event.id.as_str())) {
            Some(seq) => {
                tags.add(seq, stored_event);
                outcomes.push(InsertOutcome::Stored { seq });
            }
            None => {
                let mut conn = super::Conn::Pg(conn);
                let known = known_id(&mut conn, stored_event.community_id, &event.id)?;
                outcomes.push(known.unwrap_or(InsertOutcome::Duplicate));
            }
        }
    }
    if !tags.event_seq.is_empty() {
        tags.execute(conn)?;
    }
    Ok(outcomes)
}

/// The event rows of a group, one array per column.
struct EventColumns<'a> {
    community_id: Vec<i64>,
    id: Vec<&'a str>,
    pubkey: Vec<&'a str>,
    created_at: Vec<i64>,
    kind: Vec<i32>,
    tags: Vec<String>,
    content: Vec<&'a str>,
    sig: Vec<&'a str>,
    received_at: Vec<i64>,
    channel_id: Vec<Option<&'a str>>,
    d_tag: Vec<Option<String>>,
    expires_at: Vec<Option<i64>>,
}

impl<'a> EventColumns<'a> {
    fn of(group: &[&'a StoredEvent]) -> Result<Self, DieselError> {
        let n = group.len();
        let mut rows = EventColumns {
            community_id: Vec::with_capacity(n),
            id: Vec::with_capacity(n),
            pubkey: Vec::with_capacity(n),
            created_at: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            tags: Vec::with_capacity(n),
            content: Vec::with_capacity(n),
            sig: Vec::with_capacity(n),
            received_at: Vec::with_capacity(n),
            channel_id: Vec::with_capacity(n),
            d_tag: Vec::with_capacity(n),
            expires_at: Vec::with_capacity(n),
        };
        for stored in group {
            let event = &stored.event;
            rows.community_id.push(stored.community_id);
            rows.id.push(&event.id);
            rows.pubkey.push(&event.pubkey);
            rows.created_at.push(event.created_at);
            rows.kind.push(event.kind as i32);
            rows.tags.push(
                serde_json::to_string(&event.tags)
                    .map_err(|e| DieselError::SerializationError(Box::new(e)))?,
            );
            rows.content.push(&event.content);
            rows.sig.push(&event.sig);
            rows.received_at.push(stored.received_at);
            rows.channel_id.push(stored.channel.as_deref());
            rows.d_tag.push(event.d_tag());
            rows.expires_at.push(event.expiration().ok().flatten());
        }
        Ok(rows)
    }
}

/// `WITH ORDINALITY … ORDER BY n`: sequence numbers are drawn in the group's order.
/// `replace_key` stays NULL: grouped events have no replaceable slot.
impl QueryFragment<Pg> for EventColumns<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        // The SQL is fixed and the binds are whole columns, so the prepared statement is
        // cached (the query id is static) and reused by every later group.
        out.push_sql(
            "INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, \
             sig, received_at, channel_id, d_tag, expires_at) \
             SELECT community_id, id, pubkey, created_at, kind, tags, content, sig, \
             received_at, channel_id, d_tag, expires_at FROM UNNEST(",
        );
        out.push_bind_param::<Array<BigInt>, _>(&self.community_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.pubkey)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Integer>, _>(&self.kind)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.tags)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.content)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.sig)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.received_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Text>>, _>(&self.channel_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<Text>>, _>(&self.d_tag)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Nullable<BigInt>>, _>(&self.expires_at)?;
        out.push_sql(
            ") WITH ORDINALITY AS u (community_id, id, pubkey, created_at, kind, tags, \
             content, sig, received_at, channel_id, d_tag, expires_at, n) ORDER BY n \
             ON CONFLICT (community_id, id) DO NOTHING RETURNING seq, community_id, id",
        );
        Ok(())
    }
}

impl QueryId for EventColumns<'_> {
    type QueryId = EventColumns<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl Query for EventColumns<'_> {
    type SqlType = (BigInt, BigInt, Text);
}

impl<C> RunQueryDsl<C> for EventColumns<'_> {}

/// The tag index rows of a group's stored events, one array per column.
#[derive(Default)]
struct TagColumns<'a> {
    event_seq: Vec<i64>,
    position: Vec<i32>,
    community_id: Vec<i64>,
    name: Vec<&'a str>,
    value: Vec<&'a str>,
    created_at: Vec<i64>,
}

impl<'a> TagColumns<'a> {
    /// The same rows the one-event path indexes: every tag with a name and a first value
    /// no longer than [`MAX_INDEXED_TAG_VALUE`].
    fn add(&mut self, seq: i64, stored: &'a StoredEvent) {
        self.add_event(seq, stored.community_id, &stored.event);
    }

    fn add_event(&mut self, seq: i64, community_id: i64, event: &'a Event) {
        for (position, tag) in event.tags.iter().enumerate() {
            if let [name, value, ..] = tag.as_slice() {
                if !name.is_empty() && value.len() <= MAX_INDEXED_TAG_VALUE {
                    self.event_seq.push(seq);
                    self.position.push(position as i32);
                    self.community_id.push(community_id);
                    self.name.push(name);
                    self.value.push(value);
                    self.created_at.push(event.created_at);
                }
            }
        }
    }
}

/// The tag index rows of one just-stored event, in one statement whose text does not
/// change with the number of tags (so it is prepared once per connection: one round
/// trip per event, where a multi-row `VALUES` list of diesel's is prepared anew every
/// time).
pub(crate) fn insert_tags(
    conn: &mut PgConnection,
    seq: i64,
    community_id: i64,
    event: &Event,
) -> Result<(), DieselError> {
    let mut tags = TagColumns::default();
    tags.add_event(seq, community_id, event);
    if !tags.event_seq.is_empty() {
        tags.execute(conn)?;
    }
    Ok(())
}

impl QueryFragment<Pg> for TagColumns<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO event_tags (event_seq, position, community_id, name, value, created_at) \
             SELECT * FROM UNNEST(",
        );
        out.push_bind_param::<Array<BigInt>, _>(&self.event_seq)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Integer>, _>(&self.position)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.community_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.name)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.value)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.created_at)?;
        out.push_sql(")");
        Ok(())
    }
}

impl QueryId for TagColumns<'_> {
    type QueryId = TagColumns<'static>;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<C> RunQueryDsl<C> for TagColumns<'_> {}
