//! Reading a community's moderation state as lists: sanctions, listed members, events
//! removed by moderators. NIP-86's `list*` methods and `buzz-admin`'s Moderation pane
//! read these; the rows themselves are written by the 9040–9044 and 9005 events
//! (`channels/mod.rs`, `community_standing.rs`).

use super::schema::{community_members, community_sanctions, event_tags, events};
use crate::error::Reason;
use crate::store::Conn;
use crate::with_conn;
use buzz_nostr::kinds::MODERATE_REMOVE;
use diesel::prelude::*;

/// Most rows one listing returns: a management answer, not an export.
pub const MAX_LISTED: i64 = 1_000;

/// One ban or timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanctionListing {
    pub pubkey: String,
    /// `ban` or `timeout`.
    pub kind: String,
    pub until: Option<i64>,
    pub reason: String,
    /// Who imposed it (the owner, also when through NIP-86).
    pub by: String,
    pub at: i64,
}

/// A pubkey listed in `community_members` (admitted to a closed community).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberListing {
    pub pubkey: String,
    pub added_by: String,
    pub added_at: i64,
}

/// An event a moderator removed (kind 9005), with the removal's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedEvent {
    pub id: String,
    pub reason: String,
    pub removed_by: String,
    pub removed_at: i64,
}

/// Sanctions of `community_id` (`kind`: `ban`, `timeout`, or every kind when `None`),
/// newest first.
pub fn sanctions(
    conn: &mut Conn<'_>,
    community_id: i64,
    kind: Option<&str>,
) -> Result<Vec<SanctionListing>, Reason> {
    type Row = (String, String, Option<i64>, String, String, i64);
    let rows: Vec<Row> = with_conn!(conn, |c| {
        let mut q = community_sanctions::table
            .filter(community_sanctions::community_id.eq(community_id))
            .into_boxed();
        if let Some(kind) = kind {
            q = q.filter(community_sanctions::sanction.eq(kind));
        }
        q.order((
            community_sanctions::created_at.desc(),
            community_sanctions::pubkey.asc(),
        ))
        .limit(MAX_LISTED)
        .select((
            community_sanctions::pubkey,
            community_sanctions::sanction,
            community_sanctions::until_at,
            community_sanctions::reason,
            community_sanctions::created_by,
            community_sanctions::created_at,
        ))
        .load(c)
    })?;
    Ok(rows
        .into_iter()
        .map(|(pubkey, kind, until, reason, by, at)| SanctionListing {
            pubkey,
            kind,
            until,
            reason,
            by,
            at,
        })
        .collect())
}

/// Pubkeys listed as community members, newest first.
pub fn listed_members(
    conn: &mut Conn<'_>,
    community_id: i64,
) -> Result<Vec<MemberListing>, Reason> {
    let rows: Vec<(String, String, i64)> = with_conn!(conn, |c| community_members::table
        .filter(community_members::community_id.eq(community_id))
        .order((
            community_members::added_at.desc(),
            community_members::pubkey.asc(),
        ))
        .limit(MAX_LISTED)
        .select((
            community_members::pubkey,
            community_members::added_by,
            community_members::added_at,
        ))
        .load(c))?;
    Ok(rows
        .into_iter()
        .map(|(pubkey, added_by, added_at)| MemberListing {
            pubkey,
            added_by,
            added_at,
        })
        .collect())
}

/// Events removed by a moderator's 9005 (the target named by its last `e` tag), newest
/// removal first.
pub fn removed_events(conn: &mut Conn<'_>, community_id: i64) -> Result<Vec<RemovedEvent>, Reason> {
    let removals: Vec<(i64, String, String, i64)> = with_conn!(conn, |c| events::table
        .filter(events::community_id.eq(community_id))
        .filter(events::kind.eq(MODERATE_REMOVE as i32))
        .filter(events::deleted_at.is_null())
        .order(events::seq.desc())
        .limit(MAX_LISTED)
        .select((
            events::seq,
            events::content,
            events::pubkey,
            events::created_at
        ))
        .load(c))?;
    let mut out = Vec::with_capacity(removals.len());
    for (seq, reason, removed_by, removed_at) in removals {
        let targets: Vec<String> = with_conn!(conn, |c| event_tags::table
            .filter(event_tags::event_seq.eq(seq))
            .filter(event_tags::name.eq("e"))
            .order(event_tags::position.desc())
            .limit(1)
            .select(event_tags::value)
            .load(c))?;
        if let Some(id) = targets.into_iter().next() {
            out.push(RemovedEvent {
                id,
                reason: reason.clone(),
                removed_by: removed_by.clone(),
                removed_at,
            });
        }
    }
    Ok(out)
}
