//! `GET /buzz/v1/me/sidebar`: one row per joined, nondeleted, readable channel, each
//! page from one snapshot.
//!
//! - `?limit=N&cursor=<uuid>`: pages in channel-id order, the cursor exclusive,
//!   `limit` 1–20 (default 20); `next_cursor` is the last id when more rows follow.
//! - `?channel_ids=a,b`: refresh 1–20 unique channels, ordered by id, `next_cursor`
//!   null; not combined with `limit`/`cursor`.
//! - `?channel_ids=a&threads_cursor=<c>`: that one row with the next page of its
//!   threads (`c` is the row's last `threads_next_cursor`).
//!
//! Each row lists at most `max_threads` threads (`threads.rs`) and carries
//! `threads_next_cursor` (null when no more follow).
//!
//! Cost per channel: nothing new (`channels.last_timeline_received_at` at or before the
//! position) is one comparison; otherwise an existence probe that stops at the first
//! message past the position, and a count over the signer's own mentions past it.
//! Threads: one index walk in sidebar order that stops after the page (`threads.rs`).

use crate::frontiers::TIMELINE;
use crate::http::{self, check_url, query_pairs};
use crate::plugin::{snapshot, ReadState};
use crate::scope::{self, Scope, Skew};
use crate::sql::{load, Val};
use crate::threads::{self, After};
use crate::{frontiers, MAX_CHANNELS, MAX_URL_BYTES};
use buzz_core::error::Reason;
use buzz_core::plugin::{PluginRequest, PluginResponse, RouteHandler};
use buzz_core::store::Conn;
use buzz_nostr::channel_tags::is_lowercase_uuid;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel::QueryableByName;
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) struct Sidebar(pub(crate) Arc<ReadState>);

/// What the query asked for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    Page {
        limit: usize,
        cursor: Option<String>,
    },
    Refresh {
        ids: Vec<String>,
        /// The next page of the one channel's threads.
        threads_after: Option<After>,
    },
}

/// Which page of a row's threads to list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThreadAsk<'a> {
    pub limit: usize,
    pub after: Option<&'a After>,
}

fn parse(query: &str) -> Result<Ask, Reason> {
    let pairs = query_pairs(query, &["limit", "cursor", "channel_ids", "threads_cursor"])?;
    let get = |name: &str| pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let threads_after = get("threads_cursor").map(|c| After::parse(c)).transpose()?;
    if threads_after.is_some() && get("channel_ids").is_none_or(|ids| ids.contains(',')) {
        return Err(Reason::invalid(
            "threads_cursor needs channel_ids naming exactly one channel",
        ));
    }
    if let Some(ids) = get("channel_ids") {
        if get("limit").is_some() || get("cursor").is_some() {
            return Err(Reason::invalid(
                "channel_ids cannot be combined with limit or cursor",
            ));
        }
        let mut list: Vec<String> = ids.split(',').map(str::to_owned).collect();
        if list.len() > MAX_CHANNELS {
            return Err(Reason::invalid(format!(
                "channel_ids names at most {MAX_CHANNELS} channels"
            )));
        }
        if let Some(bad) = list.iter().find(|id| !is_lowercase_uuid(id)) {
            return Err(Reason::invalid(format!(
                "channel_ids: {bad:?} is not a lowercase UUID"
            )));
        }
        list.sort();
        let n = list.len();
        list.dedup();
        if list.len() != n {
            return Err(Reason::invalid("channel_ids must be unique"));
        }
        return Ok(Ask::Refresh {
            ids: list,
            threads_after,
        });
    }
    let limit = match get("limit") {
        None => MAX_CHANNELS,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_CHANNELS).contains(&n) && v.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => {
                return Err(Reason::invalid(format!(
                    "limit must be an integer from 1 to {MAX_CHANNELS}"
                )))
            }
        },
    };
    let cursor = match get("cursor") {
        None => None,
        Some(c) if is_lowercase_uuid(c) => Some(c.clone()),
        Some(_) => {
            return Err(Reason::invalid(
                "cursor must be a channel id (lowercase UUID)",
            ))
        }
    };
    Ok(Ask::Page { limit, cursor })
}

#[async_trait::async_trait]
impl RouteHandler for Sidebar {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        check_url(&request, MAX_URL_BYTES)?;
        let ask = parse(&request.query)?;
        let rs = &self.0;
        let me = rs.admit(&request.ctx).await?;
        let cid = request.ctx.community_id();

