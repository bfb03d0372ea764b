//! The plugin's own tables (`migrations/`): accounts (`started_at`), frontiers (one row
//! per channel timeline, `root_id = ''`, and per thread: position, whole-channel cut,
//! following, and the thread's tip — `thread_rank`, `thread_news_at` — that the
//! sidebar's walk orders and filters by) and mentions. Every position only moves
//! forward: each upsert keeps the larger of the stored and the new value.

use crate::sql::{execute, first, load as load_rows, OptI64, Val, I64};
use crate::tips::Tip;
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::sql_types::{BigInt, Bool};
use diesel::QueryableByName;

/// The channel timeline's `root_id`.
pub(crate) const TIMELINE: &str = "";

/// Where one scope's row points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frontier {
    pub position: i64,
    pub cut: i64,
    pub following: bool,
}

#[derive(QueryableByName)]
struct FrontierRow {
    #[diesel(sql_type = BigInt)]
    position: i64,
    #[diesel(sql_type = BigInt)]
    cut: i64,
    #[diesel(sql_type = Bool)]
    following: bool,
}

/// One scope of one signer: `(community, pubkey, channel, root)`; `root` is
/// [`TIMELINE`] for the channel timeline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'a> {
    pub community_id: i64,
    pub pubkey: &'a str,
    pub channel_id: &'a str,
    pub root_id: &'a str,
}

/// How an upsert treats an existing row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upsert {
    /// Move position/cut forward; leave `following` as it is (the timeline, thread
    /// marks).
    Advance,
    /// Move forward and follow again (your own reply, a follow intent).
    AdvanceAndFollow,
    /// A mention: an unfollowed thread is followed again and caught up to just before
    /// the mention; a followed one keeps its position.
    Mention,
    /// Only a new row (replies to your top-level, DM replies): a sticky unfollow stays.
    IfAbsent,
    /// Unfollow: keep the row, stop following.
    Unfollow,
}

const INSERT: &str = "INSERT INTO read_state_frontiers \
    (community_id, pubkey, channel_id, root_id, position, cut, following, \
     thread_rank, thread_news_at) \
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
    ON CONFLICT (community_id, pubkey, channel_id, root_id) ";

/// A row that follows (again) takes the thread's tip as it is now.
const TIP: &str = "thread_rank = excluded.thread_rank, \
    thread_news_at = excluded.thread_news_at";

const FORWARD: &str = "DO UPDATE SET \
    position = CASE WHEN excluded.position > read_state_frontiers.position \
        THEN excluded.position ELSE read_state_frontiers.position END, \
    cut = CASE WHEN excluded.cut > read_state_frontiers.cut \
        THEN excluded.cut ELSE read_state_frontiers.cut END";

/// Write one frontier row as `how` says. `following` is what a new row gets; `tip`
/// is the thread's (default for the timeline), written by a new row and by any upsert
/// that follows.
pub(crate) fn upsert(
    conn: &mut Conn<'_>,
    key: Key<'_>,
    position: i64,
    cut: i64,
    how: Upsert,
    tip: Tip,
) -> Result<(), Reason> {
    let (tail, following) = match how {
        Upsert::Advance => (FORWARD.to_owned(), true),
        Upsert::AdvanceAndFollow => (format!("{FORWARD}, following = TRUE, {TIP}"), true),
        Upsert::Mention => (
            format!(
                "DO UPDATE SET \
                 position = CASE WHEN read_state_frontiers.following = FALSE \
                     AND excluded.position > read_state_frontiers.position \
                     THEN excluded.position ELSE read_state_frontiers.position END, \
                 following = TRUE, {TIP}"
            ),
            true,
        ),
        Upsert::IfAbsent => ("DO NOTHING".to_owned(), true),
        Upsert::Unfollow => ("DO UPDATE SET following = FALSE".to_owned(), false),
    };
    let text = format!("{INSERT}{tail}");
    execute(
        conn,
        &text,
        &[
            Val::I(key.community_id),
            Val::T(key.pubkey),
            Val::T(key.channel_id),
            Val::T(key.root_id),
            Val::I(position),
            Val::I(cut),
            Val::B(following),
            Val::N(tip.rank()),
            Val::N(tip.news_at),
        ],
    )?;
    Ok(())
}

