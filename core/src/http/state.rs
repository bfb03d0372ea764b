//! Shared application state and the per-request context extractor.

use crate::auth::nip98;
use crate::community::{authority, Communities};
use crate::ctx::{ConnCtx, Transport};
use crate::error::Reason;
use crate::ingest::Ingest;
use crate::plugin::{Plugin, Services};
use crate::query::QueryService;
use crate::replay::ReplayGuard;
use actix_web::{web, HttpRequest};
use futures_util::StreamExt;
use std::sync::Arc;

/// Everything request handlers need; one per relay, shared by all workers.
pub(crate) struct AppState {
    pub services: Services,
    pub plugins: Arc<[Arc<dyn Plugin>]>,
    pub ingest: Ingest,
    pub query: QueryService,
    pub communities: Communities,
    pub replay: Arc<dyn ReplayGuard>,
}

/// The community and caller of one HTTP request.
pub(crate) struct RequestCtx {
    pub conn: ConnCtx,
}

impl RequestCtx {
    /// Select the community from the `Host` header; an unknown host is a generic 404.
    pub(crate) fn resolve(req: &HttpRequest, state: &AppState) -> Result<RequestCtx, Reason> {
        let host = req
            .headers()
            .get("host")
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| req.uri().authority().map(|a| a.to_string()))
            .unwrap_or_default();
        let community = state
            .communities
            .resolve(&host)
            .ok_or_else(|| Reason::NotFound("not found".into()))?;
        let scheme = &state.services.settings.server.public_scheme;
        Ok(RequestCtx {
            conn: ConnCtx {
                community,
                pubkey: None,
                ip: req.peer_addr().map(|a| a.ip()),
                transport: Transport::Http,
                authority: authority(&host, scheme),
                host_header: host,
            },
        })
    }

    /// The URL NIP-98's `u` tag must name for this request.
    pub(crate) fn expected_url(&self, req: &HttpRequest, state: &AppState) -> String {
        let path_and_query = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        format!(
            "{}://{}{}",
            state.services.settings.server.public_scheme, self.conn.host_header, path_and_query
        )
    }

    /// Resolve the community and verify the request's NIP-98 authorization for `body`.
    pub(crate) async fn authenticate(
        req: &HttpRequest,
        state: &AppState,
        body: &[u8],
    ) -> Result<RequestCtx, Reason> {
        let mut ctx = Self::resolve(req, state)?;
        let facts = nip98::HttpRequestFacts {
            authorization: req
                .headers()
                .get("authorization")
                .and_then(|h| h.to_str().ok()),
            method: req.method().as_str(),
            url: ctx.expected_url(req, state),
            body,
        };
        let now = state.services.clock.now_secs();
        let pubkey = nip98::verify(&facts, state.replay.as_ref(), now).await?;
        ctx.conn.pubkey = Some(pubkey);
        Ok(ctx)
    }
}

/// Read a request body, refusing more than `limit` bytes with 413.
pub(crate) async fn read_body(
    mut payload: web::Payload,
    limit: usize,
) -> Result<web::Bytes, Reason> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Reason::invalid(format!("reading request body: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(Reason::TooLarge(format!("body exceeds {limit} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}
