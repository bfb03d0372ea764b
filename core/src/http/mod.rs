//! The HTTP surface (actix-web): routes, the request context extractor, plugin route
//! mounting and server assembly. **Architecture invariant:** only `http` touches actix;
//! plugins declare routes as plain data ([`crate::plugin::Route`]) and `plugin_routes.rs`
//! mounts them.

mod answer;
mod bridge;
mod cors;
mod error;
mod info;
mod metrics;
mod nip86;
mod plugin_routes;
mod server;
mod socket;
mod state;
mod ws;

pub(crate) use metrics::start_metrics;
pub(crate) use server::start;
pub use server::ServerHandle;
pub(crate) use state::{AppState, Bodies, RequestCtx};

use actix_web::web;

/// Mount core's routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(root))
        .route("/", web::post().to(nip86::handle))
        .route("/info", web::get().to(info::nip11))
        .route("/query", web::post().to(bridge::query))
        .route("/events", web::post().to(bridge::events));
}

/// `GET /`: WebSocket upgrade, NIP-11 (by `Accept`), or a short human page.
async fn root(
    req: actix_web::HttpRequest,
    body: web::Payload,
    state: web::Data<AppState>,
) -> actix_web::HttpResponse {
    let wants = |name: &str, needle: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains(needle))
    };
    if wants("upgrade", "websocket") {
        return ws::upgrade(req, body, state).await;
    }
    if wants("accept", "application/nostr+json") {
        return info::nip11(req, state).await;
    }
    match RequestCtx::resolve(&req, &state) {
        Ok(ctx) => actix_web::HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body(format!(
                "{} — a Nostr relay for team chat. Connect a Nostr client to ws://{}/\n",
                ctx.conn.community.name, ctx.conn.host_header
            )),
        Err(reason) => error::error_response(&reason),
    }
}