        let joined = {
            let me = me.clone();
            rs.services
                .store
                .read(move |mut conn| joined_channels(&mut conn, cid, &me))
                .await?
        };
        let (candidates, limit) = match &ask {
            Ask::Page { limit, cursor } => (
                joined
                    .into_iter()
                    .filter(|id| cursor.as_ref().is_none_or(|c| id > c))
                    .collect::<Vec<_>>(),
                *limit,
            ),
            Ask::Refresh { ids, .. } => (
                joined.into_iter().filter(|id| ids.contains(id)).collect(),
                MAX_CHANNELS,
            ),
        };
        // Access decides over the candidates only up to one row past the page, so a
        // page costs its own channels, not the signer's whole membership.
        let mut page = Vec::new();
        let mut more = false;
        'chunks: for chunk in candidates.chunks(limit + 1) {
            for id in rs.readable(&request.ctx, chunk.to_vec()).await? {
                if page.len() == limit {
                    more = true;
                    break 'chunks;
                }
                page.push(id);
            }
        }
        let now = rs.now_micros();
        let skew = rs.skew;
        let max_threads = rs.config.max_threads;
        let rows = {
            let (me, page) = (me.clone(), page.clone());
            let after = match &ask {
                Ask::Refresh { threads_after, .. } => threads_after.clone(),
                Ask::Page { .. } => None,
            };
            rs.services
                .store
                .read(move |mut conn| {
                    let threads = ThreadAsk {
                        limit: max_threads,
                        after: after.as_ref(),
                    };
                    snapshot(&mut conn, |conn| {
                        rows(conn, cid, &me, &page, now, skew, threads)
                    })
                })
                .await?
        };
        let next_cursor = match (&ask, more) {
            (Ask::Page { .. }, true) => page.last().map(|id| json!(id)).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        http::ok(
            &json!({ "channels": rows, "next_cursor": next_cursor }),
            rs.config.max_response_bytes,
        )
    }

    fn error_response(&self, reason: &Reason) -> PluginResponse {
        http::error(reason)
    }
}

#[derive(QueryableByName)]
struct ChannelId {
    #[diesel(sql_type = Text)]
    id: String,
}

/// The signer's joined, nondeleted channels, by id.
pub(crate) fn joined_channels(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
) -> Result<Vec<String>, Reason> {
    let rows: Vec<ChannelId> = load(
        conn,
        "SELECT c.id AS id FROM channel_members m JOIN channels c \
         ON c.community_id = m.community_id AND c.id = m.channel_id \
         WHERE m.community_id = ? AND m.pubkey = ? AND c.deleted_at IS NULL ORDER BY c.id",
        &[Val::I(cid), Val::T(me)],
    )?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

#[derive(QueryableByName)]
struct ChannelState {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    channel_type: String,
    #[diesel(sql_type = Bool)]
    archived: bool,
    #[diesel(sql_type = Nullable<BigInt>)]
    last_timeline_received_at: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    position: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    cut: Option<i64>,
}

/// One sidebar row: the channel timeline's read scope and its followed threads with
/// an unread reply (the API's JSON shape, field for field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SidebarRow {
    pub channel_id: String,
    pub name: String,
    pub channel_type: String,
    pub archived: bool,
    /// Hiding is client-owned presentation; the relay never hides a row.
    pub hidden: bool,
    pub unread: bool,
    pub mentions: i64,
    pub read_through_id: Option<String>,
    /// At most `max_threads`; more when `threads_next_cursor` is set.
    pub threads: Vec<SidebarThread>,
    /// Where the next page of this row's threads starts (`threads_cursor`); `None`:
    /// every thread is listed.
    pub threads_next_cursor: Option<String>,
}

/// A followed thread with an unread reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SidebarThread {
    pub root_id: String,
    pub unread: bool,
    pub mentions: i64,
    pub read_through_id: Option<String>,
    pub latest_id: String,
}

