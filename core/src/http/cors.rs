//! CORS: what lets a web app in a browser call the relay's HTTP routes (`/query`,
//! `/events`, NIP-86 at `/`, plugins' routes such as `/buzz/v1/*`, NIP-11).
//!
//! Every origin is allowed and answered with `*`: the relay authenticates HTTP callers by
//! a NIP-98 event in the `Authorization` header, never by a cookie or anything else a
//! browser attaches on its own, so a page on another origin can do nothing its user's
//! key did not sign. Preflights (`OPTIONS` with `Access-Control-Request-Method`) are
//! answered here, before routing, for every path; a plain `OPTIONS` still 404s.

use actix_cors::Cors;
use actix_web::http::{header, Method};

/// How long a browser may reuse a preflight's answer, in seconds (a day: the answer
/// never changes while the relay runs).
const PREFLIGHT_MAX_AGE_SECS: usize = 86_400;

/// The middleware `server.rs` wraps every route in.
pub(super) fn layer() -> Cors {
    Cors::default()
        .allow_any_origin()
        .send_wildcard()
        .allowed_methods([
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        // Whatever headers the preflight asks for (`Authorization`, `Content-Type`,
        // `Accept`, a client's own): none of them carries ambient credentials.
        .allow_any_header()
        // Response headers a script may read besides the safelisted ones: when to come
        // back after a 429/503, the body's length for progress bars, what part of a
        // resource a range answer holds, and a refusal's human-readable `X-Reason`
        // (plugins' routes send it, as the protocols they serve ask).
        .expose_headers([
            header::RETRY_AFTER,
            header::CONTENT_LENGTH,
            header::CONTENT_RANGE,
            header::ACCEPT_RANGES,
            header::HeaderName::from_static("x-reason"),
        ])
        .max_age(PREFLIGHT_MAX_AGE_SECS)
}
