//! NIP-98 on the relay: the event checks of `buzz_nostr::nip98`, then the replay guard,
//! so an `Authorization` header is accepted once across every relay process.

use crate::error::Reason;
use crate::replay::ReplayGuard;
use buzz_nostr::event::Event;
use buzz_nostr::nip98::{check_header, SignedRequest, REPLAY_TTL_SECS};
use std::time::Duration;

/// What the relay saw of the request being authorized.
pub struct HttpRequestFacts<'a> {
    pub authorization: Option<&'a str>,
    pub method: &'a str,
    /// `<public_scheme>://<Host as sent><path>[?query]`.
    pub url: String,
    pub body: &'a [u8],
}

/// Verify the request's NIP-98 header; returns the authenticated pubkey.
pub async fn verify(
    req: &HttpRequestFacts<'_>,
    guard: &dyn ReplayGuard,
    now_secs: i64,
) -> Result<String, Reason> {
    Ok(verify_event(req, guard, now_secs).await?.pubkey)
}

/// [`verify`], returning the whole auth event (for a route that reads more of its tags).
pub async fn verify_event(
    req: &HttpRequestFacts<'_>,
    guard: &dyn ReplayGuard,
    now_secs: i64,
) -> Result<Event, Reason> {
    let header = check_header(req.authorization, req.method, &req.url, now_secs)?;
    finish_event(header, req.body, guard).await
}

/// A header that passed [`check_header`], once its body is in: the body's checks, then
/// the replay guard. The guard runs last, so a rejected request never burns its auth
/// event. Returns the signer.
pub async fn finish(
    header: SignedRequest,
    body: &[u8],
    guard: &dyn ReplayGuard,
) -> Result<String, Reason> {
    Ok(finish_event(header, body, guard).await?.pubkey)
}

async fn finish_event(
    header: SignedRequest,
    body: &[u8],
    guard: &dyn ReplayGuard,
) -> Result<Event, Reason> {
    let event = header.check_body(body)?;
    if !guard
        .first_use(&event.id, Duration::from_secs(REPLAY_TTL_SECS))
        .await?
    {
        return Err(Reason::AuthRequired("auth event was already used".into()));
    }
    Ok(event)
}
