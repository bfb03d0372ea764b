//! NIP-98: HTTP requests signed by a kind-27235 event in the `Authorization` header.

use super::same_url;
use crate::error::Reason;
use crate::event::{Event, EventLimits};
use crate::replay::ReplayGuard;
use base64::Engine;
use sha2::{Digest, Sha256};
use std::time::Duration;

pub const HTTP_AUTH_KIND: u32 = 27_235;
/// Allowed distance of `created_at` from relay time, seconds.
pub const WINDOW_SECS: i64 = 60;

/// What the relay saw of the request being authorized.
pub struct HttpRequestFacts<'a> {
    pub authorization: Option<&'a str>,
    pub method: &'a str,
    /// `<public_scheme>://<Host as sent><path>[?query]`.
    pub url: String,
    pub body: &'a [u8],
}

fn denied(msg: impl Into<String>) -> Reason {
    Reason::AuthRequired(msg.into())
}

/// Verify the request's NIP-98 header; returns the authenticated pubkey.
pub async fn verify(
    req: &HttpRequestFacts<'_>,
    guard: &dyn ReplayGuard,
    now_secs: i64,
) -> Result<String, Reason> {
    check_header(req.authorization, req.method, &req.url, now_secs)?
        .finish(req.body, guard)
        .await
}

/// An `Authorization` header whose event passed every check that does not need the
/// body: what the relay knows before it reads (and buffers) a single body byte.
pub struct SignedRequest {
    event: Event,
    post: bool,
}

/// Check the header of a request for `method` on `url`: shape, kind, id and
/// signature, time window, `u` and `method`. A request that fails here is refused
/// before its body is read.
pub fn check_header(
    authorization: Option<&str>,
    method: &str,
    url: &str,
    now_secs: i64,
) -> Result<SignedRequest, Reason> {
    let header = authorization.ok_or_else(|| denied("NIP-98 Authorization header required"))?;
    let encoded = header
        .strip_prefix("Nostr ")
        .or_else(|| header.strip_prefix("nostr "))
        .ok_or_else(|| denied("Authorization scheme must be Nostr"))?;
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| denied("Authorization is not valid base64"))?;
    let event: Event = serde_json::from_slice(&json)
        .map_err(|e| denied(format!("Authorization is not a Nostr event: {e}")))?;
    if event.kind != HTTP_AUTH_KIND {
        return Err(denied("auth event must be kind 27235"));
    }
    let limits = EventLimits {
        max_clock_skew_secs: WINDOW_SECS,
        ..EventLimits::default()
    };
    limits
        .check(&event, now_secs)
        .map_err(|e| denied(e.to_string().trim_start_matches("invalid: ").to_owned()))?;
    match event.tag_value("u") {
        Some(u) if same_url(u, url) => {}
        _ => return Err(denied(format!("auth u tag must be {url}"))),
    }
    match event.tag_value("method") {
        Some(m) if m.eq_ignore_ascii_case(method) => {}
        _ => return Err(denied(format!("auth method tag must be {method}"))),
    }
    let post = method.eq_ignore_ascii_case("POST");
    if post && event.tag_value("payload").is_none() {
        return Err(denied("auth payload tag must be the SHA-256 of the body"));
    }
    Ok(SignedRequest { event, post })
}

impl SignedRequest {
    /// The rest, once the body is in: a POST's `payload` must be the SHA-256 of `body`,
    /// and the event must not have been used before. The replay guard runs last, so a
    /// rejected request never burns its auth event. Returns the signer.
    pub async fn finish(self, body: &[u8], guard: &dyn ReplayGuard) -> Result<String, Reason> {
        let event = self.event;
        if self.post {
            let expected = hex::encode(Sha256::digest(body));
            match event.tag_value("payload") {
                Some(p) if p.eq_ignore_ascii_case(&expected) => {}
                _ => return Err(denied("auth payload tag must be the SHA-256 of the body")),
            }
        }
        let ttl = Duration::from_secs((2 * WINDOW_SECS + 1) as u64);
        if !guard.first_use(&event.id, ttl).await? {
            return Err(denied("auth event was already used"));
        }
        Ok(event.pubkey)
    }
}

/// Build an `Authorization` header value (clients, tests, examples).
pub fn authorization_header(
    keys: &crate::keys::Keys,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    created_at: i64,
    nonce: Option<&str>,
) -> String {
    let mut tags = vec![
        vec!["u".to_owned(), url.to_owned()],
        vec!["method".to_owned(), method.to_owned()],
    ];
    if let Some(body) = body {
        tags.push(vec!["payload".into(), hex::encode(Sha256::digest(body))]);
    }
    if let Some(n) = nonce {
        tags.push(vec!["nonce".into(), n.into()]);
    }
    let event = keys.sign(HTTP_AUTH_KIND, tags, "", created_at);
    format!(
        "Nostr {}",
        base64::engine::general_purpose::STANDARD.encode(event.to_json())
    )
}
