//! [`Reason`] as an actix response: the status it decides and `{"error": "<wire text>"}`.
//! The text and status themselves are decided in `error.rs`, nowhere else.

use crate::error::Reason;
use crate::plugin::PluginResponse;
use actix_web::http::StatusCode;
use actix_web::HttpResponse;

pub(crate) fn status(reason: &Reason) -> StatusCode {
    StatusCode::from_u16(reason.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The JSON error every core HTTP route answers with: `{"error": "<wire text>"}`, or for
/// a coded refusal exactly the body its spec fixes, `{"error": code, "code": code}`, with
/// the human text in the `Buzz-Error-Detail` header (the body has no room for it).
pub(crate) fn error_response(reason: &Reason) -> HttpResponse {
    match reason {
        Reason::Coded { code, message, .. } => HttpResponse::build(status(reason))
            .insert_header(("Buzz-Error-Detail", header_text(message)))
            .json(serde_json::json!({ "error": code, "code": code })),
        _ => HttpResponse::build(status(reason))
            .json(serde_json::json!({ "error": reason.wire_text() })),
    }
}

/// `text` as a header value: visible ASCII and spaces only, at most 512 bytes.
fn header_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(512)
        .collect()
}

/// A plugin's plain response as an actix response.
pub(crate) fn plugin_response(response: PluginResponse) -> HttpResponse {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = HttpResponse::build(status);
    builder.content_type(response.content_type);
    for (name, value) in response.headers {
        builder.insert_header((name, value));
    }
    match response.stream {
        Some(stream) => {
            let (len, stream) = stream.into_parts();
            builder.body(actix_web::body::SizedStream::new(len, stream))
        }
        None => builder.body(response.body),
    }
}
