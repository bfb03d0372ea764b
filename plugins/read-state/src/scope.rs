//! Reads over one read scope: the channel timeline (top-level messages and broadcast
//! replies), one thread (every reply under a root), or the whole channel (the cut of
//! `mark_channel_read`). Messages are `thread_metadata` rows (conversation kinds, the
//! advertised eligible kinds) joined to their `events` row for arrival and deletion.
//!
//! Every walk is bounded by author time around a position, never by history: ingest
//! accepts `created_at` only within `limits.max_clock_skew_secs` of the arrival clock,
//! so a message that arrived after position `p` has `created_at >= p - skew`, and one
//! that arrived at or before `p` has `created_at <= p + skew`. The channel walks use
//! `events_by_channel`, the thread walks `thread_metadata_by_root`; both are ordered by
//! author time.

use crate::sql::{first, Id, OptI64, Val};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
use diesel::QueryableByName;

/// One read scope in a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope<'a> {
    Timeline {
        channel: &'a str,
    },
    Thread {
        channel: &'a str,
        root: &'a str,
    },
    /// Every message of the channel, any thread (the whole-channel cut).
    Channel {
        channel: &'a str,
    },
}

const MICROS: i64 = 1_000_000;

/// Author-time bounds derived from arrival times (see the module doc).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Skew {
    /// `limits.max_clock_skew_secs` plus a margin for rounding to whole seconds.
    pub secs: i64,
}

impl Skew {
    pub(crate) fn new(max_clock_skew_secs: i64) -> Skew {
        Skew {
            secs: max_clock_skew_secs.max(0) + 2,
        }
    }

    /// Lowest author time a message arriving after `position` can have.
    fn after(&self, position: i64) -> i64 {
        position.div_euclid(MICROS) - self.secs
    }

    /// Highest author time a message arriving at or before `position` can have.
    fn at_or_before(&self, position: i64) -> i64 {
        position.div_euclid(MICROS) + self.secs
    }
}

/// `FROM … WHERE …` of a scope, its binds and its author-time column.
fn source<'a>(community_id: i64, scope: Scope<'a>) -> (&'static str, Vec<Val<'a>>, &'static str) {
    const BY_CHANNEL: &str = "FROM events e JOIN thread_metadata t \
        ON t.community_id = e.community_id AND t.event_id = e.id \
        WHERE e.community_id = ? AND e.channel_id = ?";
    match scope {
        Scope::Timeline { channel } => (
            "FROM events e JOIN thread_metadata t \
             ON t.community_id = e.community_id AND t.event_id = e.id \
             WHERE e.community_id = ? AND e.channel_id = ? \
             AND (t.depth = 0 OR (t.depth = 1 AND t.broadcast = TRUE))",
            vec![Val::I(community_id), Val::T(channel)],
            "e.created_at",
        ),
        Scope::Channel { channel } => (
            BY_CHANNEL,
            vec![Val::I(community_id), Val::T(channel)],
            "e.created_at",
        ),
        Scope::Thread { channel, root } => (
            "FROM thread_metadata t JOIN events e \
             ON e.community_id = t.community_id AND e.id = t.event_id \
             WHERE t.community_id = ? AND t.root_id = ? AND t.channel_id = ?",
            vec![Val::I(community_id), Val::T(root), Val::T(channel)],
            "t.created_at",
        ),
    }
}

/// Is a counted (nondeleted, eligible) message in `scope` past `position`? Stops at the
/// first one.
pub(crate) fn unread(
    conn: &mut Conn<'_>,
    community_id: i64,
    scope: Scope<'_>,
    position: i64,
    skew: Skew,
) -> Result<bool, Reason> {
    let (from, mut binds, time) = source(community_id, scope);
    let text = format!(
        "SELECT e.received_at AS v {from} AND {time} >= ? AND e.received_at > ? \
         AND e.deleted_at IS NULL LIMIT 1"
    );
    binds.push(Val::I(skew.after(position)));
    binds.push(Val::I(position));
    Ok(first::<OptI64>(conn, &text, &binds)?.is_some())
}

/// The last counted message of `scope` in display order (author time, then id) that
/// arrived at or before `position`: the "new" divider.
pub(crate) fn read_through(
    conn: &mut Conn<'_>,
    community_id: i64,
    scope: Scope<'_>,
    position: i64,
    skew: Skew,
) -> Result<Option<String>, Reason> {
    let (from, mut binds, time) = source(community_id, scope);
    let text = format!(
        "SELECT e.id AS id {from} AND {time} <= ? \
         AND e.received_at <= ? AND e.deleted_at IS NULL \
         ORDER BY {time} DESC, e.id DESC LIMIT 1"
    );
    binds.push(Val::I(skew.at_or_before(position)));
    binds.push(Val::I(position));
    Ok(first::<Id>(conn, &text, &binds)?.map(|r| r.id))
}