/// The rows of `page` (ids in order), all read on the caller's snapshot. A channel no
/// longer joined or deleted at this snapshot has no row.
pub(crate) fn rows(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    page: &[String],
    now: i64,
    skew: Skew,
    threads: ThreadAsk<'_>,
) -> Result<Vec<SidebarRow>, Reason> {
    if page.is_empty() {
        return Ok(Vec::new());
    }
    // Nothing counts before the first read intent: without an account every position is
    // floored at this moment.
    let account = frontiers::started_at(conn, cid, me)?;
    let started = account.unwrap_or(now);
    let marks = vec!["?"; page.len()].join(", ");
    let text = format!(
        "SELECT c.id AS id, c.name AS name, c.channel_type AS channel_type, \
         c.archived AS archived, c.last_timeline_received_at AS last_timeline_received_at, \
         f.position AS position, f.cut AS cut \
         FROM channel_members m JOIN channels c \
         ON c.community_id = m.community_id AND c.id = m.channel_id \
         LEFT JOIN read_state_frontiers f ON f.community_id = m.community_id \
         AND f.pubkey = m.pubkey AND f.channel_id = m.channel_id AND f.root_id = '' \
         WHERE m.community_id = ? AND m.pubkey = ? AND c.deleted_at IS NULL \
         AND m.channel_id IN ({marks}) ORDER BY c.id"
    );
    let mut binds = vec![Val::I(cid), Val::T(me)];
    binds.extend(page.iter().map(|id| Val::T(id)));
    let channels: Vec<ChannelState> = load(conn, &text, &binds)?;
    channels
        .into_iter()
        .map(|ch| row(conn, cid, me, ch, started, account.is_some(), skew, threads))
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn row(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    ch: ChannelState,
    started: i64,
    has_account: bool,
    skew: Skew,
    ask: ThreadAsk<'_>,
) -> Result<SidebarRow, Reason> {
    let floor = started.max(ch.cut.unwrap_or(0));
    let position = ch.position.unwrap_or(0).max(floor);
    let timeline = Scope::Timeline { channel: &ch.id };
    // One comparison when nothing arrived in the timeline since the position.
    let news = ch.last_timeline_received_at.is_some_and(|l| l > position);
    let unread = news && scope::unread(conn, cid, timeline, position, skew)?;
    let mentions = if news {
        scope::mentions(conn, cid, me, &ch.id, TIMELINE, position)?
    } else {
        0
    };
    let read_through_id = scope::read_through(conn, cid, timeline, position, skew)?;
    // Without an account nothing counts yet: no thread to walk for.
    let threads = if has_account {
        threads::page(conn, cid, me, &ch.id, floor, skew, ask.limit, ask.after)?
    } else {
        threads::Page::default()
    };
    Ok(SidebarRow {
        channel_id: ch.id,
        name: ch.name,
        channel_type: ch.channel_type,
        archived: ch.archived,
        hidden: false,
        unread,
        mentions,
        read_through_id,
        threads: threads.threads,
        threads_next_cursor: threads.next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "00000000-0000-4000-8000-000000000001";
    const B: &str = "00000000-0000-4000-8000-000000000002";

    #[test]
    fn queries_parse_strictly() {
        assert_eq!(
            parse("").expect("empty"),
            Ask::Page {
                limit: 20,
                cursor: None
            }
        );
        assert_eq!(
            parse(&format!("limit=5&cursor={A}")).expect("page"),
            Ask::Page {
                limit: 5,
                cursor: Some(A.into())
            }
        );
        assert_eq!(
            parse(&format!("channel_ids={B},{A}")).expect("refresh"),
            Ask::Refresh {
                ids: vec![A.into(), B.into()],
                threads_after: None
            }
        );
        let cursor = format!("12:{}", "a".repeat(64));
        assert!(matches!(
            parse(&format!("channel_ids={A}&threads_cursor={cursor}")).expect("thread page"),
            Ask::Refresh {
                threads_after: Some(_),
                ..
            }
        ));
        for bad in [
            "limit=0".to_owned(),
            "limit=21".to_owned(),
            "limit=+5".to_owned(),
            "cursor=x".to_owned(),
            format!("channel_ids={A},{A}"),
            format!("channel_ids={A}&limit=2"),
            format!("channel_ids={A}&cursor={B}"),
            "channel_ids=".to_owned(),
            "other=1".to_owned(),
            format!("channel_ids={}", vec![A; 21].join(",")),
            format!("threads_cursor={cursor}"),
            format!("channel_ids={A},{B}&threads_cursor={cursor}"),
            format!("limit=2&threads_cursor={cursor}"),
            format!("channel_ids={A}&threads_cursor=x"),
        ] {
            assert!(parse(&bad).is_err(), "{bad} must be refused");
        }
    }
}
