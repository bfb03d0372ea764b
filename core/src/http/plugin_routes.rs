//! Mounting plugin routes: resolve the community, check NIP-98 when the route asks for
//! it, read the body under the relay's bounds (or hand it over as it arrives, for a
//! streamed route), then hand the plugin plain data ([`PluginRequest`]) and turn its
//! plain answer into a response.
//!
//! Mount order decides which route takes a path: core's routes are mounted before any
//! plugin's, and a plugin route whose first segment is a pattern (`/{blob}`) after every
//! other plugin route, so a root-level catch-all never takes a path that core or another
//! plugin names.

use super::error::plugin_response;
use super::{AppState, RequestCtx};
use crate::error::Reason;
use crate::plugin::{BodyStream, PluginRequest, Route, RouteAuth, RouteBody, RouteMethod};
use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use std::time::Duration;
use tokio::sync::mpsc;

/// Chunks of a streamed body queued for its handler: the connection is read no faster
/// than the handler takes them.
const STREAM_QUEUE_CHUNKS: usize = 4;

/// Mount every route of every enabled plugin.
pub(super) fn mount(cfg: &mut web::ServiceConfig, routes: &[Route]) {
    let (catch_alls, named): (Vec<&Route>, Vec<&Route>) =
        routes.iter().partition(|r| is_root_pattern(&r.path));
    for route in named.into_iter().chain(catch_alls) {
        let method = match route.method {
            RouteMethod::Get => Method::GET,
            RouteMethod::Head => Method::HEAD,
            RouteMethod::Post => Method::POST,
            RouteMethod::Put => Method::PUT,
            RouteMethod::Delete => Method::DELETE,
            RouteMethod::Options => Method::OPTIONS,
        };
        let route = route.clone();
        cfg.route(
            &route.path.clone(),
            web::route().method(method).to(
                move |req: HttpRequest, payload: web::Payload, state: web::Data<AppState>| {
                    let route = route.clone();
                    async move { serve(&route, &req, payload, &state).await }
                },
            ),
        );
    }
}

/// Whether the path's first segment is a pattern (`/{name}`, `/{name}.json`).
fn is_root_pattern(path: &str) -> bool {
    path.trim_start_matches('/').starts_with('{')
}

async fn serve(
    route: &Route,
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> HttpResponse {
    let answer = match route.body {
        RouteBody::Whole => match request(route, req, payload, state).await {
            Ok(request) => route.handler.handle(request).await,
            Err(reason) => Err(reason),
        },
        RouteBody::Streamed => streamed(route, req, payload, state).await,
    };
    plugin_response(match answer {
        Ok(response) => response,
        Err(reason) => route.handler.error_response(&reason),
    })
}

async fn request(
    route: &Route,
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> Result<PluginRequest, Reason> {
    let signed = matches!(route.auth, RouteAuth::Nip98);
    let (ctx, body) = RequestCtx::receive(req, state, payload, signed).await?;
    Ok(plugin_request(req, state, ctx, body.to_vec(), None))
}

/// A streamed route: the handler runs while this task pumps the connection's body to it
/// through a short queue. Once the handler has answered, the pump is dropped with it,
/// so an answer given before the body ends (a refusal) is not held up by the client.
async fn streamed(
    route: &Route,
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> Result<crate::plugin::PluginResponse, Reason> {
    let signed = matches!(route.auth, RouteAuth::Nip98);
    let ctx = RequestCtx::receive_headers(req, state, signed).await?;
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (tx, rx) = mpsc::channel(STREAM_QUEUE_CHUNKS);
    let request = plugin_request(
        req,
        state,
        ctx,
        Vec::new(),
        Some(BodyStream::new(rx, declared)),
    );
    let idle = Duration::from_secs(state.services.settings.limits.body_timeout_secs);
    let handle = route.handler.handle(request);
    let pump = pump(payload, tx, idle);
    tokio::pin!(handle, pump);
    let mut pumping = true;
    loop {
        tokio::select! {
            answer = &mut handle => return answer,
            () = &mut pump, if pumping => pumping = false,
        }
    }
}

/// Forward `payload` chunk by chunk until it ends, fails, goes quiet for `idle`, or the
/// handler stops reading.
async fn pump(
    mut payload: web::Payload,
    tx: mpsc::Sender<Result<web::Bytes, Reason>>,
    idle: Duration,
) {
    loop {
        let item = match tokio::time::timeout(idle, payload.next()).await {
            Ok(None) => return,
            Ok(Some(Ok(chunk))) => Ok(chunk),
            Ok(Some(Err(e))) => Err(Reason::invalid(format!("reading request body: {e}"))),
            Err(_) => Err(Reason::TooSlow(format!(
                "request body sent nothing for {} s (body_timeout_secs)",
                idle.as_secs()
            ))),
        };
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            return;
        }
    }
}

fn plugin_request(
    req: &HttpRequest,
    state: &AppState,
    ctx: RequestCtx,
    body: Vec<u8>,
    stream: Option<BodyStream>,
) -> PluginRequest {
    PluginRequest {
        url: ctx.expected_url(req, state),
        ctx: ctx.conn,
        method: req.method().as_str().to_owned(),
        path: req.path().to_owned(),
        query: req.query_string().to_owned(),
        headers: req
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect(),
        body,
        stream,
    }
}