/// Exact count of unread messages in the scope `(channel, root)` that mention `pubkey`:
/// a walk of the signer's own mentions past `position`, nothing else.
pub(crate) fn mentions(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    channel: &str,
    root: &str,
    position: i64,
) -> Result<i64, Reason> {
    let text = "SELECT COUNT(*) AS v FROM read_state_mentions m JOIN events e \
        ON e.community_id = m.community_id AND e.id = m.event_id \
        WHERE m.community_id = ? AND m.pubkey = ? AND m.channel_id = ? AND m.root_id = ? \
        AND m.received_at > ? AND e.deleted_at IS NULL";
    let binds = [
        Val::I(community_id),
        Val::T(pubkey),
        Val::T(channel),
        Val::T(root),
        Val::I(position),
    ];
    Ok(first::<OptI64>(conn, text, &binds)?
        .and_then(|r| r.v)
        .unwrap_or(0))
}

/// A stored conversation message, as an anchor or a target.
#[derive(Debug, Clone, QueryableByName)]
pub(crate) struct Message {
    #[diesel(sql_type = Text)]
    pub id: String,
    #[diesel(sql_type = Text)]
    pub pubkey: String,
    #[diesel(sql_type = BigInt)]
    pub received_at: i64,
    #[diesel(sql_type = BigInt)]
    pub created_at: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub deleted_at: Option<i64>,
    #[diesel(sql_type = Text)]
    pub channel_id: String,
    #[diesel(sql_type = Integer)]
    pub depth: i32,
    #[diesel(sql_type = Bool)]
    pub broadcast: bool,
    #[diesel(sql_type = Nullable<Text>)]
    pub root_id: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub last_reply_received_at: Option<i64>,
    /// On a root: the author time of its newest nondeleted reply.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub last_reply_at: Option<i64>,
}

impl Message {
    /// Shown in the channel timeline: top-level, or a broadcast reply.
    pub(crate) fn in_timeline(&self) -> bool {
        self.depth == 0 || (self.depth == 1 && self.broadcast)
    }

    /// Shown in the thread rooted at `root`.
    pub(crate) fn in_thread(&self, root: &str) -> bool {
        self.root_id.as_deref() == Some(root)
    }
}

/// The conversation message `id` (deleted or not), if stored with thread metadata.
pub(crate) fn message(
    conn: &mut Conn<'_>,
    community_id: i64,
    id: &str,
) -> Result<Option<Message>, Reason> {
    let text = "SELECT e.id AS id, e.pubkey AS pubkey, e.received_at AS received_at, \
        e.created_at AS created_at, e.deleted_at AS deleted_at, \
        t.channel_id AS channel_id, t.depth AS depth, t.broadcast AS broadcast, \
        t.root_id AS root_id, t.last_reply_received_at AS last_reply_received_at, \
        t.last_reply_at AS last_reply_at \
        FROM events e JOIN thread_metadata t \
        ON t.community_id = e.community_id AND t.event_id = e.id \
        WHERE e.community_id = ? AND e.id = ?";
    first::<Message>(conn, text, &[Val::I(community_id), Val::T(id)])
}

/// The position a mark through `anchor` reaches in `scope`: the last arrival among the
/// messages displayed at or before the anchor (deleted ones included), the anchor's own
/// arrival at least. Only messages within twice the skew of the anchor's author time can
/// have arrived after it, so the walk stops there.
pub(crate) fn last_arrival_through(
    conn: &mut Conn<'_>,
    community_id: i64,
    scope: Scope<'_>,
    anchor: &Message,
    skew: Skew,
) -> Result<i64, Reason> {
    let (from, mut binds, time) = source(community_id, scope);
    let text = format!(
        "SELECT MAX(e.received_at) AS v {from} AND {time} >= ? AND {time} <= ? \
         AND ({time} < ? OR ({time} = ? AND e.id <= ?))"
    );
    // `{time} <= anchor` repeats what the OR says, so the index walk has an upper end
    // (an index condition cannot be read out of the OR): a mark on an old message costs
    // the window around it, not everything after it.
    binds.push(Val::I(anchor.created_at - 2 * skew.secs));
    binds.push(Val::I(anchor.created_at));
    binds.push(Val::I(anchor.created_at));
    binds.push(Val::I(anchor.created_at));
    binds.push(Val::T(&anchor.id));
    let found = first::<OptI64>(conn, &text, &binds)?.and_then(|r| r.v);
    Ok(found.unwrap_or(anchor.received_at).max(anchor.received_at))
}

/// The last arrival in the thread under `root` (any reply, deleted or not), or the root's
/// own arrival when it has none: where a follow intent starts.
pub(crate) fn thread_last_arrival(
    conn: &mut Conn<'_>,
    community_id: i64,
    root: &Message,
) -> Result<i64, Reason> {
    if let Some(last) = root.last_reply_received_at {
        return Ok(last.max(root.received_at));
    }
    // Replies stored before the arrival columns existed carry no summary: look.
    let (from, binds, _) = source(
        community_id,
        Scope::Thread {
            channel: &root.channel_id,
            root: &root.id,
        },
    );
    let text = format!("SELECT MAX(e.received_at) AS v {from}");
    let found = first::<OptI64>(conn, &text, &binds)?.and_then(|r| r.v);
    Ok(found.unwrap_or(root.received_at).max(root.received_at))
}
