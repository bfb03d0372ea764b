//! NIP-86 over HTTP: `POST /` with `Content-Type: application/nostr+json+rpc` and a
//! NIP-98 `Authorization` whose `u` is the relay's URL. Only the community's `owners`
//! may call; what each method does is `crate::nip86`.
//!
//! Answers are NIP-86's `{"result": ..., "error": ...}`; a refusal keeps the status
//! `Reason` decides (401 bad or missing NIP-98, 403 not an owner, 400 malformed call,
//! 404 unknown event) and carries the same wire text in `error`.

use super::{AppState, RequestCtx};
use crate::error::Reason;
use crate::nip86::Call;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

/// The content type that makes `POST /` a NIP-86 call.
pub(super) const CONTENT_TYPE: &str = "application/nostr+json+rpc";

/// `POST /`.
pub(super) async fn handle(
    req: HttpRequest,
    payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    let mut method = "unknown";
    let outcome = call(&req, payload, &state, &mut method).await;
    state
        .services
        .metrics
        .nip86(method, &outcome.as_ref().map(|_| ()));
    match outcome {
        Ok(result) => HttpResponse::Ok()
            .content_type("application/json")
            .json(json!({"result": result, "error": null})),
        Err(reason) => HttpResponse::build(super::error::status(&reason))
            .json(json!({"result": null, "error": reason.wire_text()})),
    }
}

async fn call(
    req: &HttpRequest,
    payload: web::Payload,
    state: &AppState,
    method: &mut &'static str,
) -> Result<Value, Reason> {
    let content_type = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case(CONTENT_TYPE) {
        return Err(Reason::invalid(format!(
            "POST / is NIP-86 relay management: use Content-Type {CONTENT_TYPE}"
        )));
    }
    let (ctx, body) = RequestCtx::receive(req, state, payload, true).await?;
    let caller = ctx.conn.pubkey.as_deref().unwrap_or_default();
    if !ctx.conn.community.owners.iter().any(|o| o == caller) {
        return Err(Reason::Restricted(
            "only this community's owners may manage it".into(),
        ));
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| Reason::invalid(format!("body is not JSON: {e}")))?;
    let parsed = Call::parse(&value)?;
    *method = parsed.method();
    parsed.run(&ctx.conn, &state.services, &state.ingest).await
}
