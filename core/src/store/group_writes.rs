//! Core's follow-up writes of an event, shared by a PostgreSQL insert group.
//!
//! A group of independent events (`writer/groups.rs`) is inserted with two statements,
//! but each channel message then had its own follow-ups: the channel check, its thread row and
//! the channel's timeline arrival — three round trips a message. Inside a group these
//! are done once for all: the channel is read once (no member of a group changes a
//! channel), top-level thread rows become one multi-row insert and the arrival columns
//! one update per group, written by [`GroupWrites::flush`] after the last member's
//! follow-up and before anything else in the batch. A bulk import, whose groups hold
//! hundreds of messages, gains the most; live ingest's groups are as large as the burst.
//!
//! Plugins do the same for rows of their own ([`GroupRows`], through `Tx::group_rows`):
//! the search plugin's documents are one insert per group.
//!
//! What makes deferring safe: nothing a group's follow-ups read is a deferred write of
//! an earlier member. A group ends before an event that names an earlier member in an
//! `e` tag (a reply reads its parent's thread row, a reaction its target), hooks are
//! handed the message's placement (`Tx::placed`) instead of reading its row back, no
//! follow-up reads an arrival column, and a plugin defers only rows its hooks for
//! grouped (independent) events never read. Outside a group (SQLite, and every job run
//! alone) the same calls write at once.

use super::channel_state::{self, ChannelRow};
use super::threads;
use crate::error::Reason;
use crate::store::Conn;
use buzz_nostr::event::Event;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Bool, Text};
use std::any::Any;
use std::collections::{BTreeMap, HashMap};

/// Rows a plugin's in-transaction hook writes for many events of a PostgreSQL insert
/// group with one statement (a multi-row insert whose SQL does not change with the
/// number of rows). Only rows no hook of a grouped event reads may wait: they are
/// written after the group's last member, before anything else in the batch.
pub trait GroupRows: Default + Send + 'static {
    /// Write the rows collected (never called with none: a value exists only once a
    /// hook asked for it).
    fn flush(self, conn: &mut PgConnection) -> Result<(), Reason>;
}

/// The follow-up writes of one job, or of a whole insert group.
pub struct GroupWrites {
    /// `None`: write at once.
    deferred: Option<Deferred>,
}

#[derive(Default)]
struct Deferred {
    /// Channel rows read by this group (none of its members changes one).
    channels: HashMap<(i64, String), Option<ChannelRow>>,
    top_level: TopLevelRows,
    /// Newest timeline arrival per channel: the column only moves forward, so the
    /// group's largest is what one update per message would have left.
    arrivals: BTreeMap<(i64, String), i64>,
    /// Plugins' rows, each type once, in the order first asked for.
    plugin_rows: Vec<PluginRows>,
}

/// One plugin type's collected rows and how to write them.
struct PluginRows {
    rows: Box<dyn Any + Send>,
    flush: fn(Box<dyn Any + Send>, &mut PgConnection) -> Result<(), Reason>,
}

fn flush_rows<R: GroupRows>(
    rows: Box<dyn Any + Send>,
    conn: &mut PgConnection,
) -> Result<(), Reason> {
    match rows.downcast::<R>() {
        Ok(rows) => rows.flush(conn),
        Err(_) => Err(Reason::Internal(anyhow::anyhow!(
            "group rows of the wrong type"
        ))),
    }
}

impl GroupWrites {
    /// Every write runs when it is asked for.
    pub(crate) fn immediate() -> Self {
        GroupWrites { deferred: None }
    }

    /// Writes wait for [`GroupWrites::flush`] (PostgreSQL insert groups).
    pub(crate) fn deferred() -> Self {
        GroupWrites {
            deferred: Some(Deferred::default()),
        }
    }

    /// The channel `id` if it exists and is not gone at `now` (seconds), else the
    /// `invalid:` answer every channel-scoped event gets for a missing channel.
    pub fn live_channel(
        &mut self,
        conn: &mut Conn<'_>,
        community_id: i64,
        id: &str,
        now: i64,
    ) -> Result<ChannelRow, Reason> {
        let row = match &mut self.deferred {
            None => channel_state::load_channel(conn, community_id, id)?,
            Some(deferred) => match deferred.channels.get(&(community_id, id.to_owned())) {
                Some(row) => row.clone(),
                None => {
                    let row = channel_state::load_channel(conn, community_id, id)?;
                    deferred
                        .channels
                        .insert((community_id, id.to_owned()), row.clone());
                    row
                }
            },
        };
        row.filter(|c| !c.is_gone(now))
            .ok_or_else(|| Reason::invalid("channel not found"))
    }

    /// The thread row of a top-level message (depth 0, no parent).
    pub fn top_level_row(
        &mut self,
        conn: &mut Conn<'_>,
        community_id: i64,
        event: &Event,
        channel_id: &str,
        broadcast: bool,
    ) -> Result<(), Reason> {
        match &mut self.deferred {
            None => threads::insert_top_level(conn, community_id, event, channel_id, broadcast),
            Some(deferred) => {
                deferred
                    .top_level
                    .push(community_id, event, channel_id, broadcast);
                Ok(())
            }
        }
    }

