//! The HTTP bridge: `POST /query` and `POST /events`, both NIP-98 authenticated, both
//! served by the same query service and ingest pipeline as WebSocket.

use super::answer::{self, AnswerBounds};
use super::socket::SocketHandle;
use super::{AppState, RequestCtx};
use crate::error::Reason;
use actix_web::{web, HttpRequest, HttpResponse};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use serde_json::{json, Value};
use std::time::Duration;

/// `POST /query`: body is a JSON array of filters; answers a JSON array of events (or a
/// plugin's object answer).
pub(super) async fn query(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    match run_query(&req, payload, &state).await {
        Ok(resp) => resp,
        Err(reason) => super::error::error_response(&reason),
    }
}

async fn run_query(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> Result<HttpResponse, Reason> {
    let (ctx, body) = RequestCtx::receive(req, state, payload, true).await?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Reason::invalid(format!("body is not JSON: {e}")))?;
    let list = value
        .as_array()
        .ok_or_else(|| Reason::invalid("body must be a JSON array of filters"))?;
    let filters = Filter::parse_many(list)?;
    let result = state.query.run(&ctx.conn, filters).await?;
    // Every `POST /query` caller is NIP-98 authenticated, so an answer is never partial
    // for want of AUTH; were it ever, the whole request is refused rather than cut.
    if let Some(reason) = result.needs_auth {
        return Err(reason);
    }
    if let Some(object) = result.object {
        return Ok(HttpResponse::Ok().json(object));
    }
    let limits = &state.services.settings.limits;
    let bounds = AnswerBounds {
        budget: state.outbound.clone(),
        page_bytes: limits.max_outbound_bytes,
        stall: Duration::from_secs(limits.outbound_stall_secs),
    };
    answer::events(result.stored, result.events, bounds, SocketHandle::of(req)).await
}

/// `POST /events`: body is one signed event; the answer mirrors a WebSocket `OK`.
pub(super) async fn events(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    match run_event(&req, payload, &state).await {
        Ok(resp) => resp,
        Err(reason) => super::error::error_response(&reason),
    }
}

async fn run_event(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
) -> Result<HttpResponse, Reason> {
    let (ctx, body) = RequestCtx::receive(req, state, payload, true).await?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Reason::invalid(format!("body is not JSON: {e}")))?;
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let event: Event = serde_json::from_value(value)
        .map_err(|e| Reason::invalid(format!("not a Nostr event: {e}")))?;
    let answer = match state.ingest.submit(&ctx.conn, event).await {
        Ok(accepted) => json!({"id": id, "accepted": true, "message": accepted.message}),
        Err(reason @ Reason::Internal(_)) | Err(reason @ Reason::Unavailable(_)) => {
            return Err(reason)
        }
        Err(reason) => {
            let message = reason.wire_text();
            return Ok(HttpResponse::build(super::error::status(&reason))
                .json(json!({"id": id, "accepted": false, "message": message, "error": message})));
        }
    };
    Ok(HttpResponse::Ok().json(answer))
}
