//! One sidebar row's threads: a page of the reader's followed threads in the channel
//! that have an unread reply, newest latest reply (author time) first, then by root id,
//! and a cursor for the next page.
//!
//! Cost: one statement per page. It walks `idx_read_state_unread_threads` (the reader's
//! following rows of the channel with news past their position, in that order) for at
//! most `max_threads + 1` rows, and reads each walked thread as `scope.rs` reads a scope
//! (existence probe, newest reply, mention count, divider), each an index walk bounded
//! by the position. So a page costs the same however many threads someone made the
//! reader follow. A walked row it cannot list (news read by a floor not yet written into
//! it, only deleted replies past its position — ingest and intents keep these rare)
//! still moves the cursor on: a page may list fewer than `max_threads` with a cursor.
//! Nothing is sorted in the relay.
//!
//! The cursor names the last thread the page covered by its order key: `<latest>:<root>`
//! — the newest reply's author time (which that reply shows anyway) and the root id,
//! never a position or arrival. It is exclusive, so a thread listed on one page is never
//! listed again on a later page unless a newer reply moved it up, and one that moved up
//! between pages is found from the first page again.

use crate::scope::Skew;
use crate::sidebar::SidebarThread;
use crate::sql::{load, Val};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel::QueryableByName;

/// Where the next page of one row's threads starts (exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct After {
    /// `thread_rank` of the last thread covered: minus its newest reply's author time.
    rank: i64,
    root: String,
}

impl After {
    /// Parse a `threads_cursor` value (`<latest author time>:<root id>`).
    pub(crate) fn parse(raw: &str) -> Result<After, Reason> {
        let bad = || Reason::invalid("threads_cursor must be a threads_next_cursor value");
        let (latest, root) = raw.split_once(':').ok_or_else(bad)?;
        let digits = latest.strip_prefix('-').unwrap_or(latest);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let latest: i64 = latest.parse().map_err(|_| bad())?;
        if !crate::ingest::is_hex64(root) {
            return Err(bad());
        }
        Ok(After {
            rank: latest.checked_neg().ok_or_else(bad)?,
            root: root.to_owned(),
        })
    }

    fn cursor(&self) -> String {
        format!("{}:{}", -self.rank, self.root)
    }
}

/// One page of a row's threads.
#[derive(Debug, Default)]
pub(crate) struct Page {
    pub threads: Vec<SidebarThread>,
    /// `threads_next_cursor`: more threads may follow.
    pub next: Option<String>,
}

/// One walked row and what its thread shows (all read in the walk's statement).
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(sql_type = Text)]
    root_id: String,
    #[diesel(sql_type = BigInt)]
    thread_rank: i64,
    #[diesel(sql_type = Bool)]
    unread: bool,
    #[diesel(sql_type = Nullable<Text>)]
    latest_id: Option<String>,
    #[diesel(sql_type = BigInt)]
    mentions: i64,
    #[diesel(sql_type = Nullable<Text>)]
    read_through_id: Option<String>,
}

/// The thread's messages joined to their events, correlated with the walked row `c`.
const IN_THREAD: &str = "FROM thread_metadata t JOIN events e \
    ON e.community_id = t.community_id AND e.id = t.event_id \
    WHERE t.community_id = c.community_id AND t.root_id = c.root_id \
    AND t.channel_id = c.channel_id";

