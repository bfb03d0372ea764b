//! Who may upload where and who may read a blob, asked of core's one access service at
//! every request (its cache follows every join, removal, ban and channel deletion before
//! their `OK`), so a change of access is a change of what the next request gets.
//!
//! A blob may be owned by several members, each upload binding it to a channel or to
//! none; it is readable by whoever one of those bindings admits: a channel binding its
//! channel's readers, no binding the community's members. Never anyone anonymous.

use crate::error::MediaError;
use buzz_core::ctx::ConnCtx;
use buzz_core::plugin::Services;
use buzz_nostr::event::Event;

/// The kind whose posting an upload into a channel stands for: a chat message there.
const MESSAGE_KIND: u32 = 9;

/// May `pubkey` upload a blob bound to `channel` (or unbound) in `ctx`'s community?
/// Unbound: a member in good standing. Bound: someone who may read the channel and
/// post a message in it. A channel that does not exist and one the caller cannot see
/// are refused alike.
pub(crate) async fn may_upload(
    services: &Services,
    ctx: &ConnCtx,
    pubkey: &str,
    channel: Option<&str>,
) -> Result<(), MediaError> {
    let ctx = as_caller(ctx, pubkey);
    let scope = services
        .access
        .scope_for(
            &ctx,
            Some(channel.map(|c| vec![c.to_owned()]).unwrap_or_default()),
        )
        .await?;
    let Some(channel) = channel else {
        if scope.community_wide {
            return Ok(());
        }
        return Err(MediaError::Forbidden(
            "not a member of this community".into(),
        ));
    };
    let cannot = || MediaError::Forbidden("cannot post in that channel".into());
    if !scope.has_channel(channel) {
        return Err(cannot());
    }
    // The policy decides posting from the event's facts; this one is never stored, so
    // it carries no id or signature.
    let message = Event {
        id: String::new(),
        pubkey: pubkey.to_owned(),
        created_at: services.clock.now_secs(),
        kind: MESSAGE_KIND,
        tags: vec![vec!["h".to_owned(), channel.to_owned()]],
        content: String::new(),
        sig: String::new(),
    };
    services
        .access
        .check_write(&ctx, &message)
        .await
        .map_err(|_| cannot())
}

/// May `pubkey` read a blob whose owners bound it to `bindings` (`None`: unbound)?
/// Any refusal of the access service (a ban, a failure) reads as "no": the caller then
/// gets the 404 every unreadable blob gets.
pub(crate) async fn may_read(
    services: &Services,
    ctx: &ConnCtx,
    pubkey: &str,
    bindings: &[Option<String>],
) -> bool {
    let ctx = as_caller(ctx, pubkey);
    let channels: Vec<String> = bindings.iter().flatten().cloned().collect();
    let Ok(scope) = services.access.scope_for(&ctx, Some(channels)).await else {
        return false;
    };
    bindings.iter().any(|b| match b {
        None => scope.community_wide,
        Some(channel) => scope.has_channel(channel),
    })
}

/// The request's context with the caller the media auth named (core's routes are
/// `Public`: it authenticated no one).
fn as_caller(ctx: &ConnCtx, pubkey: &str) -> ConnCtx {
    ConnCtx {
        pubkey: Some(pubkey.to_owned()),
        ..ctx.clone()
    }
}
