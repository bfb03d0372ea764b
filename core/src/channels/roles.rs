//! Role changes (9000, 9001, 9022) that keep a channel manageable: a 9000 that names no
//! role never lowers one (clients re-add people, themselves included, without one), and
//! the last owner is never demoted or removed — a channel left without an owner could be
//! managed by no member of its own.

use crate::error::Reason;
use crate::store::channel_state as state;
use crate::store::Conn;
use buzz_nostr::channel_tags::requested_role;
use buzz_nostr::event::Event;

/// What a change that would leave the channel without an owner is told.
pub const LAST_OWNER: &str =
    "the channel's last owner cannot be demoted or removed: make another member owner first";

/// A 9000: give the member the role it names, or make a newcomer a member. Returns
/// whether a row changed (a 9000 naming no role for a member changes nothing).
pub fn add_member(
    conn: &mut Conn<'_>,
    cid: i64,
    channel: &str,
    who: &str,
    event: &Event,
    now: i64,
) -> Result<bool, Reason> {
    // Checked before storage (`validate::check`): a refusal cannot reach this point.
    let asked = requested_role(event)?;
    let current = state::member_role(conn, cid, channel, who)?;
    let role = match (asked, current.as_deref()) {
        (None, Some(_)) => return Ok(false),
        (None, None) => "member",
        (Some(role), Some(held)) if role == held => return Ok(false),
        (Some(role), Some("owner")) => {
            keeps_another_owner(conn, cid, channel)?;
            role
        }
        (Some(role), _) => role,
    };
    state::set_member(conn, cid, channel, who, role, now)?;
    Ok(true)
}

/// A 9001 or a 9022: `who` leaves the channel, unless they are its last owner.
pub fn remove_member(
    conn: &mut Conn<'_>,
    cid: i64,
    channel: &str,
    who: &str,
) -> Result<(), Reason> {
    if state::member_role(conn, cid, channel, who)?.as_deref() == Some("owner") {
        keeps_another_owner(conn, cid, channel)?;
    }
    state::remove_member(conn, cid, channel, who)
}

/// Refuse unless the channel has an owner besides the one about to go. The channel row
/// is locked first, so two owners demoting each other from two relay processes run one
/// after the other and the second sees the first's change.
fn keeps_another_owner(conn: &mut Conn<'_>, cid: i64, channel: &str) -> Result<(), Reason> {
    state::lock_channel(conn, cid, channel)?;
    if state::count_role(conn, cid, channel, "owner")? < 2 {
        return Err(Reason::Restricted(LAST_OWNER.into()));
    }
    Ok(())
}
