//! The one place where failures become wire text.
//!
//! Every path (WebSocket `OK`/`CLOSED`/`NOTICE`, HTTP JSON bodies) turns a [`Reason`]
//! into text with [`Reason::wire_text`] and into an HTTP status with
//! [`Reason::http_status`]. Nothing else in the relay formats an error for a client.

use actix_web::http::StatusCode;

/// Why a request was refused. The variant decides the NIP-01 machine-readable prefix and
/// the HTTP status; the string is the human-readable rest of the message.
#[derive(Debug, thiserror::Error)]
pub enum Reason {
    /// Malformed or semantically wrong input (`invalid:`, HTTP 400).
    #[error("invalid: {0}")]
    Invalid(String),
    /// Body or frame too large (`invalid:`, HTTP 413).
    #[error("invalid: {0}")]
    TooLarge(String),
    /// The caller lacks the rights for this (`restricted:`, HTTP 403).
    #[error("restricted: {0}")]
    Restricted(String),
    /// The caller is banned or the content is refused outright (`blocked:`, HTTP 403).
    #[error("blocked: {0}")]
    Blocked(String),
    /// Too many requests (`rate-limited:`, HTTP 429).
    #[error("rate-limited: {0}")]
    RateLimited(String),
    /// Authentication missing or wrong (`auth-required:`, HTTP 401).
    #[error("auth-required: {0}")]
    AuthRequired(String),
    /// The event is already stored (`duplicate:`); for an `OK` this is still a success.
    #[error("duplicate: {0}")]
    Duplicate(String),
    /// The thing asked for does not exist here (HTTP 404).
    #[error("invalid: {0}")]
    NotFound(String),
    /// A budget or a dependency is exhausted right now; retrying later may work
    /// (`error:`, HTTP 503).
    #[error("error: {0}")]
    Unavailable(String),
    /// A community policy script failed (error, deadline, memory). Fails closed; the
    /// cause is logged, the client sees `error: policy failure` (HTTP 500).
    #[error("error: policy failure")]
    PolicyFailure(String),
    /// A bug or a broken dependency. The cause is logged where it is turned into wire
    /// text; the client only sees a generic message (`error:`, HTTP 500).
    #[error("error: internal error")]
    Internal(#[source] anyhow::Error),
}

impl Reason {
    /// Shorthand for the most common refusal.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Reason::Invalid(msg.into())
    }

    /// The NIP-01 message: machine-readable prefix, colon, human text.
    /// Internal causes are logged here, once, and never sent to the client.
    pub fn wire_text(&self) -> String {
        match self {
            Reason::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error")
            }
            Reason::PolicyFailure(cause) => {
                tracing::error!(%cause, "policy failure; request denied")
            }
            _ => {}
        }
        self.to_string()
    }

    /// The HTTP status used by the HTTP bridge and plugin routes.
    pub fn http_status(&self) -> StatusCode {
        match self {
            Reason::Invalid(_) => StatusCode::BAD_REQUEST,
            Reason::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Reason::Restricted(_) | Reason::Blocked(_) => StatusCode::FORBIDDEN,
            Reason::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            Reason::AuthRequired(_) => StatusCode::UNAUTHORIZED,
            Reason::Duplicate(_) => StatusCode::OK,
            Reason::NotFound(_) => StatusCode::NOT_FOUND,
            Reason::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Reason::Internal(_) | Reason::PolicyFailure(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body `{"error": "<message>"}` that every HTTP error carries.
    pub fn http_response(&self) -> actix_web::HttpResponse {
        actix_web::HttpResponse::build(self.http_status())
            .json(serde_json::json!({ "error": self.wire_text() }))
    }
}

impl From<crate::store::StoreError> for Reason {
    fn from(err: crate::store::StoreError) -> Self {
        match err.transient() {
            Some(text) => {
                tracing::warn!(error = %err, "storage temporarily unavailable");
                Reason::Unavailable(text.to_owned())
            }
            None => Reason::Internal(anyhow::Error::new(err)),
        }
    }
}

impl actix_web::ResponseError for Reason {
    fn status_code(&self) -> StatusCode {
        self.http_status()
    }
    fn error_response(&self) -> actix_web::HttpResponse {
        self.http_response()
    }
}

/// Result type of every request-facing operation.
pub type Outcome<T> = Result<T, Reason>;
