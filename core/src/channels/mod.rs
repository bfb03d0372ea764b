//! Channels (NIP-29 shape), community membership and sanctions, and thread metadata —
//! everything core keeps in step with stored events, inside their transaction.
//!
//! [`validate::check`] runs before storage (pure, structural); [`apply`] runs in the
//! write transaction after the event row is stored and may still refuse the event
//! (which rolls it back).

pub mod group_state;
pub mod roles;
pub mod validate;

use crate::ctx::WriteCtx;
use crate::error::Reason;
use crate::store::channel_state as state;
use crate::store::community_standing as standing;
use crate::store::threads as thread_rows;
use crate::store::{apply_deletion, event_home, soft_delete_event, Conn, GroupWrites};
use crate::stored::StoredEvent;
use buzz_nostr::channel_tags::{member_of, target_id};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::kinds::*;
use group_state::Changed;
use std::sync::Arc;

/// What [`apply`] did for one event.
#[derive(Debug, Default)]
pub struct Applied {
    /// Relay-signed events produced by the change, for live fan-out after the commit.
    pub produced: Vec<Arc<StoredEvent>>,
    /// Where a conversation message was placed in its thread (its metadata row, just
    /// written): hooks that need it are handed it instead of reading the row back.
    pub placed: Option<thread_rows::Placed>,
}

impl From<Vec<Arc<StoredEvent>>> for Applied {
    fn from(produced: Vec<Arc<StoredEvent>>) -> Self {
        Applied {
            produced,
            placed: None,
        }
    }
}

/// Keep channel, community and thread state in step with `stored`.
pub fn apply(
    conn: &mut Conn<'_>,
    writes: &mut GroupWrites,
    wctx: &WriteCtx,
    stored: &StoredEvent,
    relay_keys: &Keys,
) -> Result<Applied, Reason> {
    let event = &stored.event;
    let cid = wctx.community_id;
    let now = wctx.now_micros.div_euclid(1_000_000);
    let channel = event.channel_id();
    let refresh = |conn: &mut Conn<'_>, ch: &str, what: Changed| {
        group_state::refresh(conn, cid, ch, relay_keys, wctx.now_micros, what)
    };

    match (event.kind, channel) {
        (CREATE_CHANNEL, Some(ch)) => {
            state::create_channel(conn, cid, ch, event)?;
            return refresh(conn, ch, Changed::All).map(Applied::from);
        }
        (AUTHOR_DELETE, _) => {
            author_delete(conn, cid, event, now)?;
            return Ok(Applied::default());
        }
        _ => {}
    }
    if COMMUNITY_ADMIN.contains(&event.kind) {
        // The authenticated writer: the author itself, or the owner a NIP-86 call was
        // verified for (the relay signs that event on the owner's behalf).
        let by = wctx.pubkey.as_deref().unwrap_or(&event.pubkey);
        community_admin(conn, cid, event, by, now)?;
        return Ok(Applied::default());
    }
    let Some(ch) = channel else {
        return Ok(Applied::default());
    };
    // Every other channel-scoped event needs a live channel.
    writes.live_channel(conn, cid, ch, now)?;
    let member = member_of(event);
    let produced = match event.kind {
        EDIT_CHANNEL => {
            state::edit_channel(conn, cid, ch, event)?;
            refresh(conn, ch, Changed::Metadata)
        }
        ADD_MEMBER => {
            let who = member.unwrap_or_default();
            if roles::add_member(conn, cid, ch, who, event, now)? {
                refresh(conn, ch, Changed::Members)
            } else {
                Ok(Vec::new())
            }
        }
        REMOVE_MEMBER => {
            roles::remove_member(conn, cid, ch, member.unwrap_or_default())?;
            refresh(conn, ch, Changed::Members)
        }
        JOIN => {
            // NIP-29: a join by a member is refused with `duplicate:` (and changes nothing).
            if state::member_role(conn, cid, ch, &event.pubkey)?.is_some() {
                return Err(Reason::Duplicate(ALREADY_MEMBER.into()));
            }
            state::set_member(conn, cid, ch, &event.pubkey, "member", now)?;
            let mut produced = refresh(conn, ch, Changed::Members)?;
            if !wctx.imported {
                produced.extend(membership_record(
                    conn, wctx, relay_keys, ADD_MEMBER, ch, event,
                )?);
            }
            Ok(produced)
        }
        LEAVE => {
            roles::remove_member(conn, cid, ch, &event.pubkey)?;
            let mut produced = refresh(conn, ch, Changed::Members)?;
            if !wctx.imported {
                produced.extend(membership_record(
                    conn,
                    wctx,
                    relay_keys,
                    REMOVE_MEMBER,
                    ch,
                    event,
                )?);
            }
            Ok(produced)
        }
        DELETE_CHANNEL => {
            state::delete_channel(conn, cid, ch, now)?;
            Ok(Vec::new())
        }
        MODERATE_REMOVE => {
            let target = target_id(event).unwrap_or_default();
            require_in_channel(conn, cid, target, ch)?;
            soft_delete(conn, cid, target, now)?;
            Ok(Vec::new())
        }
        k if TARGETING.contains(&k) => {
            let target = target_id(event).unwrap_or_default();
            let author = require_in_channel(conn, cid, target, ch)?;
            if k == EDIT_MESSAGE && author != event.pubkey {
                return Err(Reason::Restricted(ONLY_THE_AUTHOR_EDITS.into()));
            }
            Ok(Vec::new())
        }
        k if CONVERSATION.contains(&k) => {
            let placed = thread_rows::record(conn, writes, cid, event, ch)?;
            thread_rows::record_arrival(conn, writes, cid, &placed, ch, wctx.now_micros)?;
            return Ok(Applied {
                produced: Vec::new(),
                placed: Some(placed),
            });
        }
        _ => Ok(Vec::new()),
    }?;
    Ok(Applied::from(produced))
}

