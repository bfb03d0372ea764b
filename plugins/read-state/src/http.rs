//! What every `/buzz/v1` response shares: the API's own error body
//! (`{"error":{"code":…,"request_id":…}}`), `Cache-Control: private, no-store`,
//! `Retry-After` on 429/503, the response size bound, and strict query parsing.
//!
//! Statuses are the spec's set: 400 invalid, 401 unauthorized or replayed NIP-98, 403
//! forbidden, 404 unavailable, 429 rate limited, 503 temporarily unavailable. A
//! [`Reason`] keeps its own status, except that "too large" is an invalid request here
//! (400) and an internal failure is "temporarily unavailable" (503): the API promises no
//! other statuses, and neither may ever read as success.

use buzz_core::error::Reason;
use buzz_core::plugin::{PluginRequest, PluginResponse};
use serde_json::{json, Value};

/// Seconds a client waits before retrying a 429/503.
const RETRY_AFTER_SECS: u32 = 1;

/// An id for one request, in every error body (and the `x-request-id` header of every
/// response) so a report can be matched to the relay's log.
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The API's answer to a failure.
pub(crate) fn error(reason: &Reason) -> PluginResponse {
    error_retry_after(reason, RETRY_AFTER_SECS.into())
}

/// 429 for a signer over the request quota: retry once the window ends.
pub(crate) fn rate_limited(retry_after_secs: u64) -> PluginResponse {
    error_retry_after(
        &Reason::RateLimited(format!(
            "request quota reached; retry in {retry_after_secs} s"
        )),
        retry_after_secs,
    )
}

/// [`error`] with `retry_after_secs` as the `Retry-After` of a 429/503.
fn error_retry_after(reason: &Reason, retry_after_secs: u64) -> PluginResponse {
    let (status, code) = match reason {
        Reason::Invalid(_) | Reason::TooLarge(_) | Reason::Duplicate(_) | Reason::Conflict(_) => {
            (400, "invalid_request")
        }
        Reason::AuthRequired(_) => (401, "unauthorized"),
        Reason::Restricted(_) | Reason::Blocked(_) => (403, "forbidden"),
        Reason::NotFound(_) => (404, "unavailable"),
        Reason::RateLimited(_) => (429, "rate_limited"),
        // A body that did not arrive in time: this API's retryable class.
        Reason::TooSlow(_)
        | Reason::Closed(_)
        | Reason::Unavailable(_)
        | Reason::Internal(_)
        | Reason::PolicyFailure(_) => (503, "temporarily_unavailable"),
        // Another extension's coded refusal: this API's code for its class.
        Reason::Coded { status, .. } if *status >= 500 => (503, "temporarily_unavailable"),
        Reason::Coded { .. } => (400, "invalid_request"),
    };
    let id = request_id();
    // `wire_text` logs internal causes and never sends them.
    let message = reason.wire_text();
    tracing::debug!(request_id = %id, status, %message, "buzz/v1 request refused");
    let response = private(
        PluginResponse::json(
            status,
            &json!({ "error": { "code": code, "request_id": id, "message": message } }),
        ),
        &id,
    );
    if status == 429 || status == 503 {
        response.with_header("retry-after", retry_after_secs.to_string())
    } else {
        response
    }
}

/// A successful answer, refused when its serialized form exceeds `max_bytes` (a cut
/// list would read as "nothing more").
pub(crate) fn ok(value: &Value, max_bytes: usize) -> Result<PluginResponse, Reason> {
    let response = PluginResponse::json(200, value);
    if response.body.len() > max_bytes {
        return Err(Reason::TooLarge(format!(
            "the answer would exceed {max_bytes} bytes; ask for fewer channels or contexts"
        )));
    }
    Ok(private(response, &request_id()))
}

fn private(response: PluginResponse, id: &str) -> PluginResponse {
    response
        .with_header("cache-control", "private, no-store")
        .with_header("x-request-id", id)
}

/// Refuse a request target (path and query) longer than `max` bytes.
pub(crate) fn check_url(request: &PluginRequest, max: usize) -> Result<(), Reason> {
    let len = request.path.len() + 1 + request.query.len();
    if len > max {
        return Err(Reason::TooLarge(format!("request URL exceeds {max} bytes")));
    }
    Ok(())
}

/// `a=1&b=2` as decoded pairs, in order. Malformed escapes, repeated or unknown names
/// (anything not in `allowed`) are refused.
pub(crate) fn query_pairs(raw: &str, allowed: &[&str]) -> Result<Vec<(String, String)>, Reason> {
    let mut out: Vec<(String, String)> = Vec::new();
    if raw.is_empty() {
        return Ok(out);
    }
    for part in raw.split('&') {
        let (name, value) = part.split_once('=').unwrap_or((part, ""));
        let name = decode(name)?;
        if !allowed.contains(&name.as_str()) {
            return Err(Reason::invalid(format!(
                "unknown query parameter {name:?} (accepted: {})",
                allowed.join(", ")
            )));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(Reason::invalid(format!(
                "query parameter {name:?} repeated"
            )));
        }
        out.push((name, decode(value)?));
    }
    Ok(out)
}

/// Percent-decoding (`+` is a space, as in forms); the result must be UTF-8.
fn decode(s: &str) -> Result<String, Reason> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| Reason::invalid("malformed percent-escape in the query"))?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| Reason::invalid("query is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_strictly() {
        let pairs = query_pairs("a=%5B1%2C2%5D&b=x+y", &["a", "b"]).expect("valid");
        assert_eq!(pairs[0], ("a".into(), "[1,2]".into()));
        assert_eq!(pairs[1], ("b".into(), "x y".into()));
        assert!(query_pairs("c=1", &["a"]).is_err());
        assert!(query_pairs("a=1&a=2", &["a"]).is_err());
        assert!(query_pairs("a=%zz", &["a"]).is_err());
        assert!(query_pairs("a=%", &["a"]).is_err());
        assert!(query_pairs("a=%ff", &["a"]).is_err());
    }

    #[test]
    fn errors_have_the_api_shape() {
        let response = error(&Reason::Unavailable("later".into()));
        assert_eq!(response.status, 503);
        let body: Value = serde_json::from_slice(&response.body).expect("json");
        assert_eq!(body["error"]["code"], "temporarily_unavailable");
        assert_eq!(body["error"]["request_id"].as_str().map(str::len), Some(32));
        let has = |name: &str| response.headers.iter().any(|(n, _)| n == name);
        assert!(has("retry-after") && has("cache-control"));
        assert_eq!(error(&Reason::TooLarge("x".into())).status, 400);
        assert_eq!(error(&Reason::AuthRequired("x".into())).status, 401);
        let limited = rate_limited(42);
        assert_eq!(limited.status, 429);
        let body: Value = serde_json::from_slice(&limited.body).expect("json");
        assert_eq!(body["error"]["code"], "rate_limited");
        assert!(limited
            .headers
            .iter()
            .any(|(n, v)| n == "retry-after" && v == "42"));
    }
}
