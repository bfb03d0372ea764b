//! Counts for status tools (`buzz-admin`): what each community holds.

use super::conn::Conn;
use super::schema::{channels, communities, events};
use crate::error::Reason;
use crate::with_conn;
use diesel::prelude::*;

/// One community as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommunityStats {
    /// Row id (what every stored row of the community carries).
    pub id: i64,
    pub host: String,
    pub name: String,
    pub events: i64,
    pub deleted_events: i64,
    /// Channels not deleted.
    pub channels: i64,
}

/// Every stored community, by host, with its counts.
pub fn community_stats(conn: &mut Conn<'_>) -> Result<Vec<CommunityStats>, Reason> {
    let list: Vec<(i64, String, String)> = with_conn!(conn, |c| communities::table
        .select((communities::id, communities::host, communities::name))
        .order(communities::host.asc())
        .load(c))?;
    let mut out = Vec::with_capacity(list.len());
    for (id, host, name) in list {
        let events: i64 = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(id))
            .count()
            .get_result(c))?;
        let deleted_events: i64 = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(id))
            .filter(events::deleted_at.is_not_null())
            .count()
            .get_result(c))?;
        let channels: i64 = with_conn!(conn, |c| channels::table
            .filter(channels::community_id.eq(id))
            .filter(channels::deleted_at.is_null())
            .count()
            .get_result(c))?;
        out.push(CommunityStats {
            id,
            host,
            name,
            events,
            deleted_events,
            channels,
        });
    }
    Ok(out)
}
