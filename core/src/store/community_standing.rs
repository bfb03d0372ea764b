//! Community standing: a whole community's `community_members` and `community_sanctions`
//! rows (bans, timeouts), and a pubkey's standing read from both (with its channel
//! memberships). Written by the 9040–9044 events inside their storage transaction.

use crate::error::Reason;
use crate::store::schema::{channel_members, community_members, community_sanctions};
use crate::store::Conn;
use crate::with_conn;
use diesel::prelude::*;

pub fn add_community_member(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    by: &str,
    now: i64,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::insert_into(community_members::table)
        .values((
            community_members::community_id.eq(community_id),
            community_members::pubkey.eq(pubkey),
            community_members::added_by.eq(by),
            community_members::added_at.eq(now),
        ))
        .on_conflict_do_nothing()
        .execute(c))?;
    Ok(())
}

pub fn remove_community_member(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::delete(
        community_members::table
            .filter(community_members::community_id.eq(community_id))
            .filter(community_members::pubkey.eq(pubkey))
    )
    .execute(c))?;
    Ok(())
}

/// A ban (`until` = None) or a timeout of one pubkey.
pub struct Sanction<'a> {
    pub pubkey: &'a str,
    /// `"ban"` or `"timeout"`.
    pub kind: &'a str,
    pub until: Option<i64>,
    pub reason: &'a str,
    pub by: &'a str,
    pub at: i64,
}

/// Record (or replace) a sanction.
pub fn set_sanction(
    conn: &mut Conn<'_>,
    community_id: i64,
    s: &Sanction<'_>,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::insert_into(community_sanctions::table)
        .values((
            community_sanctions::community_id.eq(community_id),
            community_sanctions::pubkey.eq(s.pubkey),
            community_sanctions::sanction.eq(s.kind),
            community_sanctions::until_at.eq(s.until),
            community_sanctions::reason.eq(s.reason),
            community_sanctions::created_by.eq(s.by),
            community_sanctions::created_at.eq(s.at),
        ))
        .on_conflict((
            community_sanctions::community_id,
            community_sanctions::pubkey,
            community_sanctions::sanction,
        ))
        .do_update()
        .set((
            community_sanctions::until_at.eq(s.until),
            community_sanctions::reason.eq(s.reason),
            community_sanctions::created_by.eq(s.by),
            community_sanctions::created_at.eq(s.at),
        ))
        .execute(c))?;
    Ok(())
}

pub fn remove_sanction(
    conn: &mut Conn<'_>,
    community_id: i64,
    pubkey: &str,
    sanction: &str,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::delete(
        community_sanctions::table
            .filter(community_sanctions::community_id.eq(community_id))
            .filter(community_sanctions::pubkey.eq(pubkey))
            .filter(community_sanctions::sanction.eq(sanction))
    )
    .execute(c))?;
    Ok(())
}

/// A `community_sanctions` row as the access service reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanctionRow {
    /// `ban` or `timeout`.
    pub kind: String,
    pub until: Option<i64>,
    pub reason: String,
}

/// A `channel_members` row of one pubkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipRow {
    pub channel_id: String,
    pub role: String,
    pub added_at: i64,
}

/// Everything the community records about one pubkey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// Listed in `community_members` (closed communities admit only these).
    pub listed: bool,
    pub sanctions: Vec<SanctionRow>,
    pub memberships: Vec<MembershipRow>,
}

/// Load the standing of `pubkey` in `community_id`: three indexed reads.
pub fn standing(conn: &mut Conn<'_>, community_id: i64, pubkey: &str) -> Result<Standing, Reason> {
    let listed: i64 = with_conn!(conn, |c| community_members::table
        .filter(community_members::community_id.eq(community_id))
        .filter(community_members::pubkey.eq(pubkey))
        .count()
        .get_result(c))?;
    let sanctions: Vec<(String, Option<i64>, String)> =
        with_conn!(conn, |c| community_sanctions::table
            .filter(community_sanctions::community_id.eq(community_id))
            .filter(community_sanctions::pubkey.eq(pubkey))
            .select((
                community_sanctions::sanction,
                community_sanctions::until_at,
                community_sanctions::reason
            ))
            .load(c))?;
    let memberships: Vec<(String, String, i64)> = with_conn!(conn, |c| channel_members::table
        .filter(channel_members::community_id.eq(community_id))
        .filter(channel_members::pubkey.eq(pubkey))
        .select((
            channel_members::channel_id,
            channel_members::role,
            channel_members::added_at
        ))
        .load(c))?;
    Ok(Standing {
        listed: listed > 0,
        sanctions: sanctions
            .into_iter()
            .map(|(kind, until, reason)| SanctionRow {
                kind,
                until,
                reason,
            })
            .collect(),
        memberships: memberships
            .into_iter()
            .map(|(channel_id, role, added_at)| MembershipRow {
                channel_id,
                role,
                added_at,
            })
            .collect(),
    })
}
