//! One reader's read state as the operator console's Frontiers pane shows it (issue
//! #14): for a (community, pubkey) the operator names, read from the database — when
//! the account started, each channel's position and whole-channel cut, followed and
//! unfollowed threads, and what the sidebar would answer now (the sidebar's own code,
//! on one snapshot).
//!
//! Positions are signer-private: this is the one reader of them outside the
//! `/buzz/v1` API, for the console only — no Nostr query, admin panel or metric shows
//! them. Plain data, no UI.

use crate::frontiers::TIMELINE;
use crate::plugin::snapshot;
use crate::scope::Skew;
use crate::sidebar::{self, SidebarRow, ThreadAsk};
use crate::sql::{load, Val};
use crate::{Config, MAX_CHANNELS};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel::QueryableByName;

/// Frontier rows read at most; more says `truncated` (the console is not a query tool).
pub const MAX_ROWS: usize = 1_000;

/// A reader's read state in one community. Times are relay arrival times,
/// microseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderFrontiers {
    /// The first read intent; `None`: no account yet (nothing counts for them).
    pub started_at: Option<i64>,
    /// Joined channels and channels with a position, by id.
    pub channels: Vec<ChannelFrontier>,
    /// Thread rows, followed or not, by channel then root.
    pub threads: Vec<ThreadFrontier>,
    /// The sidebar as `GET /buzz/v1/me/sidebar` would answer it now, over every joined
    /// nondeleted channel (access policies beyond membership are not applied here), each
    /// row with the first page of its threads at the default `max_threads`.
    pub sidebar: Vec<SidebarRow>,
    /// More than [`MAX_ROWS`] frontier rows: the lists hold the first ones.
    pub truncated: bool,
}

/// One channel timeline's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelFrontier {
    pub channel_id: String,
    /// `None` once the channel row is gone.
    pub name: Option<String>,
    /// Joined and not deleted.
    pub joined: bool,
    /// The timeline position; `None`: never read (floored at `started_at`).
    pub position: Option<i64>,
    /// The whole-channel cut (`mark_channel_read`); 0 when never set.
    pub cut: i64,
}

/// One thread row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadFrontier {
    pub channel_id: String,
    pub root_id: String,
    pub position: i64,
    pub following: bool,
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    channel_id: String,
    #[diesel(sql_type = Text)]
    root_id: String,
    #[diesel(sql_type = BigInt)]
    position: i64,
    #[diesel(sql_type = BigInt)]
    cut: i64,
    #[diesel(sql_type = Bool)]
    following: bool,
    #[diesel(sql_type = Nullable<Text>)]
    name: Option<String>,
}

#[derive(QueryableByName)]
struct Named {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    name: String,
}

/// Read `pubkey`'s read state in `community_id` on one snapshot. `now_micros` floors
/// positions of a reader without an account, as the sidebar does;
/// `max_clock_skew_secs` is `limits.max_clock_skew_secs`.
pub fn reader_frontiers(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    now_micros: i64,
    max_clock_skew_secs: i64,
) -> Result<ReaderFrontiers, Reason> {
    let skew = Skew::new(max_clock_skew_secs);
    snapshot(conn, |conn| {
        let started_at = crate::frontiers::started_at(conn, community_id, pubkey)?;
        let limit = i64::try_from(MAX_ROWS + 1).unwrap_or(i64::MAX);
        let mut rows: Vec<Row> = load(
            conn,
            "SELECT f.channel_id AS channel_id, f.root_id AS root_id, f.position AS position, \
             f.cut AS cut, f.following AS following, c.name AS name \
             FROM read_state_frontiers f LEFT JOIN channels c \
             ON c.community_id = f.community_id AND c.id = f.channel_id \
             WHERE f.community_id = ? AND f.pubkey = ? \
             ORDER BY f.channel_id, f.root_id LIMIT ?",
            &[Val::I(community_id), Val::T(pubkey), Val::I(limit)],
        )?;
        let truncated = rows.len() > MAX_ROWS;
        rows.truncate(MAX_ROWS);
        let joined = sidebar::joined_channels(conn, community_id, pubkey)?;
        let mut channels: Vec<ChannelFrontier> = Vec::new();
        let mut threads = Vec::new();
        for row in rows {
            if row.root_id == TIMELINE {
                channels.push(ChannelFrontier {
                    joined: joined.binary_search(&row.channel_id).is_ok(),
                    channel_id: row.channel_id,
                    name: row.name,
                    position: Some(row.position),
                    cut: row.cut,
                });
            } else {
                threads.push(ThreadFrontier {
                    channel_id: row.channel_id,
                    root_id: row.root_id,
                    position: row.position,
                    following: row.following,
                });
            }
        }
        // Joined channels never read have no row yet: listed all the same.
        let unread_joined: Vec<&String> = joined
            .iter()
            .filter(|id| !channels.iter().any(|c| &c.channel_id == *id))
            .collect();
        for chunk in unread_joined.chunks(MAX_CHANNELS) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let text =
                format!("SELECT id, name FROM channels WHERE community_id = ? AND id IN ({marks})");
            let mut binds = vec![Val::I(community_id)];
            binds.extend(chunk.iter().map(|id| Val::T(id)));
            for named in load::<Named>(conn, &text, &binds)? {
                channels.push(ChannelFrontier {
                    channel_id: named.id,
                    name: Some(named.name),
                    joined: true,
                    position: None,
                    cut: 0,
                });
            }
        }
        channels.sort_by(|a, b| a.channel_id.cmp(&b.channel_id));
        let mut rows = Vec::new();
        // The first page of each row's threads, at the default bound.
        let first_page = ThreadAsk {
            limit: Config::default().max_threads,
            after: None,
        };
        for page in joined.chunks(MAX_CHANNELS) {
            rows.extend(sidebar::rows(
                conn,
                community_id,
                pubkey,
                page,
                now_micros,
                skew,
                first_page,
            )?);
        }
        Ok(ReaderFrontiers {
            started_at,
            channels,
            threads,
            sidebar: rows,
            truncated,
        })
    })
}
