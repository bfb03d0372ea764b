//! Thread mode (`thread_window: true`): newest-first pages of one root's replies, each
//! answered with exactly one request-bound `39007`.
//!
//! All thread windows of a query form one [`ThreadBatch`]: one budget [`Meter`], one
//! access scope taken before anything is built and taken again after everything is
//! built. If the reader's accessible-channel set changed in between, the whole batch is
//! discarded with a retryable `503` — a page built under rights the reader no longer has
//! must not be released (NIP-CW "Relay Processing" step 5).

use crate::aux::{self, AuxCandidates, AuxLimit};
use crate::binding::ThreadBinding;
use crate::budget::{Meter, ThreadBudgets};
use crate::overlays::OverlaySigner;
use crate::page::Page;
use crate::plugin::AccessRefreshHook;
use crate::readers::{same_access, Readable};
use crate::request::ThreadRequest;
use crate::rows::{self, ReplyScan};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::Services;
use buzz_core::store::{Conn, Scope};
use buzz_nostr::event::Event;
use buzz_nostr::kinds::CONVERSATION;
use std::future::Future;
use std::sync::Arc;

/// The thread windows of one query, built under one budget and one access decision.
pub(crate) struct ThreadBatch<'a> {
    services: &'a Services,
    ctx: &'a ConnCtx,
    meter: Arc<Meter>,
    /// The reader's full scope when the batch started; compared again at the end.
    scope: Scope,
    readable: Readable,
}

/// What one read produced for a thread window whose root is valid.
struct Built {
    page: Page,
    aux: AuxCandidates,
}

impl<'a> ThreadBatch<'a> {
    pub(crate) async fn open(
        services: &'a Services,
        ctx: &'a ConnCtx,
        budgets: ThreadBudgets,
    ) -> Result<ThreadBatch<'a>, Reason> {
        let meter = Arc::new(Meter::start(budgets));
        let scope = within(&meter, services.access.read_scope(ctx)).await?;
        let readable = Readable::from_scope(&scope, None);
        Ok(ThreadBatch {
            services,
            ctx,
            meter,
            scope,
            readable,
        })
    }

    /// Build one window: replies, aux, bounds — or nothing for an inaccessible channel
    /// or an invalid root.
    pub(crate) async fn window(&self, request: &ThreadRequest) -> Result<Vec<Event>, Reason> {
        if !self.readable.can_read(Some(&request.channel)) {
            return Ok(Vec::new());
        }
        let community_id = self.ctx.community_id();
        let now = self.services.clock.now_secs();
        let built = {
            let request = request.clone();
            let meter = self.meter.clone();
            // The deadline reaches into the database: each statement is bounded by the
            // time left when the read began (PostgreSQL cancels it), so a window past its
            // deadline does not keep a connection busy after the 503.
            let cap = self.services.settings.storage.statement_timeout_ms;
            within(
                &self.meter,
                self.services.store.read(move |mut conn| {
                    conn.before_deadline(meter.deadline(), cap, "thread window", |conn| {
                        build(conn, community_id, &request, &meter, now)
                    })
                }),
            )
            .await?
        };
        let Some(built) = built else {
            return Ok(Vec::new());
        };
        let aux = built.aux.into_events(&self.readable, &built.page.rows)?;
        let reader = self.ctx.pubkey.as_deref().unwrap_or_default();
        let binding = ThreadBinding {
            host: &self.ctx.authority,
            reader,
            channel: &request.channel,
            root: &request.root,
            limit: request.limit,
            depth_limit: request.depth_limit,
            kinds: &request.kinds,
            cursor: request.cursor.as_ref(),
            include_aux: request.include_aux,
        };
        let signer = OverlaySigner {
            keys: &self.services.relay_keys,
            now: self.services.clock.now_secs(),
        };
        let bounds = signer.thread_bounds(
            &binding.d_tag(),
            &request.channel,
            &request.root,
            built.page.next_cursor.as_ref(),
        );
        let mut out = built.page.rows;
        out.extend(aux);
        out.push(bounds);
        for event in &out {
            self.meter.output(event.to_json().len())?;
        }
        Ok(out)
    }

    /// Refresh access for the whole batch before anything is released: `503` when the
    /// reader's rights changed while the windows were built. `before_refresh` is the
    /// test seam that changes rights at exactly this point.
    pub(crate) async fn close(
        self,
        before_refresh: Option<&AccessRefreshHook>,
    ) -> Result<(), Reason> {
        if let Some(hook) = before_refresh {
            hook(self.ctx).await;
        }
        let after = within(&self.meter, self.services.access.read_scope(self.ctx)).await?;
        if same_access(&self.scope, &after) {
            Ok(())
        } else {
            Err(Reason::Unavailable(
                "read access changed while the thread windows were built; retry".into(),
            ))
        }
    }
}

/// Run `work` before the batch deadline; past it, `503`.
async fn within<T>(
    meter: &Meter,
    work: impl Future<Output = Result<T, Reason>>,
) -> Result<T, Reason> {
    tokio::time::timeout_at(meter.deadline().into(), work)
        .await
        .map_err(|_| Meter::timed_out())?
}

fn build(
    conn: &mut Conn<'_>,
    community_id: i64,
    request: &ThreadRequest,
    meter: &Meter,
    now: i64,
) -> Result<Option<Built>, Reason> {
    // The root must be a conversation event of this channel. A retained tombstone
    // still anchors its thread; anything else gets no page and no bounds, even if
    // ingest threaded replies beneath it.
    match rows::event_facts(conn, community_id, &request.root)? {
        Some((kind, Some(channel)))
            if channel == request.channel
                && u32::try_from(kind).is_ok_and(|k| CONVERSATION.contains(&k)) => {}
        _ => return Ok(None),
    }
    meter.on_time()?;
    let scan = ReplyScan {
        community_id,
        channel: &request.channel,
        root: &request.root,
        kinds: Some(&request.kinds),
        max_depth: i64::try_from(request.depth_limit).unwrap_or(i64::MAX),
        take: i64::try_from(request.limit + 1).unwrap_or(i64::MAX),
        now,
    };
    let probe = scan.newest_first(conn, request.cursor.as_ref())?;
    // Charged before reconstruction, the probe row included.
    for row in &probe {
        meter.raw_row(row.content.len() + row.tags.len())?;
    }
    meter.on_time()?;
    let page = Page::from_probe(probe, request.limit);
    let aux = if request.include_aux {
        let mut targets = vec![request.root.clone()];
        targets.extend(page.row_ids());
        aux::scan(conn, community_id, &targets, AuxLimit::Metered(meter), now)?
    } else {
        AuxCandidates::default()
    };
    meter.on_time()?;
    Ok(Some(Built { page, aux }))
}
