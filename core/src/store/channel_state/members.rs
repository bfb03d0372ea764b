//! `channel_members` rows: who belongs to a channel, with which role.

use crate::error::Reason;
use crate::store::schema::channel_members;
use crate::store::Conn;
use crate::with_conn;
use diesel::prelude::*;

/// Add a member or change their role.
pub fn set_member(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
    pubkey: &str,
    role: &str,
    now: i64,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::insert_into(channel_members::table)
        .values((
            channel_members::community_id.eq(community_id),
            channel_members::channel_id.eq(channel_id),
            channel_members::pubkey.eq(pubkey),
            channel_members::role.eq(role),
            channel_members::added_at.eq(now),
        ))
        .on_conflict((
            channel_members::community_id,
            channel_members::channel_id,
            channel_members::pubkey
        ))
        .do_update()
        .set(channel_members::role.eq(role))
        .execute(c))?;
    Ok(())
}

pub fn remove_member(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
    pubkey: &str,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::delete(
        channel_members::table
            .filter(channel_members::community_id.eq(community_id))
            .filter(channel_members::channel_id.eq(channel_id))
            .filter(channel_members::pubkey.eq(pubkey))
    )
    .execute(c))?;
    Ok(())
}

/// The role of `pubkey` in the channel, if a member.
pub fn member_role(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
    pubkey: &str,
) -> Result<Option<String>, Reason> {
    Ok(with_conn!(conn, |c| channel_members::table
        .filter(channel_members::community_id.eq(community_id))
        .filter(channel_members::channel_id.eq(channel_id))
        .filter(channel_members::pubkey.eq(pubkey))
        .select(channel_members::role)
        .first(c)
        .optional())?)
}

/// Every member with their role, ordered by pubkey (stable 39001/39002 content).
pub fn members(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
) -> Result<Vec<(String, String)>, Reason> {
    Ok(with_conn!(conn, |c| channel_members::table
        .filter(channel_members::community_id.eq(community_id))
        .filter(channel_members::channel_id.eq(channel_id))
        .select((channel_members::pubkey, channel_members::role))
        .order(channel_members::pubkey.asc())
        .load(c))?)
}

/// How many members of the channel hold `role`.
pub fn count_role(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel_id: &str,
    role: &str,
) -> Result<i64, Reason> {
    Ok(with_conn!(conn, |c| channel_members::table
        .filter(channel_members::community_id.eq(community_id))
        .filter(channel_members::channel_id.eq(channel_id))
        .filter(channel_members::role.eq(role))
        .count()
        .get_result(c))?)
}
