//! Who is calling: the `Authorization: Nostr <base64 event>` header, as a BUD-11
//! kind-24242 token or a NIP-98 kind-27235 event.
//!
//! A 24242 token is checked here (BUD-11 "Validation"): its signature and id, `created_at`
//! not in the future, an `expiration` still ahead, a `t` naming the endpoint's verb, and
//! any `server` tags naming this host. It may be reused until it expires (BUD-11 says
//! so; there is no replay guard for it). The base64 may be standard or URL-safe, padded
//! or not. A NIP-98 event goes through core's checks and core's replay guard
//! (`buzz_core::auth::nip98`), never a second implementation.

use crate::error::MediaError;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use buzz_core::auth::nip98::{verify_event, HttpRequestFacts};
use buzz_core::plugin::{PluginRequest, Services};
use buzz_nostr::event::{Event, EventLimits};
use buzz_nostr::host::normalize_host;

/// BUD-11's authorization kind.
pub(crate) const BLOSSOM_AUTH_KIND: u32 = 24_242;
/// NIP-98's.
const HTTP_AUTH_KIND: u32 = buzz_nostr::nip98::HTTP_AUTH_KIND;
/// How far ahead of relay time a token's `created_at` may be (clocks differ a little).
const FUTURE_SKEW_SECS: i64 = 60;
/// Longest `Authorization` header read, bytes (a token with a few `x` tags is < 2 KiB).
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The action an endpoint performs: a 24242 token's `t` must name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Upload,
    List,
    Delete,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Upload => "upload",
            Verb::List => "list",
            Verb::Delete => "delete",
        }
    }
}

/// An authenticated caller and what their authorization scopes.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub pubkey: String,
    /// The `h` tag: the channel an upload binds its blob to.
    pub channel: Option<String>,
    /// The `x` tags of a 24242 token (empty for NIP-98).
    pub hashes: Vec<String>,
    /// A NIP-98 `payload` tag: the SHA-256 of the body, which for an upload is the blob.
    pub payload: Option<String>,
    /// Whether this is a BUD-11 token (whose `x` tags scope it).
    pub token: bool,
}

impl Caller {
    /// Whether the authorization allows acting on blob `sha256`: a token's `x` tags must
    /// name it when `required` (and when any are present); NIP-98 names the URL instead,
    /// and for an upload its `payload`, when present, must be the blob.
    pub(crate) fn covers(&self, sha256: &str, required: bool) -> bool {
        if self.token {
            if self.hashes.is_empty() {
                return !required;
            }
            return self.hashes.iter().any(|x| x == sha256);
        }
        self.payload
            .as_deref()
            .is_none_or(|p| p.eq_ignore_ascii_case(sha256))
    }
}

/// The caller of `request`, whose authorization must be for `verb`.
pub(crate) async fn caller(
    services: &Services,
    request: &PluginRequest,
    verb: Verb,
) -> Result<Caller, MediaError> {
    let header = request
        .header("authorization")
        .ok_or_else(|| MediaError::Unauthorized("authorization required".into()))?;
    if header.len() > MAX_HEADER_BYTES {
        return Err(MediaError::Unauthorized(
            "authorization header too long".into(),
        ));
    }
    let encoded = header
        .strip_prefix("Nostr ")
        .or_else(|| header.strip_prefix("nostr "))
        .ok_or_else(|| MediaError::Unauthorized("authorization scheme must be Nostr".into()))?
        .trim();
    let json = decode(encoded)
        .ok_or_else(|| MediaError::Unauthorized("authorization is not base64".into()))?;
    let event: Event = serde_json::from_slice(&json).map_err(|e| {
        MediaError::Unauthorized(format!("authorization is not a Nostr event: {e}"))
    })?;
    let now = services.clock.now_secs();
    match event.kind {
        BLOSSOM_AUTH_KIND => token(event, request, verb, now),
        HTTP_AUTH_KIND => nip98(services, request, now).await,
        kind => Err(MediaError::Unauthorized(format!(
            "authorization must be kind {BLOSSOM_AUTH_KIND} or {HTTP_AUTH_KIND}, not {kind}"
        ))),
    }
}

/// Standard or URL-safe base64, padded or not.
fn decode(encoded: &str) -> Option<Vec<u8>> {
    let lenient =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    [
        GeneralPurpose::new(&alphabet::STANDARD, lenient),
        GeneralPurpose::new(&alphabet::URL_SAFE, lenient),
    ]
    .iter()
    .find_map(|engine| engine.decode(encoded).ok())
}

fn token(
    event: Event,
    request: &PluginRequest,
    verb: Verb,
    now: i64,
) -> Result<Caller, MediaError> {
    let denied = |why: String| MediaError::Unauthorized(why);
    EventLimits {
        max_clock_skew_secs: FUTURE_SKEW_SECS,
        ..EventLimits::default()
    }
    .check_history(&event, now)
    .map_err(|e| denied(format!("authorization: {}", e.message())))?;
    match event.expiration() {
        Ok(Some(at)) if at > now => {}
        Ok(Some(_)) => return Err(denied("authorization has expired".into())),
        Ok(None) => return Err(denied("authorization needs an expiration tag".into())),
        Err(e) => return Err(denied(format!("authorization: {}", e.message()))),
    }
    if !event.tag_values("t").any(|t| t == verb.word()) {
        return Err(denied(format!(
            "authorization's t tag must be \"{}\"",
            verb.word()
        )));
    }
    let servers: Vec<&str> = event.tag_values("server").collect();
    if !servers.is_empty() {
        let host = normalize_host(&request.ctx.host_header);
        let host = host.split(':').next().unwrap_or_default();
        if !servers.iter().any(|s| s.eq_ignore_ascii_case(host)) {
            return Err(denied(
                "authorization's server tags do not name this server".into(),
            ));
        }
    }
    Ok(Caller {
        channel: event.tag_value("h").map(str::to_owned),
        hashes: event.tag_values("x").map(str::to_owned).collect(),
        payload: None,
        token: true,
        pubkey: event.pubkey,
    })
}

/// Core's NIP-98 checks (URL, method, time window, signature) and replay guard. The body
/// is not hashed here: an upload's `payload` is compared with the blob once it is in.
async fn nip98(
    services: &Services,
    request: &PluginRequest,
    now: i64,
) -> Result<Caller, MediaError> {
    let facts = HttpRequestFacts {
        authorization: request.header("authorization"),
        method: &request.method,
        url: request.url.clone(),
        body: &[],
    };
    let event = verify_event(&facts, services.replay.as_ref(), now).await?;
    Ok(Caller {
        channel: event.tag_value("h").map(str::to_owned),
        hashes: Vec::new(),
        payload: event.tag_value("payload").map(str::to_owned),
        token: false,
        pubkey: event.pubkey,
    })
}
