//! The legacy oldest-first thread path (NIP-CW "Legacy Oldest-first Threads"): replies
//! to one root, `created_at ASC, id ASC`, optional aux closure, no bounds event and no
//! server-issued cursor — clients continue from their last loaded reply.
//!
//! The root decides the channel; a root in a channel the reader cannot read (or that
//! does not exist, or is not in the `#h` the request names) answers `[]`.

use crate::aux::{self, AuxCandidates, AuxLimit, PER_HOP_CAP};
use crate::page::reconstruct;
use crate::readers::Readable;
use crate::request::LegacyRequest;
use crate::rows::{self, ReplyScan};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::Services;
use buzz_nostr::event::Event;

pub(crate) async fn serve(
    services: &Services,
    ctx: &ConnCtx,
    request: &LegacyRequest,
) -> Result<Vec<Event>, Reason> {
    let community_id = ctx.community_id();
    let root = request.root.clone();
    let facts = services
        .store
        .read(move |mut conn| rows::event_facts(&mut conn, community_id, &root))
        .await?;
    let Some((_, Some(channel))) = facts else {
        return Ok(Vec::new());
    };
    if request.channel.as_ref().is_some_and(|c| *c != channel) {
        return Ok(Vec::new());
    }
    let wanted = vec![channel.clone()];
    let scope = services.access.scope_for(ctx, Some(wanted.clone())).await?;
    if !scope.has_channel(&channel) {
        return Ok(Vec::new());
    }
    let mut readable = Readable::from_scope(&scope, Some(&wanted));

    let request = request.clone();
    let now = services.clock.now_secs();
    let (replies, aux) = services
        .store
        .read(move |mut conn| {
            let scan = ReplyScan {
                community_id,
                channel: &channel,
                root: &request.root,
                // This path traverses thread metadata and never restricted rows by kind.
                kinds: None,
                max_depth: request.max_depth,
                take: i64::try_from(request.limit).unwrap_or(i64::MAX),
                now,
            };
            let replies = reconstruct(scan.oldest_first(&mut conn, &request.cursor)?);
            let aux = if request.include_aux {
                let mut targets = vec![request.root.clone()];
                targets.extend(replies.iter().map(|e| e.id.clone()));
                aux::scan(
                    &mut conn,
                    community_id,
                    &targets,
                    AuxLimit::PerHop(PER_HOP_CAP),
                    now,
                )?
            } else {
                AuxCandidates::default()
            };
            Ok((replies, aux))
        })
        .await?;
    readable
        .learn(&services.access, ctx, aux.channels())
        .await?;
    let aux = aux.into_events(&readable, &replies)?;
    let mut out = replies;
    out.extend(aux);
    Ok(out)
}
