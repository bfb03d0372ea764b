//! Write paths must not be existence oracles: an event or channel the writer cannot
//! read answers exactly like a missing one.
//!
//! The in-transaction checks (`channels::apply`, `store::threads::record`) give precise
//! refusals ("target event belongs to a different channel", "channel already exists"),
//! right for readers and wrong for anyone else. Read access is a policy decision, which
//! cannot run inside the storage transaction, so it is made here, just before it: when
//! a write points into a channel its author cannot read, it is refused now with the
//! text a random id gets. Readers go on to the precise checks. It is the access
//! service's: what it decides is who may see which rows.

use super::AccessService;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::store::channel_state::load_channel;
use crate::store::{event_channel, Store};
use buzz_nostr::channel_tags::target_id;
use buzz_nostr::event::Event;
use buzz_nostr::kinds::{AUTHOR_DELETE, CONVERSATION, CREATE_CHANNEL, MODERATE_REMOVE, TARGETING};
use buzz_nostr::threads::reply_parent;

/// What a target that does not exist gets (`channels::apply`).
pub const TARGET_NOT_FOUND: &str = "target event not found";
/// What a reply to a parent that does not exist gets (`store::threads::record`).
pub const PARENT_NOT_FOUND: &str = "reply parent not found";
/// What creating a channel whose id is taken by a channel the author cannot read gets.
/// A free id would be accepted, so a taken one cannot look free; this text says no more
/// than that (not that a channel exists, nor anything about it).
pub const ID_UNAVAILABLE: &str = "channel id is not available";

/// The events `event` points at inside its channel, each with the text its absence
/// gets. Empty for events that point at nothing.
fn pointed_at(event: &Event) -> Vec<(&str, &'static str)> {
    if event.channel_id().is_none() {
        return Vec::new();
    }
    match event.kind {
        k if k == MODERATE_REMOVE || TARGETING.contains(&k) => target_id(event)
            .map(|id| vec![(id, TARGET_NOT_FOUND)])
            .unwrap_or_default(),
        AUTHOR_DELETE => event
            .tag_values("e")
            .map(|id| (id, TARGET_NOT_FOUND))
            .collect(),
        k if CONVERSATION.contains(&k) => reply_parent(event)
            .map(|id| vec![(id, PARENT_NOT_FOUND)])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Refuse `event` as if its target were missing when its author cannot read it.
pub async fn refuse_unreadable(
    store: &Store,
    access: &AccessService,
    ctx: &ConnCtx,
    event: &Event,
) -> Result<(), Reason> {
    let Some(channel) = event.channel_id() else {
        return Ok(());
    };
    let cid = ctx.community_id();
    if event.kind == CREATE_CHANNEL {
        let id = channel.to_owned();
        let taken = store
            .read(move |mut conn| load_channel(&mut conn, cid, &id))
            .await?
            .is_some();
        if taken && !readable(access, ctx, Some(channel)).await? {
            return Err(Reason::invalid(ID_UNAVAILABLE));
        }
        return Ok(());
    }
    let targets = pointed_at(event);
    if targets.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = targets.iter().map(|(id, _)| (*id).to_owned()).collect();
    let homes = store
        .read(move |mut conn| {
            ids.iter()
                .map(|id| event_channel(&mut conn, cid, id))
                .collect::<Result<Vec<_>, Reason>>()
        })
        .await?;
    for ((_, missing), home) in targets.iter().zip(homes) {
        // Missing targets and targets in this channel are `apply`'s to answer.
        let Some(home) = home else { continue };
        if home.as_deref() == Some(channel) {
            continue;
        }
        if !readable(access, ctx, home.as_deref()).await? {
            return Err(Reason::invalid(*missing));
        }
    }
    Ok(())
}

/// May `ctx` read rows of `channel` (`None`: community-wide rows)?
async fn readable(
    access: &AccessService,
    ctx: &ConnCtx,
    channel: Option<&str>,
) -> Result<bool, Reason> {
    // Only the one channel is evaluated (none for community-wide rows).
    let wanted = channel.map(|c| vec![c.to_owned()]).unwrap_or_default();
    let scope = access.scope_for(ctx, Some(wanted)).await?;
    Ok(match channel {
        Some(c) => scope.has_channel(c),
        None => scope.community_wide,
    })
}