    /// A timeline message arrived in `channel_id` at `received_at` (micros).
    pub fn timeline_arrival(
        &mut self,
        conn: &mut Conn<'_>,
        community_id: i64,
        channel_id: &str,
        received_at: i64,
    ) -> Result<(), Reason> {
        match &mut self.deferred {
            None => {
                channel_state::note_timeline_arrival(conn, community_id, channel_id, received_at)
            }
            Some(deferred) => {
                let newest = deferred
                    .arrivals
                    .entry((community_id, channel_id.to_owned()))
                    .or_insert(received_at);
                *newest = (*newest).max(received_at);
                Ok(())
            }
        }
    }

    /// In a PostgreSQL insert group, the group's rows of type `R` to add to (written
    /// by [`GroupRows::flush`] after the group's last member); `None` when the event is
    /// written alone, and the caller writes its rows now.
    pub fn rows<R: GroupRows>(&mut self) -> Option<&mut R> {
        let deferred = self.deferred.as_mut()?;
        let at = match deferred.plugin_rows.iter().position(|p| p.rows.is::<R>()) {
            Some(at) => at,
            None => {
                deferred.plugin_rows.push(PluginRows {
                    rows: Box::new(R::default()),
                    flush: flush_rows::<R>,
                });
                deferred.plugin_rows.len() - 1
            }
        };
        deferred.plugin_rows[at].rows.downcast_mut::<R>()
    }

    /// Write what was deferred: one statement per kind of write, whatever the group's
    /// size (the SQL text never changes, so each is prepared once per connection).
    pub(crate) fn flush(self, conn: &mut PgConnection) -> Result<(), Reason> {
        let Some(deferred) = self.deferred else {
            return Ok(());
        };
        if !deferred.top_level.event_id.is_empty() {
            deferred.top_level.execute(conn)?;
        }
        if !deferred.arrivals.is_empty() {
            let mut arrivals = Arrivals::default();
            for ((community_id, channel_id), at) in deferred.arrivals {
                arrivals.community_id.push(community_id);
                arrivals.channel_id.push(channel_id);
                arrivals.at.push(at);
            }
            arrivals.execute(conn)?;
        }
        for plugin in deferred.plugin_rows {
            (plugin.flush)(plugin.rows, conn)?;
        }
        Ok(())
    }
}

/// Top-level thread rows, one array per column.
#[derive(Default)]
struct TopLevelRows {
    community_id: Vec<i64>,
    event_id: Vec<String>,
    channel_id: Vec<String>,
    pubkey: Vec<String>,
    created_at: Vec<i64>,
    broadcast: Vec<bool>,
}

impl TopLevelRows {
    fn push(&mut self, community_id: i64, event: &Event, channel_id: &str, broadcast: bool) {
        self.community_id.push(community_id);
        self.event_id.push(event.id.clone());
        self.channel_id.push(channel_id.to_owned());
        self.pubkey.push(event.pubkey.clone());
        self.created_at.push(event.created_at);
        self.broadcast.push(broadcast);
    }
}

/// The same row `threads::insert_top_level` writes, for many messages at once.
impl QueryFragment<Pg> for TopLevelRows {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO thread_metadata (community_id, event_id, channel_id, pubkey, \
             created_at, parent_id, root_id, depth, broadcast, path) \
             SELECT u.community_id, u.event_id, u.channel_id, u.pubkey, u.created_at, \
             NULL, NULL, 0, u.broadcast, '/' FROM UNNEST(",
        );
        out.push_bind_param::<Array<BigInt>, _>(&self.community_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.event_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.channel_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.pubkey)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.created_at)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Bool>, _>(&self.broadcast)?;
        out.push_sql(") AS u (community_id, event_id, channel_id, pubkey, created_at, broadcast)");
        Ok(())
    }
}

impl QueryId for TopLevelRows {
    type QueryId = TopLevelRows;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<C> RunQueryDsl<C> for TopLevelRows {}

/// The group's newest timeline arrival per channel; as `note_timeline_arrival`, a
/// column only ever raised.
#[derive(Default)]
struct Arrivals {
    community_id: Vec<i64>,
    channel_id: Vec<String>,
    at: Vec<i64>,
}

impl QueryFragment<Pg> for Arrivals {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("UPDATE channels AS c SET last_timeline_received_at = u.at FROM UNNEST(");
        out.push_bind_param::<Array<BigInt>, _>(&self.community_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.channel_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.at)?;
        out.push_sql(
            ") AS u (community_id, channel_id, at) \
             WHERE c.community_id = u.community_id AND c.id = u.channel_id \
             AND (c.last_timeline_received_at IS NULL OR c.last_timeline_received_at < u.at)",
        );
        Ok(())
    }
}

impl QueryId for Arrivals {
    type QueryId = Arrivals;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<C> RunQueryDsl<C> for Arrivals {}
