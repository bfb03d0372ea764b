//! Every way a media request is refused: its HTTP status (BUD-01, 02, 06, 12 tables),
//! the `X-Reason` text a client may show, and the name `/metrics` counts it under.

use buzz_core::error::Reason;

/// A refused media request. The text is what `X-Reason` says; it names no blob another
/// reader could not see (every unreadable blob is [`MediaError::NotFound`]).
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Missing, malformed, expired or mismatched authorization (401).
    #[error("{0}")]
    Unauthorized(String),
    /// Understood but not allowed: not a member, cannot post in the channel, banned (403).
    #[error("{0}")]
    Forbidden(String),
    /// Unknown, unreadable or other-community blob: all the same (404).
    #[error("blob not found")]
    NotFound,
    /// A malformed path, header or query (400).
    #[error("{0}")]
    BadRequest(String),
    /// `X-SHA-256` (or the auth's hash) and the bytes disagree (409).
    #[error("{0}")]
    HashMismatch(String),
    /// `HEAD /upload` without `X-Content-Length` (411).
    #[error("X-Content-Length is required")]
    LengthRequired,
    /// Past `max_blob_bytes` (413).
    #[error("{0}")]
    TooLarge(String),
    /// A type `allowed_types` does not list (415).
    #[error("{0}")]
    UnsupportedType(String),
    /// A range outside the blob (416); carries the blob's size for `Content-Range`.
    #[error("range not satisfiable")]
    RangeNotSatisfiable(u64),
    /// Past a quota (429: BUD-02's "rate limit or quota").
    #[error("{0}")]
    Quota(String),
    /// The body stopped arriving (408).
    #[error("{0}")]
    TooSlow(String),
    /// Busy or a storage failure worth retrying (503).
    #[error("{0}")]
    Unavailable(String),
    /// A failure of ours (500); the cause is logged, never sent.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl MediaError {
    pub fn status(&self) -> u16 {
        match self {
            MediaError::Unauthorized(_) => 401,
            MediaError::Forbidden(_) => 403,
            MediaError::NotFound => 404,
            MediaError::BadRequest(_) => 400,
            MediaError::HashMismatch(_) => 409,
            MediaError::LengthRequired => 411,
            MediaError::TooLarge(_) => 413,
            MediaError::UnsupportedType(_) => 415,
            MediaError::RangeNotSatisfiable(_) => 416,
            MediaError::Quota(_) => 429,
            MediaError::TooSlow(_) => 408,
            MediaError::Unavailable(_) => 503,
            MediaError::Internal(_) => 500,
        }
    }

    /// The refusal's name in `buzz_plugin_counts_total{plugin="media"}`.
    pub fn metric(&self) -> &'static str {
        match self {
            MediaError::Unauthorized(_) => "refused_auth",
            MediaError::Forbidden(_) => "refused_forbidden",
            MediaError::NotFound => "refused_not_found",
            MediaError::BadRequest(_) => "refused_bad_request",
            MediaError::HashMismatch(_) => "refused_hash",
            MediaError::LengthRequired => "refused_length_required",
            MediaError::TooLarge(_) => "refused_too_large",
            MediaError::UnsupportedType(_) => "refused_type",
            MediaError::RangeNotSatisfiable(_) => "refused_range",
            MediaError::Quota(_) => "refused_quota",
            MediaError::TooSlow(_) => "refused_slow",
            MediaError::Unavailable(_) => "refused_unavailable",
            MediaError::Internal(_) => "failed_internal",
        }
    }

    pub fn io(context: &str, err: std::io::Error) -> MediaError {
        MediaError::Internal(anyhow::Error::new(err).context(context.to_owned()))
    }
}

/// Core's refusals (storage, access, the body stream) in media's terms.
impl From<Reason> for MediaError {
    fn from(reason: Reason) -> MediaError {
        let text = reason.wire_text();
        match reason {
            Reason::AuthRequired(_) => MediaError::Unauthorized(text),
            Reason::Restricted(_) | Reason::Blocked(_) => MediaError::Forbidden(text),
            Reason::NotFound(_) => MediaError::NotFound,
            Reason::Invalid(_) | Reason::Duplicate(_) | Reason::Conflict(_) => {
                MediaError::BadRequest(text)
            }
            Reason::TooLarge(_) => MediaError::TooLarge(text),
            Reason::RateLimited(_) => MediaError::Quota(text),
            Reason::TooSlow(_) => MediaError::TooSlow(text),
            Reason::Unavailable(_) | Reason::Closed(_) => MediaError::Unavailable(text),
            Reason::Coded { .. } | Reason::PolicyFailure(_) | Reason::Internal(_) => {
                MediaError::Internal(anyhow::anyhow!("{reason}"))
            }
        }
    }
}