/// The relay's own 9000 after a join, or 9001 after a leave, naming the member: NIP-29
/// clients read membership from the latest of these ("the relay will automatically
/// issue a kind:9001 in response"). Stored in the request's transaction, scoped to the
/// channel; delivered live after the commit like the group state. An import takes
/// these records from its file instead (`WriteCtx::imported`).
fn membership_record(
    conn: &mut Conn<'_>,
    wctx: &WriteCtx,
    relay_keys: &Keys,
    kind: u32,
    channel: &str,
    request: &Event,
) -> Result<Option<Arc<StoredEvent>>, Reason> {
    let mut p = vec!["p".to_owned(), request.pubkey.clone()];
    if kind == ADD_MEMBER {
        p.push("member".to_owned());
    }
    let tags = vec![vec!["h".to_owned(), channel.to_owned()], p];
    let record = relay_keys.sign(kind, tags, "", wctx.now_micros.div_euclid(1_000_000));
    let outcome = crate::store::insert_event(
        conn,
        wctx.community_id,
        &record,
        Some(channel),
        wctx.now_micros,
    )?;
    // The same record in the same second (join, leave, join) is already stored.
    Ok(
        matches!(outcome, crate::store::InsertOutcome::Stored { .. }).then(|| {
            Arc::new(StoredEvent {
                event: record,
                community_id: wctx.community_id,
                channel: Some(channel.to_owned()),
                received_at: wctx.now_micros,
            })
        }),
    )
}

/// The target of a reaction, edit or removal must be a stored event of the same channel.
/// Returns its author.
fn require_in_channel(
    conn: &mut Conn<'_>,
    cid: i64,
    target: &str,
    channel: &str,
) -> Result<String, Reason> {
    match event_home(conn, cid, target)? {
        None => Err(Reason::invalid("target event not found")),
        Some((ch, _)) if ch.as_deref() != Some(channel) => Err(Reason::invalid(
            "target event belongs to a different channel",
        )),
        Some((_, author)) => Ok(author),
    }
}

/// What an edit of someone else's message is told. Only readers of the channel get this
/// far (`access/unseen.rs` answers the others as if the target were missing), so it tells
/// nothing they could not read.
pub const ONLY_THE_AUTHOR_EDITS: &str = "only a message's author may edit it";

/// Moderator removal: soft-delete `target` whoever wrote it.
fn soft_delete(conn: &mut Conn<'_>, cid: i64, target: &str, now: i64) -> Result<(), Reason> {
    soft_delete_event(conn, cid, target, now)?;
    thread_rows::on_deleted(conn, cid, target)
}

/// Kind 5: NIP-09 deletion by the author. With an `h` tag, every target must be in that
/// channel.
fn author_delete(conn: &mut Conn<'_>, cid: i64, event: &Event, now: i64) -> Result<(), Reason> {
    if let Some(ch) = event.channel_id() {
        for target in event.tag_values("e") {
            require_in_channel(conn, cid, target, ch)?;
        }
    }
    for row in apply_deletion(conn, cid, event, now)? {
        thread_rows::on_deleted(conn, cid, &row.id)?;
    }
    Ok(())
}

/// 9040–9044: community membership, bans and timeouts.
fn community_admin(
    conn: &mut Conn<'_>,
    cid: i64,
    event: &Event,
    by: &str,
    now: i64,
) -> Result<(), Reason> {
    let who = member_of(event).unwrap_or_default();
    let sanction = |kind, until| standing::Sanction {
        pubkey: who,
        kind,
        until,
        reason: event.tag_value("reason").unwrap_or_default(),
        by,
        at: now,
    };
    match event.kind {
        COMMUNITY_ADD_MEMBER => standing::add_community_member(conn, cid, who, by, now),
        COMMUNITY_REMOVE_MEMBER => standing::remove_community_member(conn, cid, who),
        BAN => standing::set_sanction(conn, cid, &sanction("ban", None)),
        UNBAN => standing::remove_sanction(conn, cid, who, "ban"),
        TIMEOUT => {
            let until = event
                .tag_value("until")
                .and_then(|u| u.parse::<i64>().ok())
                .unwrap_or(0);
            if until <= now {
                standing::remove_sanction(conn, cid, who, "timeout")
            } else {
                standing::set_sanction(conn, cid, &sanction("timeout", Some(until)))
            }
        }
        _ => Ok(()),
    }
}
