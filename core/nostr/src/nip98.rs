//! NIP-98: HTTP requests signed by a kind-27235 event in the `Authorization` header —
//! the checks on the event itself. That an event is used once is the relay's replay
//! guard's job (`buzz_core::auth::nip98`).

use crate::error::Refusal;
use crate::event::{Event, EventLimits};
use crate::url::same_url;
use base64::Engine;
use sha2::{Digest, Sha256};

pub const HTTP_AUTH_KIND: u32 = 27_235;
/// Allowed distance of `created_at` from relay time, seconds.
pub const WINDOW_SECS: i64 = 60;

fn denied(msg: impl Into<String>) -> Refusal {
    Refusal::AuthRequired(msg.into())
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
) -> Result<SignedRequest, Refusal> {
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
        .map_err(|e| denied(e.message()))?;
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
    /// The rest, once the body is in: a POST's `payload` must be the SHA-256 of `body`.
    /// Returns the event, for the relay's replay guard to see once.
    pub fn check_body(self, body: &[u8]) -> Result<Event, Refusal> {
        let event = self.event;
        if self.post {
            let expected = hex::encode(Sha256::digest(body));
            match event.tag_value("payload") {
                Some(p) if p.eq_ignore_ascii_case(&expected) => {}
                _ => return Err(denied("auth payload tag must be the SHA-256 of the body")),
            }
        }
        Ok(event)
    }
}

/// How long an auth event must be remembered to be refused a second time: its whole
/// acceptance window on both sides of relay time, plus a second.
pub const REPLAY_TTL_SECS: u64 = (2 * WINDOW_SECS + 1) as u64;

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
