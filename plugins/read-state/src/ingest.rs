//! Read state kept in step with ingest, inside the message's own transaction
//! (`Plugin::on_event_stored`): it commits or rolls back with the message.
//!
//! - Posting marks read: the author's position moves through their own message in each
//!   scope it shows in (the timeline for a top-level message or broadcast reply, the
//!   thread for a reply).
//! - Following: replying follows the thread (even after an unfollow); a reply to your
//!   top-level message and any reply in a DM channel follow you unless you unfollowed
//!   (sticky); a mention follows the thread it is in or the thread rooted at it, and
//!   after an unfollow catches it up to just before itself. A new follow starts just
//!   before the message that caused it, so that message is unread.
//! - Mentions: one row per mentioned signer and scope, for exact counts. A message's
//!   mentions are the first `max_message_mentions` distinct p-tagged channel members in
//!   tag order (`mentions.rs`).
//! - Thread tips: a reply or a deletion updates the tip on every following row of its
//!   thread (`tips.rs`), which the sidebar walks.
//! - Joining a channel (9021, or 9000 adding someone new) starts it caught up: a
//!   whole-channel cut at the join, so followed threads from before bring back nothing
//!   (written into their positions too).

use crate::frontiers::{self, Key, Upsert, TIMELINE};
use crate::mentions;
use crate::scope::{self, Skew};
use crate::sql::{first, Val, I64};
use crate::tips::{self, Tip};
use buzz_core::error::Reason;
use buzz_core::plugin::Tx;
use buzz_core::store::threads::Placed;
use buzz_core::store::{channel_state, Conn};
use buzz_core::stored::StoredEvent;
use buzz_nostr::channel_tags::{member_of, target_id};
use buzz_nostr::event::Event;
use buzz_nostr::kinds::{is_conversation, ADD_MEMBER, AUTHOR_DELETE, JOIN, MODERATE_REMOVE};
use std::collections::BTreeSet;

const MICROS: i64 = 1_000_000;

/// What ingest is bounded by (from the plugin's config and `[limits]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Mentions one message makes at most (`max_message_mentions`).
    pub max_mentions: usize,
    pub skew: Skew,
}

pub(crate) fn on_stored(
    tx: &mut Tx<'_, '_>,
    stored: &StoredEvent,
    bounds: Bounds,
) -> Result<(), Reason> {
    let cid = tx.ctx.community_id;
    let event = &stored.event;
    // A deletion may name messages of any channel (a kind 5 needs no `h` tag).
    if event.kind == AUTHOR_DELETE || event.kind == MODERATE_REMOVE {
        return deleted(tx.conn, cid, event, bounds.skew);
    }
    let Some(channel) = stored.channel.as_deref() else {
        return Ok(());
    };
    let at = stored.received_at;
    match event.kind {
        JOIN => joined(tx.conn, cid, channel, &event.pubkey, at),
        ADD_MEMBER => match member_of(event) {
            Some(member) => joined(tx.conn, cid, channel, member, at),
            None => Ok(()),
        },
        kind if is_conversation(kind) => match tx.placed {
            Some(placed) => message(tx.conn, cid, channel, stored, placed, bounds),
            // No thread metadata: core did not take it as a conversation message.
            None => Ok(()),
        },
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
    frontiers::upsert(
        conn,
        key,
        received_at,
        received_at,
        Upsert::Advance,
        Tip::default(),
    )?;
    frontiers::raise_threads(conn, cid, pubkey, Some(channel), received_at)
}

fn message(
    conn: &mut Conn<'_>,
    cid: i64,
    channel: &str,
    stored: &StoredEvent,
    msg: &Placed,
    bounds: Bounds,
) -> Result<(), Reason> {
    let event = &stored.event;
    let at = stored.received_at;
    let before = at - 1;
    let author = event.pubkey.as_str();
    let root = msg.root_id.clone();
    // The thread this reply is in, as core left it with the reply counted.
    let root_msg = match &root {
        Some(root) => scope::message(conn, cid, root)?,
        None => None,
    };
    let tip = root_msg.as_ref().map(Tip::after_reply).unwrap_or_default();

    // Posting marks read in each scope the message shows in.
    if msg.is_top_level() {
        frontiers::upsert(
            conn,
            scoped(cid, channel, author, TIMELINE),
            at,
            0,
            Upsert::Advance,
            Tip::default(),
        )?;
    }
    if let Some(root) = &root {
        frontiers::upsert(
            conn,
            scoped(cid, channel, author, root),
            at,
            0,
            Upsert::AdvanceAndFollow,
            tip,
        )?;
    }

    // Mentions (bounded: `mentions.rs`): counted per scope, and they follow.
    let mentioned = mentions::select(conn, cid, channel, event, bounds.max_mentions)?;
    for p in &mentioned {
        if msg.is_top_level() {
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
                    tip,
                )?;
            }
            // A top-level message: the thread rooted at it (no reply yet).
            None => frontiers::upsert(
                conn,
                scoped(cid, channel, p, &event.id),
                before,
                0,
                Upsert::Mention,
                Tip::default(),
            )?,
        }
    }

    let Some(root) = root else { return Ok(()) };
    // Someone replied to your top-level message.
    if let Some(root_msg) = &root_msg {
        if root_msg.pubkey != author && !mentioned.contains(&root_msg.pubkey) {
            frontiers::upsert(
                conn,
                scoped(cid, channel, &root_msg.pubkey, &root),
                before,
                0,
                Upsert::IfAbsent,
                tip,
            )?;
        }
    }
    // In a DM, any member's reply follows every member.
    let dm = channel_state::load_channel(conn, cid, channel)?
        .is_some_and(|row| row.channel_type == "dm");
    if dm {
        for (member, _role) in channel_state::members(conn, cid, channel)? {
            if member != author && !mentioned.contains(&member) {
                frontiers::upsert(
                    conn,
                    scoped(cid, channel, &member, &root),
                    before,
                    0,
                    Upsert::IfAbsent,
                    tip,
                )?;
            }
        }
    }
    // Every row following the thread (those above included) takes the new tip.
    tips::note_reply(conn, cid, &root, tip.latest_at, at)
}

/// A deletion (kind 5 by the author, 9005 by a moderator): each thread that lost a reply
/// gets its tip recomputed on its followers' rows, so a thread whose only news was
/// deleted leaves the sidebar walk's index.
fn deleted(conn: &mut Conn<'_>, cid: i64, event: &Event, skew: Skew) -> Result<(), Reason> {
    let targets: BTreeSet<&str> = if event.kind == MODERATE_REMOVE {
        target_id(event).into_iter().collect()
    } else {
        event.tag_values("e").collect()
    };
    let mut roots = BTreeSet::new();
    for id in targets.into_iter().filter(|id| is_hex64(id)) {
        if let Some(msg) = scope::message(conn, cid, id)? {
            if let (Some(_), Some(root)) = (msg.deleted_at, msg.root_id) {
                roots.insert(root);
            }
        }
    }
    for root in roots {
        if let Some(root_msg) = scope::message(conn, cid, &root)? {
            let tip = Tip::now(conn, cid, &root_msg, skew)?;
            tips::set(conn, cid, &root, tip)?;
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
