//! The running plugin: the ingest hook, the routes, NIP-11 `buzz_v1`, and what every
//! request checks first (admission).

use crate::quota::{Quota, Verdict};
use crate::scope::Skew;
use crate::{
    contexts, http, ingest, intents, sidebar, Config, BASE_PATH, ELIGIBLE_KINDS, MAX_CHANNELS,
    MAX_CONTEXTS, MAX_CONTEXT_MESSAGES, MAX_INTENTS, NAME, NIP11_FIELD, READ_STATE_PATH,
    SIDEBAR_PATH, UNKNOWN_PATHS,
};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{
    Plugin, PluginRequest, PluginResponse, PurgedEvent, Route, RouteAuth, RouteBody, RouteHandler,
    RouteMethod, Services, Tx,
};
use buzz_core::store::{community_standing, Conn};
use buzz_core::stored::StoredEvent;
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub struct ReadState {
    pub(crate) config: Config,
    pub(crate) services: Services,
    pub(crate) skew: Skew,
    quota: Quota,
}

impl ReadState {
    pub fn new(config: Config, services: &Services) -> ReadState {
        ReadState {
            skew: Skew::new(services.settings.limits.max_clock_skew_secs),
            quota: Quota::new(&config, services.redis.clone(), &services.redis_prefix),
            config,
            services: services.clone(),
        }
    }

    /// The signer of a NIP-98 request, once the community admits them: a member (open
    /// community, listed, or owner) who is not banned. Timeouts do not stop reading.
    pub(crate) async fn admit(&self, ctx: &ConnCtx) -> Result<String, Reason> {
        let pubkey = ctx
            .pubkey
            .clone()
            .ok_or_else(|| Reason::AuthRequired("NIP-98 authorization required".into()))?;
        let scope = self
            .services
            .access
            .scope_for(ctx, Some(Vec::new()))
            .await?;
        if !scope.community_wide {
            return Err(Reason::Restricted("not a member of this community".into()));
        }
        let (cid, pk) = (ctx.community_id(), pubkey.clone());
        let banned = self
            .services
            .store
            .read(move |mut conn| {
                Ok(community_standing::standing(&mut conn, cid, &pk)?
                    .sanctions
                    .iter()
                    .any(|s| s.kind == "ban"))
            })
            .await?;
        if banned {
            return Err(Reason::Restricted("banned".into()));
        }
        Ok(pubkey)
    }

    /// Which of `channels` the signer may read now (access service; deleted and expired
    /// channels never are).
    pub(crate) async fn readable(
        &self,
        ctx: &ConnCtx,
        channels: Vec<String>,
    ) -> Result<Vec<String>, Reason> {
        if channels.is_empty() {
            return Ok(channels);
        }
        let scope = self
            .services
            .access
            .scope_for(ctx, Some(channels.clone()))
            .await?;
        Ok(channels
            .into_iter()
            .filter(|c| scope.has_channel(c))
            .collect())
    }

    pub(crate) fn now_micros(&self) -> i64 {
        self.services.clock.now_micros()
    }
}

