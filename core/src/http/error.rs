//! [`Reason`] as an actix response: the status it decides and `{"error": "<wire text>"}`.
//! The text and status themselves are decided in `error.rs`, nowhere else.

use crate::error::Reason;
use crate::plugin::PluginResponse;
use actix_web::http::StatusCode;
use actix_web::HttpResponse;

pub(crate) fn status(reason: &Reason) -> StatusCode {
    StatusCode::from_u16(reason.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The JSON error every core HTTP route answers with.
pub(crate) fn error_response(reason: &Reason) -> HttpResponse {
    HttpResponse::build(status(reason)).json(serde_json::json!({ "error": reason.wire_text() }))
}

/// A plugin's plain response as an actix response.
pub(crate) fn plugin_response(response: PluginResponse) -> HttpResponse {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = HttpResponse::build(status);
    builder.content_type(response.content_type);
    for (name, value) in response.headers {
        builder.insert_header((name, value));
    }
    builder.body(response.body)
}
