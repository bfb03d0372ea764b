//! Mounting plugin routes: resolve the community, check NIP-98 when the route asks for
//! it, read the body under the relay's bounds, then hand the plugin plain data
//! ([`PluginRequest`]) and turn its plain answer into a response.

use super::error::plugin_response;
use super::{AppState, RequestCtx};
use crate::error::Reason;
use crate::plugin::{PluginRequest, Route, RouteAuth, RouteMethod};
use actix_web::{web, HttpRequest, HttpResponse};

/// Mount every route of every enabled plugin.
pub(super) fn mount(cfg: &mut web::ServiceConfig, routes: &[Route]) {
    for route in routes {
        let method = match route.method {
            RouteMethod::Get => web::get(),
            RouteMethod::Post => web::post(),
            RouteMethod::Put => web::put(),
            RouteMethod::Delete => web::delete(),
        };
        let route = route.clone();
        cfg.route(
            &route.path.clone(),
            method.to(
                move |req: HttpRequest, payload: web::Payload, state: web::Data<AppState>| {
                    let route = route.clone();
                    async move { serve(&route, &req, payload, &state).await }
                },
            ),
        );
    }
}

async fn serve(
    route: &Route,
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> HttpResponse {
    let answer = match request(route, req, payload, state).await {
        Ok(request) => route.handler.handle(request).await,
        Err(reason) => Err(reason),
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
    Ok(PluginRequest {
        ctx: ctx.conn,
        path: req.path().to_owned(),
        query: req.query_string().to_owned(),
        headers: req
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect(),
        body: body.to_vec(),
    })
}
