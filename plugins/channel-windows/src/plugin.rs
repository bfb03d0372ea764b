//! The [`Plugin`] implementation: what is claimed, how a query's claimed filters are
//! answered, and what NIP-11 says.

use crate::budget::ThreadBudgets;
use crate::request::{self, limits, WindowRequest};
use crate::thread_mode::ThreadBatch;
use crate::{aux, channel_mode, legacy, recovery, NAME};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, QueryAnswer, Services};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// Runs after a query's thread windows are built and before access is refreshed.
///
/// A test seam, not a feature: it lets a test change the reader's rights at exactly the
/// moment the refresh must notice, deterministically. Production relays (and
/// [`crate::factory`]) never set one.
pub type AccessRefreshHook = Arc<dyn Fn(&ConnCtx) -> BoxFuture<'static, ()> + Send + Sync>;

/// NIP-CW channel and thread windows.
pub struct ChannelWindows {
    services: Services,
    /// Shared by all thread windows of one query.
    budgets: ThreadBudgets,
    before_access_refresh: Option<AccessRefreshHook>,
}

impl ChannelWindows {
    pub fn new(services: &Services, budgets: ThreadBudgets) -> ChannelWindows {
        ChannelWindows {
            services: services.clone(),
            budgets,
            before_access_refresh: None,
        }
    }

    /// Install the test seam described at [`AccessRefreshHook`].
    pub fn with_before_access_refresh(mut self, hook: AccessRefreshHook) -> ChannelWindows {
        self.before_access_refresh = Some(hook);
        self
    }
}

#[async_trait::async_trait]
impl Plugin for ChannelWindows {
    fn name(&self) -> &'static str {
        NAME
    }

    /// `"channel_windows"`: which transports serve each mode, and the documented limits.
    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        let both = json!(["http", "websocket"]);
        let b = &self.budgets;
        doc.insert(
            NAME.into(),
            json!({
                "channel_mode": both,
                "thread_mode": both,
                "legacy_thread": both,
                "resolve_thread_roots": both,
                "limits": {
                    "channel_limit": {
                        "default": limits::CHANNEL_DEFAULT_LIMIT,
                        "min": limits::CHANNEL_MIN_LIMIT,
                        "max": limits::CHANNEL_MAX_LIMIT,
                    },
                    "aux_per_hop": aux::PER_HOP_CAP,
                    "thread_limit": {
                        "default": limits::THREAD_DEFAULT_LIMIT,
                        "min": 1,
                        "max": limits::THREAD_MAX_LIMIT,
                    },
                    "thread_depth_limit": {
                        "default": limits::THREAD_DEFAULT_DEPTH,
                        "min": 1,
                        "max": limits::THREAD_MAX_DEPTH,
                    },
                    "thread_windows_per_query": limits::MAX_THREAD_WINDOWS,
                    "thread_budgets": {
                        "aux_scans": b.aux_scans,
                        "raw_rows": b.raw_rows,
                        "payload_bytes": b.payload_bytes,
                        "output_bytes": b.output_bytes,
                        "deadline_ms": u64::try_from(b.deadline.as_millis()).unwrap_or(u64::MAX),
                    },
                    "legacy_thread_limit": {
                        "default": limits::LEGACY_DEFAULT_LIMIT,
                        "max": limits::LEGACY_MAX_LIMIT,
                        "unbounded_depth": limits::UNBOUNDED_DEPTH,
                    },
                    "resolve_thread_roots_max_ids": limits::RESOLVE_MAX_TARGETS,
                },
            }),
        );
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        request::claims(filter)
    }

    /// Every claimed filter of one query, answered in filter order. Any error fails the
    /// whole answer: no partial page is ever released.
    async fn answer_claimed(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        let requests = request::parse_batch(&filters)?;
        if ctx.pubkey.is_none() {
            return Err(Reason::AuthRequired(
                "channel and thread windows require authentication".into(),
            ));
        }
        let services = &self.services;
        let threads = if requests
            .iter()
            .any(|r| matches!(r, WindowRequest::Thread(_)))
        {
            Some(ThreadBatch::open(services, ctx, self.budgets).await?)
        } else {
            None
        };
        let mut out: Vec<Event> = Vec::new();
        // One summary per owning root across all recovery filters of the request.
        let mut recovered_roots = HashSet::new();
        for request in &requests {
            match request {
                WindowRequest::Channel(r) => {
                    out.extend(channel_mode::serve(services, ctx, r).await?)
                }
                WindowRequest::Thread(r) => {
                    let batch = threads.as_ref().ok_or_else(|| {
                        Reason::Internal(anyhow::anyhow!("thread window without its batch"))
                    })?;
                    out.extend(batch.window(r).await?);
                }
                WindowRequest::Legacy(r) => out.extend(legacy::serve(services, ctx, r).await?),
                WindowRequest::Resolve(r) => out.extend(
                    recovery::serve(services, ctx, r)
                        .await?
                        .into_iter()
                        .filter(|s| recovered_roots.insert(s.tag_value("d").map(str::to_owned))),
                ),
            }
        }
        if let Some(batch) = threads {
            batch.close(self.before_access_refresh.as_ref()).await?;
        }
        Ok(QueryAnswer::Events(out))
    }
}