/// The walk (rows `c`: following, news past their position, in sidebar order, at most
/// `LIMIT`; `{after}` is the cursor's bound) and, per row, the thread's reads of
/// `scope.rs` at the row's floored position `c.pos`: an unread reply (an existence probe
/// from the position's author-time bound), the newest reply, the mentions past the
/// position and the divider. One statement: planned once per page, not per thread. The
/// partial index's predicate is repeated word for word, so both backends walk it.
fn walk_text(after: bool) -> String {
    let after = if after {
        "AND (f.thread_rank, f.root_id) > (?, ?) "
    } else {
        ""
    };
    format!(
        "SELECT c.root_id AS root_id, c.thread_rank AS thread_rank, \
         CASE WHEN c.thread_news_at > c.pos AND EXISTS (SELECT 1 {IN_THREAD} \
             AND t.created_at >= c.pos / 1000000 - ? AND e.received_at > c.pos \
             AND e.deleted_at IS NULL) THEN TRUE ELSE FALSE END AS unread, \
         (SELECT e.id {IN_THREAD} AND e.deleted_at IS NULL \
             ORDER BY t.created_at DESC, e.id DESC LIMIT 1) AS latest_id, \
         (SELECT COUNT(*) FROM read_state_mentions m JOIN events e \
             ON e.community_id = m.community_id AND e.id = m.event_id \
             WHERE m.community_id = c.community_id AND m.pubkey = c.pubkey \
             AND m.channel_id = c.channel_id AND m.root_id = c.root_id \
             AND m.received_at > c.pos AND e.deleted_at IS NULL) AS mentions, \
         (SELECT e.id {IN_THREAD} AND t.created_at <= c.pos / 1000000 + ? \
             AND e.received_at <= c.pos AND e.deleted_at IS NULL \
             ORDER BY t.created_at DESC, e.id DESC LIMIT 1) AS read_through_id \
         FROM (SELECT f.community_id AS community_id, f.pubkey AS pubkey, \
             f.channel_id AS channel_id, f.root_id AS root_id, \
             f.thread_rank AS thread_rank, f.thread_news_at AS thread_news_at, \
             CASE WHEN f.position > ? THEN f.position ELSE ? END AS pos \
             FROM read_state_frontiers f \
             WHERE f.community_id = ? AND f.pubkey = ? AND f.channel_id = ? \
             AND f.following = TRUE AND f.thread_news_at > f.position \
             AND f.thread_rank IS NOT NULL {after}\
             ORDER BY f.thread_rank, f.root_id LIMIT ?) c \
         ORDER BY c.thread_rank, c.root_id"
    )
}

/// Up to `limit` threads of `channel` after `after`, for `me`, whose every position is
/// floored at `floor` (account start, whole-channel cut).
#[allow(clippy::too_many_arguments)]
pub(crate) fn page(
    conn: &mut Conn<'_>,
    cid: i64,
    me: &str,
    channel: &str,
    floor: i64,
    skew: Skew,
    limit: usize,
    after: Option<&After>,
) -> Result<Page, Reason> {
    // One row past the page says whether more follow.
    let scan = limit.saturating_add(1);
    let mut binds = vec![
        Val::I(skew.secs),
        Val::I(skew.secs),
        Val::I(floor),
        Val::I(floor),
        Val::I(cid),
        Val::T(me),
        Val::T(channel),
    ];
    if let Some(after) = after {
        binds.push(Val::I(after.rank));
        binds.push(Val::T(&after.root));
    }
    binds.push(Val::I(i64::try_from(scan).unwrap_or(i64::MAX)));
    let candidates: Vec<Candidate> = load(conn, &walk_text(after.is_some()), &binds)?;

    let mut page = Page::default();
    let mut last_listed: Option<After> = None;
    for candidate in &candidates {
        // Read by a floor not yet written into the row, or only deleted replies past it.
        let Some(latest_id) = candidate.latest_id.clone().filter(|_| candidate.unread) else {
            continue;
        };
        if page.threads.len() == limit {
            // One more unread thread: the next page starts after the last listed.
            page.next = last_listed.map(|k| k.cursor());
            return Ok(page);
        }
        page.threads.push(SidebarThread {
            root_id: candidate.root_id.clone(),
            unread: true,
            mentions: candidate.mentions,
            read_through_id: candidate.read_through_id.clone(),
            latest_id,
        });
        last_listed = Some(After {
            rank: candidate.thread_rank,
            root: candidate.root_id.clone(),
        });
    }
    // The walk stopped at its bound on a row it could not list: more may follow it.
    if candidates.len() == scan {
        page.next = candidates.last().map(|c| {
            After {
                rank: c.thread_rank,
                root: c.root_id.clone(),
            }
            .cursor()
        });
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_parse_strictly() {
        let root = "ab".repeat(32);
        let after = After::parse(&format!("1700000000:{root}")).expect("cursor");
        assert_eq!(after.rank, -1_700_000_000);
        assert_eq!(After::parse(&after.cursor()).expect("again"), after);
        for bad in [
            String::new(),
            "12".to_owned(),
            format!(":{root}"),
            format!("+12:{root}"),
            format!("1 2:{root}"),
            format!("12:{}", "AB".repeat(32)),
            format!("12:{}", "ab".repeat(31)),
            format!("99999999999999999999:{root}"),
            format!("12:{root}:x"),
        ] {
            assert!(After::parse(&bad).is_err(), "{bad:?} must be refused");
        }
    }
}