/// Run `f` on one snapshot: every read in it sees the same committed state
/// (PostgreSQL: a repeatable-read, read-only transaction; SQLite: one read transaction).
/// Every PostgreSQL session core hands out already plans each execution for its own
/// parameters (`plan_cache_mode = force_custom_plan`, set by core's pool and checked by
/// its `statement_bounds` test), so the plugin's prepared statements never keep a plan
/// made on empty tables.
pub(crate) fn snapshot<R>(
    conn: &mut Conn<'_>,
    f: impl FnOnce(&mut Conn<'_>) -> Result<R, Reason>,
) -> Result<R, Reason> {
    use diesel::Connection;
    match conn {
        Conn::Sqlite(c) => c.transaction(|c| f(&mut Conn::Sqlite(c))),
        Conn::Pg(c) => c
            .build_transaction()
            .repeatable_read()
            .read_only()
            .run(|c| f(&mut Conn::Pg(c))),
    }
}

#[async_trait::async_trait]
impl Plugin for ReadState {
    fn name(&self) -> &'static str {
        NAME
    }

    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        doc.insert(
            NIP11_FIELD.into(),
            json!({
                "version": 1,
                "base_path": BASE_PATH,
                "max_channels": MAX_CHANNELS,
                "max_intents": MAX_INTENTS,
                "max_contexts": MAX_CONTEXTS,
                "max_context_messages": MAX_CONTEXT_MESSAGES,
                "eligible_kinds": ELIGIBLE_KINDS,
                // Rows list at most this many threads and page the rest
                // (`threads_next_cursor` / `threads_cursor`): the capability.
                "max_threads": self.config.max_threads,
                "max_message_mentions": self.config.max_message_mentions,
            }),
        );
    }

    fn on_event_stored(&self, tx: &mut Tx<'_, '_>, event: &StoredEvent) -> Result<(), Reason> {
        let bounds = ingest::Bounds {
            max_mentions: self.config.max_message_mentions,
            skew: self.skew,
        };
        ingest::on_stored(tx, event, bounds)
    }

    /// A NIP-40-expired message takes its mentions with it (counts already skip it:
    /// they join `events`; this gives the rows back).
    fn on_events_purged(&self, conn: &mut Conn<'_>, purged: &[PurgedEvent]) -> Result<(), Reason> {
        for event in purged {
            crate::frontiers::drop_mentions(conn, event.community_id, &event.id)?;
        }
        Ok(())
    }

    fn routes(self: Arc<Self>) -> Vec<Route> {
        let route = |method, path: &str, auth, handler: Arc<dyn RouteHandler>| Route {
            method,
            path: path.into(),
            auth,
            body: RouteBody::Whole,
            handler,
        };
        let unknown = Arc::new(Unknown);
        let metered = |handler: Arc<dyn RouteHandler>| -> Arc<dyn RouteHandler> {
            Arc::new(Metered {
                rs: self.clone(),
                inner: handler,
            })
        };
        vec![
            route(
                RouteMethod::Get,
                SIDEBAR_PATH,
                RouteAuth::Nip98,
                metered(Arc::new(sidebar::Sidebar(self.clone()))),
            ),
            route(
                RouteMethod::Post,
                READ_STATE_PATH,
                RouteAuth::Nip98,
                metered(Arc::new(intents::Intents(self.clone()))),
            ),
            route(
                RouteMethod::Get,
                READ_STATE_PATH,
                RouteAuth::Nip98,
                metered(Arc::new(contexts::Contexts(self.clone()))),
            ),
            // Anything else under the base path: the API's own 404 body.
            route(
                RouteMethod::Get,
                UNKNOWN_PATHS,
                RouteAuth::Public,
                unknown.clone(),
            ),
            route(RouteMethod::Post, UNKNOWN_PATHS, RouteAuth::Public, unknown),
        ]
    }
}

/// A signed route behind the signer's request quota: over it, 429 before any other work.
struct Metered {
    rs: Arc<ReadState>,
    inner: Arc<dyn RouteHandler>,
}

#[async_trait::async_trait]
impl RouteHandler for Metered {
    async fn handle(&self, request: PluginRequest) -> Result<PluginResponse, Reason> {
        // Core verified NIP-98 before calling; without a signer the route answers 401.
        if let Some(pubkey) = request.ctx.pubkey.as_deref() {
            let now = self.rs.services.clock.now_secs();
            let verdict = self
                .rs
                .quota
                .take(request.ctx.community_id(), pubkey, now)
                .await?;
            if let Verdict::Limited { retry_after_secs } = verdict {
                return Ok(http::rate_limited(retry_after_secs));
            }
        }
        self.inner.handle(request).await
    }

    fn error_response(&self, reason: &Reason) -> PluginResponse {
        self.inner.error_response(reason)
    }
}

/// A path under `/buzz/v1` that is not part of the API.
struct Unknown;

#[async_trait::async_trait]
impl RouteHandler for Unknown {
    async fn handle(&self, _request: PluginRequest) -> Result<PluginResponse, Reason> {
        Err(Reason::NotFound("no such path".into()))
    }

    fn error_response(&self, reason: &Reason) -> PluginResponse {
        http::error(reason)
    }
}
