//! Shared application state and the per-request context extractor.
//!
//! `RequestCtx` resolves the host to its community, then `receive` checks a NIP-98 header
//! before any body byte is read, reads the body with `Bodies` under its size cap, its
//! deadline (408) and the process's byte budget for unfinished bodies (503), and only
//! then checks the payload hash and the replay guard (`core/tests/slow_bodies.rs`).
//! `AppState` also holds the outbound byte budget WebSocket queues and `POST /query`
//! answers share.

use crate::auth::nip98;
use crate::community::Communities;
use crate::config::LimitSettings;
use crate::ctx::{ConnCtx, Transport};
use crate::error::Reason;
use crate::ingest::Ingest;
use crate::plugin::{Plugin, Services};
use crate::query_service::QueryService;
use crate::replay::ReplayGuard;
use actix_web::{web, HttpRequest};
use buzz_nostr::host::authority;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Everything request handlers need; one per relay, shared by all workers.
pub(crate) struct AppState {
    pub services: Services,
    pub plugins: Arc<[Arc<dyn Plugin>]>,
    /// NIP-11 `supported_nips`: core's and the enabled plugins' (`crate::nips`).
    pub supported_nips: Vec<u32>,
    pub ingest: Ingest,
    pub query: QueryService,
    pub communities: Communities,
    pub replay: Arc<dyn ReplayGuard>,
    /// The process's bound on request bodies being received.
    pub bodies: Bodies,
    /// Bytes queued for clients, all of this process's together: WebSocket queues and
    /// `POST /query` answers in flight (`limits.max_outbound_bytes_total`).
    pub outbound: Arc<Semaphore>,
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

    /// Resolve the community, then receive the request: a NIP-98 route's
    /// `Authorization` header is checked in everything that does not need the body
    /// (shape, signature, time, URL, method) *before* any of the body is read, then the
    /// body is read within the relay's bounds ([`Bodies::read`]), then its hash and the
    /// replay guard finish the check. Unknown hosts get their 404 before anything else.
    pub(crate) async fn receive(
        req: &HttpRequest,
        state: &AppState,
        payload: web::Payload,
        signed: bool,
    ) -> Result<(RequestCtx, web::Bytes), Reason> {
        let mut ctx = Self::resolve(req, state)?;
        let header = if signed {
            let authorization = req
                .headers()
                .get("authorization")
                .and_then(|h| h.to_str().ok());
            let url = ctx.expected_url(req, state);
            let now = state.services.clock.now_secs();
            Some(buzz_nostr::nip98::check_header(
                authorization,
                req.method().as_str(),
                &url,
                now,
            )?)
        } else {
            None
        };
        let body = state.bodies.read(req, payload).await?;
        if let Some(header) = header {
            ctx.signed_by(nip98::finish(header, &body, state.replay.as_ref()).await?);
        }
        Ok((ctx, body))
    }

    /// Resolve the community and, for a NIP-98 route, check the `Authorization` header
    /// whole (the replay guard included) without reading the body: for streamed routes,
    /// which never take NIP-98 on `POST` (its `payload` hash needs the body first).
    pub(crate) async fn receive_headers(
        req: &HttpRequest,
        state: &AppState,
        signed: bool,
    ) -> Result<RequestCtx, Reason> {
        let mut ctx = Self::resolve(req, state)?;
        if signed {
            let facts = nip98::HttpRequestFacts {
                authorization: req
                    .headers()
                    .get("authorization")
                    .and_then(|h| h.to_str().ok()),
                method: req.method().as_str(),
                url: ctx.expected_url(req, state),
                body: &[],
            };
            let now = state.services.clock.now_secs();
            ctx.signed_by(nip98::verify(&facts, state.replay.as_ref(), now).await?);
        }
        Ok(ctx)
    }

    fn signed_by(&mut self, pubkey: String) {
        // The request's reads share its pubkey's lane and bound (`http/server.rs`).
        crate::store::ReadClient::switch_to(crate::store::ReadClient::pubkey(&pubkey));
        self.conn.pubkey = Some(pubkey);
    }
}

/// What request bodies may hold while they arrive, for the whole process. A body is
/// buffered whole before it is used (its hash is part of NIP-98), so a client that sends
/// all but the last byte and goes silent pins what it sent: each body has a deadline,
/// and all unfinished bodies together share one byte budget, taken before the bytes are.
pub(crate) struct Bodies {
    budget: Arc<Semaphore>,
    total: usize,
    max_bytes: usize,
    deadline: Duration,
}

impl Bodies {
    pub(crate) fn new(limits: &LimitSettings) -> Bodies {
        Bodies {
            budget: Arc::new(Semaphore::new(limits.max_pending_body_bytes)),
            total: limits.max_pending_body_bytes,
            max_bytes: limits.max_message_bytes,
            deadline: Duration::from_secs(limits.body_timeout_secs),
        }
    }

    /// Read the body of `req`: more than `max_message_bytes` is refused with 413 (by its
    /// declared length, before reading); no room in the budget is 503 at once; a body
    /// not complete within `body_timeout_secs` of its headers is 408.
    pub(crate) async fn read(
        &self,
        req: &HttpRequest,
        mut payload: web::Payload,
    ) -> Result<web::Bytes, Reason> {
        let max = self.max_bytes;
        let too_large = || Reason::TooLarge(format!("body exceeds {max} bytes"));
        let declared = req
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<usize>().ok());
        if declared.is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let mut held = self.reserve(declared.unwrap_or(0))?;
        let receive = async {
            let mut body = web::BytesMut::with_capacity(declared.unwrap_or(0));
            while let Some(chunk) = payload.next().await {
                let chunk =
                    chunk.map_err(|e| Reason::invalid(format!("reading request body: {e}")))?;
                if body.len() + chunk.len() > max {
                    return Err(too_large());
                }
                // A body without a declared length (chunked) takes budget as it grows.
                let needed = (body.len() + chunk.len()).saturating_sub(held.num_permits());
                if needed > 0 {
                    held.merge(self.reserve(needed)?);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body.freeze())
        };
        match tokio::time::timeout(self.deadline, receive).await {
            Ok(body) => body,
            Err(_) => Err(Reason::TooSlow(format!(
                "request body not received within {} s (body_timeout_secs)",
                self.deadline.as_secs()
            ))),
        }
    }

    fn reserve(&self, bytes: usize) -> Result<OwnedSemaphorePermit, Reason> {
        let busy = || {
            Reason::Unavailable(format!(
                "busy: request bodies being received hold the relay's {} bytes \
                 (max_pending_body_bytes); retry shortly",
                self.total
            ))
        };
        let n = u32::try_from(bytes).map_err(|_| busy())?;
        self.budget
            .clone()
            .try_acquire_many_owned(n)
            .map_err(|_| busy())
    }
}
