//! NIP-11 relay information document.

use super::{AppState, RequestCtx};
use crate::store::Backend;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Map, Value};

/// Build the document for one community.
pub(super) fn document(state: &AppState, ctx: &RequestCtx) -> Value {
    let s = &state.services.settings;
    let l = &s.limits;
    // The deadline one read runs to on this backend: SQLite's reads are cut by the
    // relay, PostgreSQL's statements by the server.
    let read_timeout_ms = match state.services.store.backend() {
        Backend::Sqlite => s.storage.read_timeout_ms,
        Backend::Postgres => s.storage.statement_timeout_ms,
    };
    let mut doc = Map::new();
    doc.insert(
        "name".into(),
        json!(format!("{} — {}", s.relay.name, ctx.conn.community.name)),
    );
    doc.insert("description".into(), json!(s.relay.description));
    let relay_pubkey = state.services.relay_keys.pubkey();
    doc.insert("self".into(), json!(relay_pubkey));
    // NIP-11 `pubkey` is the operator's contact key; none is configured, so it is the
    // relay key that signs group state (NIP-29 loaders filter 39000–39002 on it).
    doc.insert("pubkey".into(), json!(relay_pubkey));
    if !s.relay.contact.is_empty() {
        doc.insert("contact".into(), json!(s.relay.contact));
    }
    doc.insert("supported_nips".into(), json!(state.supported_nips));
    doc.insert("software".into(), json!("buzz-relay"));
    doc.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    doc.insert(
        "limitation".into(),
        json!({
            "max_message_length": l.max_message_bytes,
            "max_subscriptions": l.max_subscriptions,
            "max_filters": l.max_filters,
            "max_limit": l.max_limit,
            "default_limit": l.max_limit,
            "max_event_tags": l.max_event_tags,
            "max_tag_values": l.max_tag_values,
            "max_content_length": l.max_content_bytes,
            "created_at_lower_limit": l.max_clock_skew_secs,
            "created_at_upper_limit": l.max_clock_skew_secs,
            // Not NIP-11 fields; the relay's own bounds a client can hit (README "Limits").
            "max_filter_values": l.max_filter_values,
            "max_query_values": l.max_query_values,
            "max_filter_bytes": l.max_filter_bytes,
            "max_reads_per_client": l.max_reads_per_client,
            "max_count": l.max_count,
            "refusals_per_sec": l.refusals_per_sec,
            "read_timeout_ms": read_timeout_ms,
            "max_expiring_bytes_per_pubkey": l.max_expiring_bytes_per_pubkey,
            "auth_required": false,
            "restricted_writes": true,
        }),
    );
    doc.insert(
        "plugins".into(),
        json!(state.plugins.iter().map(|p| p.name()).collect::<Vec<_>>()),
    );
    for plugin in state.plugins.iter() {
        plugin.extend_nip11(&mut doc);
    }
    Value::Object(doc)
}

/// `GET /info`, and `GET /` with `Accept: application/nostr+json`.
pub(super) async fn nip11(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    match RequestCtx::resolve(&req, &state) {
        Ok(ctx) => HttpResponse::Ok()
            .content_type("application/nostr+json")
            .insert_header(("Access-Control-Allow-Origin", "*"))
            .insert_header(("Access-Control-Allow-Headers", "*"))
            .insert_header(("Access-Control-Allow-Methods", "GET, POST, OPTIONS"))
            .json(document(&state, &ctx)),
        Err(reason) => super::error::error_response(&reason),
    }
}
