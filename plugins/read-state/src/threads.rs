//! One sidebar row's threads: a page of the reader's followed threads in the channel
//! that have an unread reply, newest latest reply (author time) first, then by root id,
//! and a cursor for the next page.
//!
//! Cost: one walk of `idx_read_state_unread_threads` (the reader's following rows of the
//! channel with news past their position, in that order), stopped after the page; then
//! per listed thread the same per-scope reads as before (existence probe, newest reply,
//! mention count, divider). A walk examines at most `2 × max_threads + 1` rows, so a
//! page costs the same however many threads someone made the reader follow; rows it
//! examines but does not list (news read by a whole-channel cut or the account start
//! not yet written into them, only deleted replies past the position) still move the
//! cursor on, so a page may list fewer than `max_threads` with a cursor. Nothing is
//! sorted in the relay.
//!
//! The cursor names the last thread the page covered by its order key: `<latest>:<root>`
//! — the newest reply's author time (which that reply shows anyway) and the root id,
//! never a position or arrival. It is exclusive, so a thread listed on one page is never
//! listed again on a later page unless a newer reply moved it up, and one that moved up
//! between pages is found from the first page again.

use crate::scope::{self, Scope, Skew};
use crate::sidebar::SidebarThread;
use crate::sql::{load, Val};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::sql_types::{BigInt, Text};
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

#[derive(QueryableByName)]
struct Candidate {
    #[diesel(sql_type = Text)]
    root_id: String,
    #[diesel(sql_type = BigInt)]
    position: i64,
    #[diesel(sql_type = BigInt)]
    thread_rank: i64,
    #[diesel(sql_type = BigInt)]
    thread_news_at: i64,
}

/// The walk: following rows with news past their position, in sidebar order. The
/// partial index's predicate is repeated word for word, so both backends use it.
const WALK: &str = "SELECT f.root_id AS root_id, f.position AS position, \
    f.thread_rank AS thread_rank, f.thread_news_at AS thread_news_at \
    FROM read_state_frontiers f \
    WHERE f.community_id = ? AND f.pubkey = ? AND f.channel_id = ? \
    AND f.following = TRUE AND f.thread_news_at > f.position \
    AND f.thread_rank IS NOT NULL";

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
    let scan = limit.saturating_mul(2).saturating_add(1);
    let scan_bind = i64::try_from(scan).unwrap_or(i64::MAX);
    let mut binds = vec![Val::I(cid), Val::T(me), Val::T(channel)];
    let text = match after {
        None => format!("{WALK} ORDER BY f.thread_rank, f.root_id LIMIT ?"),
        Some(after) => {
            binds.push(Val::I(after.rank));
            binds.push(Val::T(&after.root));
            format!(
                "{WALK} AND (f.thread_rank, f.root_id) > (?, ?) \
                 ORDER BY f.thread_rank, f.root_id LIMIT ?"
            )
        }
    };
    binds.push(Val::I(scan_bind));
    let candidates: Vec<Candidate> = load(conn, &text, &binds)?;
    let key = |c: &Candidate| After {
        rank: c.thread_rank,
        root: c.root_id.clone(),
    };

    let mut page = Page::default();
    let mut last_listed: Option<After> = None;
    for candidate in &candidates {
        let position = candidate.position.max(floor);
        if candidate.thread_news_at <= position {
            continue;
        }
        let scope = Scope::Thread {
            channel,
            root: &candidate.root_id,
        };
        if !scope::unread(conn, cid, scope, position, skew)? {
            continue;
        }
        if page.threads.len() == limit {
            // One more unread thread: the next page starts after the last listed.
            page.next = last_listed.map(|k| k.cursor());
            return Ok(page);
        }
        let Some(latest) = scope::latest(conn, cid, scope)? else {
            continue;
        };
        let mentions = scope::mentions(conn, cid, me, channel, &candidate.root_id, position)?;
        let read_through_id = scope::read_through(conn, cid, scope, position, skew)?;
        page.threads.push(SidebarThread {
            root_id: candidate.root_id.clone(),
            unread: true,
            mentions,
            read_through_id,
            latest_id: latest.id,
        });
        last_listed = Some(key(candidate));
    }
    // The walk stopped at its bound: more may follow the last row it examined.
    if candidates.len() == scan {
        page.next = candidates.last().map(|c| key(c).cursor());
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
