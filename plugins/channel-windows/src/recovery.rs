//! `resolve_thread_roots`: summaries of the threads that own some replies, found from
//! retained thread metadata so that it works after the replies were deleted (NIP-CW
//! "Recovering summaries after deletion").
//!
//! Metadata rows are kept for soft-deleted events (flagged `deleted`), so a deleted
//! reply still names its root. The answer is one `39005` per distinct owning root —
//! zero counts included — and nothing about the targets themselves (no content, author
//! or signature). Missing and non-reply targets, and roots or targets outside the
//! reader's channels, add nothing. No bounds event.
//!
//! Reads go to the primary database (this relay has no replicas), so recovery never
//! waits for replay.

use crate::overlays::OverlaySigner;
use crate::request::ResolveRequest;
use crate::rows;
use crate::summary::{self, ThreadSummary};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::Services;
use buzz_nostr::event::Event;
use std::collections::HashSet;

pub(crate) async fn serve(
    services: &Services,
    ctx: &ConnCtx,
    request: &ResolveRequest,
) -> Result<Vec<Event>, Reason> {
    let scope = services
        .access
        .scope_for(ctx, Some(vec![request.channel.clone()]))
        .await?;
    if !scope.has_channel(&request.channel) {
        return Ok(Vec::new());
    }
    let community_id = ctx.community_id();
    let request = request.clone();
    let summaries: Vec<(String, ThreadSummary)> = services
        .store
        .read(move |mut conn| {
            let targets = rows::thread_rows(&mut conn, community_id, &request.targets)?;
            // Distinct roots, in the order the request named their replies.
            let mut roots: Vec<String> = Vec::new();
            for id in &request.targets {
                let owner = targets
                    .iter()
                    .find(|t| &t.event_id == id)
                    .filter(|t| t.channel_id == request.channel && t.depth >= 1)
                    .and_then(|t| t.root_id.clone());
                if let Some(root) = owner {
                    if !roots.contains(&root) {
                        roots.push(root);
                    }
                }
            }
            let root_rows = rows::thread_rows(&mut conn, community_id, &roots)?;
            let mut out = Vec::new();
            let mut done = HashSet::new();
            for root in &roots {
                let Some(row) = root_rows.iter().find(|r| &r.event_id == root) else {
                    continue;
                };
                // The root's own channel must be readable too (it is the reply's
                // channel unless metadata was written by something other than ingest).
                if row.channel_id != request.channel || !done.insert(root.clone()) {
                    continue;
                }
                out.push((row.channel_id.clone(), summary::summary(&mut conn, row)?));
            }
            Ok(out)
        })
        .await?;
    let signer = OverlaySigner {
        keys: &services.relay_keys,
        now: services.clock.now_secs(),
    };
    Ok(summaries
        .iter()
        .map(|(channel, summary)| signer.summary(channel, summary))
        .collect())
}
