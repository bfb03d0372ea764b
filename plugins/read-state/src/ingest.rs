//! Read state kept in step with ingest, inside the message's own transaction
//! (`Plugin::in_transaction`): it commits or rolls back with the message.
//!
//! - Posting marks read: the author's position moves through their own message in each
//!   scope it shows in (the timeline for a top-level message or broadcast reply, the
//!   thread for a reply).
//! - Following: replying follows the thread (even after an unfollow); a reply to your
//!   top-level message and any reply in a DM channel follow you unless you unfollowed
//!   (sticky); a mention follows the thread it is in or the thread rooted at it, and
//!   after an unfollow catches it up to just before itself. A new follow starts just
//!   before the message that caused it, so that message is unread.
//! - Mentions: one row per mentioned signer and scope, for exact counts.
//! - Joining a channel (9021, or 9000 adding someone new) starts it caught up: a
//!   whole-channel cut at the join, so followed threads from before bring back nothing.

use crate::frontiers::{self, Key, Upsert, TIMELINE};
use crate::scope;
use crate::sql::{first, Val, I64};
use buzz_core::channels::kinds::{is_conversation, ADD_MEMBER, JOIN};
use buzz_core::channels::validate::member_of;
use buzz_core::error::Reason;
use buzz_core::event::StoredEvent;
use buzz_core::plugin::Tx;
use buzz_core::store::{channel_state, Conn};
use std::collections::BTreeSet;

const MICROS: i64 = 1_000_000;

pub(crate) fn on_stored(tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
    let Some(channel) = stored.channel.as_deref() else {
        return Ok(());
    };
    let cid = tx.ctx.community_id;
    let event = &stored.event;
    match event.kind {
        JOIN => joined(tx.conn, cid, channel, &event.pubkey, stored.received_at),
        ADD_MEMBER => match member_of(event) {
            Some(member) => joined(tx.conn, cid, channel, member, stored.received_at),
            None => Ok(()),
        },
        kind if is_conversation(kind) => message(tx.conn, cid, channel, stored),
        _ => Ok(()),
    }
}

/// A membership that began with this event (not a role change or a repeated join)
/// starts the channel caught up.
fn joined(
    conn: &mut Conn<'_>,
    cid: i64,
    channel: &str,
    pubkey: &str,
    received_at: i64,
) -> Result<(), Reason> {
    let added: Option<I64> = first(
        conn,
        "SELECT added_at AS v FROM channel_members \
         WHERE community_id = ? AND channel_id = ? AND pubkey = ?",
        &[Val::I(cid), Val::T(channel), Val::T(pubkey)],
    )?;
    // Core writes `added_at` (seconds of this event's arrival) only for a new member.
    if added.map(|a| a.v) != Some(received_at.div_euclid(MICROS)) {
        return Ok(());
    }
    let key = Key {
        community_id: cid,
        pubkey,
        channel_id: channel,
        root_id: TIMELINE,
    };
    frontiers::upsert(conn, key, received_at, received_at, Upsert::Advance)
}

fn message(
    conn: &mut Conn<'_>,
    cid: i64,
    channel: &str,
    stored: &StoredEvent,
) -> Result<(), Reason> {
    let event = &stored.event;
    let Some(msg) = scope::message(conn, cid, &event.id)? else {
        // No thread metadata: core did not take it as a conversation message.
        return Ok(());
    };
    let at = stored.received_at;
    let before = at - 1;
    let author = event.pubkey.as_str();

    // Posting marks read in each scope the message shows in.
    if msg.in_timeline() {
        frontiers::upsert(
            conn,
            scoped(cid, channel, author, TIMELINE),
            at,
            0,
            Upsert::Advance,
        )?;
    }
    let root = msg.root_id.clone();
    if let Some(root) = &root {
        frontiers::upsert(
            conn,
            scoped(cid, channel, author, root),
            at,
            0,
            Upsert::AdvanceAndFollow,
        )?;
    }

    // Mentions: counted per scope, and they follow.
    let mentioned: BTreeSet<&str> = event
        .tag_values("p")
        .filter(|p| is_hex64(p) && *p != author)
        .collect();
    for &p in &mentioned {
        if msg.in_timeline() {
            frontiers::add_mention(conn, scoped(cid, channel, p, TIMELINE), at, &event.id)?;
        }
        match &root {
            Some(root) => {
                frontiers::add_mention(conn, scoped(cid, channel, p, root), at, &event.id)?;
                frontiers::upsert(
                    conn,
                    scoped(cid, channel, p, root),
                    before,
                    0,
                    Upsert::Mention,
                )?;
            }
            // A top-level message: the thread rooted at it.
            None => frontiers::upsert(
                conn,
                scoped(cid, channel, p, &event.id),
                before,
                0,
                Upsert::Mention,
            )?,
        }
    }

    let Some(root) = root else { return Ok(()) };
    // Someone replied to your top-level message.
    if let Some(root_msg) = scope::message(conn, cid, &root)? {
        if root_msg.pubkey != author && !mentioned.contains(root_msg.pubkey.as_str()) {
            frontiers::upsert(
                conn,
                scoped(cid, channel, &root_msg.pubkey, &root),
                before,
                0,
                Upsert::IfAbsent,
            )?;
        }
    }
    // In a DM, any member's reply follows every member.
    let dm = channel_state::load_channel(conn, cid, channel)?
        .is_some_and(|row| row.channel_type == "dm");
    if dm {
        for (member, _role) in channel_state::members(conn, cid, channel)? {
            if member != author && !mentioned.contains(member.as_str()) {
                frontiers::upsert(
                    conn,
                    scoped(cid, channel, &member, &root),
                    before,
                    0,
                    Upsert::IfAbsent,
                )?;
            }
        }
    }
    Ok(())
}

/// The scope `(channel, root)` of `pubkey`.
fn scoped<'k>(cid: i64, channel: &'k str, pubkey: &'k str, root_id: &'k str) -> Key<'k> {
    Key {
        community_id: cid,
        pubkey,
        channel_id: channel,
        root_id,
    }
}

/// 64 lowercase hex digits: a pubkey or event id.
pub(crate) fn is_hex64(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
