//! Channel mode (`top_level: true`): one page of a channel's top-level timeline.
//!
//! Access first — an inaccessible or missing channel answers `[]`, no rows and no
//! overlays, exactly like any other read of it. Then, in one read: the `limit + 1`
//! probe, the page cut, the summaries and the aux closure of the served rows. Wire
//! order: rows, aux, summaries, exactly one `39006` bounds.

use crate::aux::{self, AuxCandidates, AuxLimit, PER_HOP_CAP};
use crate::overlays::OverlaySigner;
use crate::page::Page;
use crate::readers::Readable;
use crate::request::ChannelRequest;
use crate::rows;
use crate::summary::{self, ThreadSummary};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::Services;
use buzz_core::store::threads::ThreadRow;
use buzz_core::store::Conn;
use buzz_nostr::event::Event;
use std::collections::HashMap;

/// What one read produced for a channel window.
struct Built {
    page: Page,
    summaries: Vec<ThreadSummary>,
    aux: AuxCandidates,
}

pub(crate) async fn serve(
    services: &Services,
    ctx: &ConnCtx,
    request: &ChannelRequest,
) -> Result<Vec<Event>, Reason> {
    let wanted = vec![request.channel.clone()];
    let scope = services.access.scope_for(ctx, Some(wanted.clone())).await?;
    if !scope.has_channel(&request.channel) {
        return Ok(Vec::new());
    }
    let mut readable = Readable::from_scope(&scope, Some(&wanted));
    let community_id = ctx.community_id();
    let now = services.clock.now_secs();
    let built = {
        let request = request.clone();
        services
            .store
            .read(move |mut conn| build(&mut conn, community_id, &request, now))
            .await?
    };
    readable
        .learn(&services.access, ctx, built.aux.channels())
        .await?;
    let aux = built.aux.into_events(&readable, &built.page.rows)?;

    let signer = OverlaySigner {
        keys: &services.relay_keys,
        now: services.clock.now_secs(),
    };
    let bounds = signer.channel_bounds(
        &request.channel,
        request.cursor.as_ref(),
        built.page.next_cursor.as_ref(),
    );
    let mut out = built.page.rows;
    out.extend(aux);
    out.extend(
        built
            .summaries
            .iter()
            .map(|s| signer.summary(&request.channel, s)),
    );
    out.push(bounds);
    Ok(out)
}

fn build(
    conn: &mut Conn<'_>,
    community_id: i64,
    request: &ChannelRequest,
    now: i64,
) -> Result<Built, Reason> {
    let probe = rows::channel_rows(
        conn,
        community_id,
        &request.channel,
        request.kinds.as_deref(),
        request.cursor.as_ref(),
        i64::try_from(request.limit + 1).unwrap_or(i64::MAX),
        now,
    )?;
    let page = Page::from_probe(probe, request.limit);
    let ids = page.row_ids();
    let summaries = if request.include_summaries {
        summaries(conn, community_id, &ids)?
    } else {
        Vec::new()
    };
    let aux = if request.include_aux {
        aux::scan(conn, community_id, &ids, AuxLimit::PerHop(PER_HOP_CAP), now)?
    } else {
        AuxCandidates::default()
    };
    Ok(Built {
        page,
        summaries,
        aux,
    })
}

/// One summary per row that has at least one reply, in row order.
///
/// Thread roots (depth 0, the common case) share one participants query; a broadcast
/// reply's subtree is summarized by the per-event summary (`summary.rs`).
fn summaries(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<Vec<ThreadSummary>, Reason> {
    let mut with_replies: HashMap<String, ThreadRow> = rows::thread_rows(conn, community_id, ids)?
        .into_iter()
        .filter(|t| t.reply_count > 0 || t.descendant_count > 0)
        .map(|t| (t.event_id.clone(), t))
        .collect();
    let roots: Vec<String> = with_replies
        .values()
        .filter(|t| t.depth == 0)
        .map(|t| t.event_id.clone())
        .collect();
    let mut authors: HashMap<String, Vec<(i64, String)>> = HashMap::new();
    for found in rows::root_participants(conn, community_id, &roots)? {
        if let (Some(root), Some(newest)) = (found.root, found.newest) {
            authors
                .entry(root)
                .or_default()
                .push((newest, found.author));
        }
    }
    let mut out = Vec::new();
    for id in ids {
        let Some(row) = with_replies.remove(id) else {
            continue;
        };
        if row.depth != 0 {
            out.push(summary::summary(conn, &row)?);
            continue;
        }
        // Most recent first; equal times by pubkey, as the per-event summary orders them.
        let mut list = authors.remove(id).unwrap_or_default();
        list.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        out.push(ThreadSummary {
            event_id: row.event_id,
            reply_count: row.reply_count,
            descendant_count: row.descendant_count,
            last_reply_at: row.last_reply_at,
            participants: list
                .into_iter()
                .take(usize::try_from(summary::MAX_PARTICIPANTS).unwrap_or(10))
                .map(|(_, pubkey)| pubkey)
                .collect(),
        });
    }
    Ok(out)
}