/// Write a floor (a whole-channel cut, or the account's start) into the thread
/// positions below it: in `channel`, or in every channel when `None`. Every read takes
/// the largest of position, cut and start anyway; written into the rows, those the
/// floor reads leave the sidebar walk's index instead of being walked and skipped on
/// every sidebar. One statement over the reader's rows (of that channel).
pub(crate) fn raise_threads(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    channel: Option<&str>,
    floor: i64,
) -> Result<(), Reason> {
    match channel {
        Some(channel) => execute(
            conn,
            "UPDATE read_state_frontiers SET position = ? \
             WHERE community_id = ? AND pubkey = ? AND channel_id = ? \
             AND root_id <> '' AND position < ?",
            &[
                Val::I(floor),
                Val::I(community_id),
                Val::T(pubkey),
                Val::T(channel),
                Val::I(floor),
            ],
        )?,
        None => execute(
            conn,
            "UPDATE read_state_frontiers SET position = ? \
             WHERE community_id = ? AND pubkey = ? AND root_id <> '' AND position < ?",
            &[
                Val::I(floor),
                Val::I(community_id),
                Val::T(pubkey),
                Val::I(floor),
            ],
        )?,
    };
    Ok(())
}

/// The row of one scope, if any.
pub(crate) fn load(conn: &mut Conn<'_>, key: Key<'_>) -> Result<Option<Frontier>, Reason> {
    let row: Option<FrontierRow> = first(
        conn,
        "SELECT position, cut, following FROM read_state_frontiers \
         WHERE community_id = ? AND pubkey = ? AND channel_id = ? AND root_id = ?",
        &[
            Val::I(key.community_id),
            Val::T(key.pubkey),
            Val::T(key.channel_id),
            Val::T(key.root_id),
        ],
    )?;
    Ok(row.map(|r| Frontier {
        position: r.position,
        cut: r.cut,
        following: r.following,
    }))
}

/// When the signer's account started (its first read intent), if it has.
pub(crate) fn started_at(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
) -> Result<Option<i64>, Reason> {
    let row: Option<I64> = first(
        conn,
        "SELECT started_at AS v FROM read_state_accounts WHERE community_id = ? AND pubkey = ?",
        &[Val::I(community_id), Val::T(pubkey)],
    )?;
    Ok(row.map(|r| r.v))
}

/// Start the signer's account at `now` unless it has started; returns `started_at`.
/// A new account floors the thread rows ingest kept for the signer before it.
pub(crate) fn ensure_account(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    now: i64,
) -> Result<i64, Reason> {
    let created = execute(
        conn,
        "INSERT INTO read_state_accounts (community_id, pubkey, started_at) VALUES (?, ?, ?) \
         ON CONFLICT (community_id, pubkey) DO NOTHING",
        &[Val::I(community_id), Val::T(pubkey), Val::I(now)],
    )?;
    if created == 1 {
        raise_threads(conn, community_id, pubkey, None, now)?;
    }
    started_at(conn, community_id, pubkey)?.ok_or_else(|| {
        Reason::Internal(anyhow::anyhow!("read-state account vanished after insert"))
    })
}

/// Record that `key`'s signer is mentioned by `event_id` (arrived at `received_at`).
pub(crate) fn add_mention(
    conn: &mut Conn<'_>,
    key: Key<'_>,
    received_at: i64,
    event_id: &str,
) -> Result<(), Reason> {
    execute(
        conn,
        "INSERT INTO read_state_mentions \
         (community_id, pubkey, channel_id, root_id, received_at, event_id) \
         VALUES (?, ?, ?, ?, ?, ?) \
         ON CONFLICT (community_id, event_id, pubkey, root_id) DO NOTHING",
        &[
            Val::I(key.community_id),
            Val::T(key.pubkey),
            Val::T(key.channel_id),
            Val::T(key.root_id),
            Val::I(received_at),
            Val::T(event_id),
        ],
    )?;
    Ok(())
}

/// Forget every mention made by `event_id` (an expired message the relay purges).
pub(crate) fn drop_mentions(
    conn: &mut Conn<'_>,
    community_id: i64,
    event_id: &str,
) -> Result<(), Reason> {
    execute(
        conn,
        "DELETE FROM read_state_mentions WHERE community_id = ? AND event_id = ?",
        &[Val::I(community_id), Val::T(event_id)],
    )?;
    Ok(())
}

/// Row counts of the three tables, for the admin panel (sizes, never contents).
pub(crate) fn table_sizes(conn: &mut Conn<'_>) -> Result<(i64, i64, i64), Reason> {
    let mut count = |table: &str| -> Result<i64, Reason> {
        let text = format!("SELECT COUNT(*) AS v FROM {table}");
        let rows: Vec<OptI64> = load_rows(&mut *conn, &text, &[])?;
        Ok(rows.into_iter().next().and_then(|r| r.v).unwrap_or(0))
    };
    Ok((
        count("read_state_accounts")?,
        count("read_state_frontiers")?,
        count("read_state_mentions")?,
    ))
}
