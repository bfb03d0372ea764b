//! The one place where failures become wire text.
//!
//! Every path (WebSocket `OK`/`CLOSED`/`NOTICE`, HTTP JSON bodies, plugin routes) turns a
//! [`Reason`] into client text with [`Reason::wire_text`] and into an HTTP status with
//! [`Reason::http_status`]. Nothing else in the relay formats an error for a client.
//!
//! Two audiences, two texts: [`Reason::wire_text`] is what a client may see (for
//! internal and policy failures only a generic line); `Display` is for operators and
//! logs and carries the cause (`{reason}` in a log line, a CLI message or a start-up
//! error). Clients never see `Display`.

/// Why a request was refused. The variant decides the NIP-01 machine-readable prefix and
/// the HTTP status; the string is the human-readable rest of the client's message.
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
    /// A compare-and-swap lost: the write named a state that is no longer current
    /// (`conflict:`, HTTP 409). Retrying with fresh state may succeed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The thing asked for does not exist here (HTTP 404).
    #[error("invalid: {0}")]
    NotFound(String),
    /// Server-side state the request continues was closed by the relay (`closed:`, HTTP
    /// 410): a NIP-77 sync session dropped after its idle timeout, say. Opening it again
    /// works.
    #[error("closed: {0}")]
    Closed(String),
    /// The client did not send its request in time (`error:`, HTTP 408); a retry that
    /// sends faster may work.
    #[error("error: {0}")]
    TooSlow(String),
    /// A budget or a dependency is exhausted right now; retrying later may work
    /// (`error:`, HTTP 503).
    #[error("error: {0}")]
    Unavailable(String),
    /// A refusal with a machine-readable code of its own: an extension whose spec fixes
    /// its error contract (NIP-AR's capture codes, say). HTTP `status` with the body
    /// `{"error": code, "code": code}`; on NIP-01 the prefix follows the status
    /// (`invalid:` for 4xx but 409 `conflict:`, `error:` for 5xx) then the code.
    #[error("{}: {code}: {message}", coded_prefix(*.status))]
    Coded {
        status: u16,
        code: &'static str,
        message: String,
    },
    /// A community policy script failed (error, deadline, memory). Fails closed; the
    /// client sees `error: policy failure` (HTTP 500), operators the cause.
    #[error("policy failure: {0}")]
    PolicyFailure(String),
    /// A bug or a broken dependency. The client only sees a generic message (`error:`,
    /// HTTP 500); operators see the cause chain.
    #[error("internal error: {0:#}")]
    Internal(#[source] anyhow::Error),
}

impl Reason {
    /// Shorthand for the most common refusal.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Reason::Invalid(msg.into())
    }

    /// The NIP-01 message a client sees: machine-readable prefix, colon, human text.
    /// Internal and policy causes are logged here, once, and never sent.
    pub fn wire_text(&self) -> String {
        match self {
            Reason::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error");
                "error: internal error".to_owned()
            }
            Reason::PolicyFailure(cause) => {
                tracing::error!(%cause, "policy failure; request denied");
                "error: policy failure".to_owned()
            }
            client_facing => client_facing.to_string(),
        }
    }

    /// The machine-readable prefix of [`Reason::wire_text`] without its colon (`invalid`,
    /// `error`, ...): what metrics count errors by.
    pub fn prefix(&self) -> &'static str {
        match self {
            Reason::Invalid(_) | Reason::TooLarge(_) | Reason::NotFound(_) => "invalid",
            Reason::Restricted(_) => "restricted",
            Reason::Blocked(_) => "blocked",
            Reason::RateLimited(_) => "rate-limited",
            Reason::AuthRequired(_) => "auth-required",
            Reason::Duplicate(_) => "duplicate",
            Reason::Conflict(_) => "conflict",
            Reason::Closed(_) => "closed",
            Reason::TooSlow(_)
            | Reason::Unavailable(_)
            | Reason::PolicyFailure(_)
            | Reason::Internal(_) => "error",
            Reason::Coded { status, .. } => coded_prefix(*status),
        }
    }

    /// The HTTP status used by the HTTP bridge and plugin routes.
    pub fn http_status(&self) -> u16 {
        match self {
            Reason::Invalid(_) => 400,
            Reason::TooLarge(_) => 413,
            Reason::Restricted(_) | Reason::Blocked(_) => 403,
            Reason::RateLimited(_) => 429,
            Reason::AuthRequired(_) => 401,
            Reason::Duplicate(_) => 200,
            Reason::Conflict(_) => 409,
            Reason::NotFound(_) => 404,
            Reason::Closed(_) => 410,
            Reason::TooSlow(_) => 408,
            Reason::Unavailable(_) => 503,
            Reason::Internal(_) | Reason::PolicyFailure(_) => 500,
            Reason::Coded { status, .. } => *status,
        }
    }

    /// The machine-readable code of a [`Reason::Coded`] refusal.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Reason::Coded { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// The NIP-01 prefix of a coded refusal, from its HTTP status.
fn coded_prefix(status: u16) -> &'static str {
    match status {
        409 => "conflict",
        400..=499 => "invalid",
        _ => "error",
    }
}

/// A protocol rule broken (`buzz_nostr`): the same prefix, as a relay refusal.
impl From<buzz_nostr::error::Refusal> for Reason {
    fn from(refusal: buzz_nostr::error::Refusal) -> Self {
        use buzz_nostr::error::Refusal;
        match refusal {
            Refusal::Invalid(msg) => Reason::Invalid(msg),
            Refusal::AuthRequired(msg) => Reason::AuthRequired(msg),
        }
    }
}

/// Result type of every request-facing operation.
pub type Outcome<T> = Result<T, Reason>;

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn clients_never_see_causes_operators_do() {
        let internal = Reason::Internal(anyhow::anyhow!("disk on fire").context("writing"));
        assert_eq!(internal.wire_text(), "error: internal error");
        let operator = internal.to_string();
        assert!(
            operator.contains("writing") && operator.contains("disk on fire"),
            "{operator}"
        );

        let policy = Reason::PolicyFailure("access.lua:3: attempt to index nil".into());
        assert_eq!(policy.wire_text(), "error: policy failure");
        assert!(policy.to_string().contains("access.lua:3"));

        let refused = Reason::Restricted("members only".into());
        assert_eq!(refused.wire_text(), "restricted: members only");
        assert_eq!(refused.to_string(), refused.wire_text());
    }

    #[test]
    fn each_reason_has_its_prefix_and_status() {
        let cases = [
            (Reason::Invalid("x".into()), "invalid: x", 400),
            (Reason::TooLarge("x".into()), "invalid: x", 413),
            (Reason::Restricted("x".into()), "restricted: x", 403),
            (Reason::Blocked("x".into()), "blocked: x", 403),
            (Reason::RateLimited("x".into()), "rate-limited: x", 429),
            (Reason::AuthRequired("x".into()), "auth-required: x", 401),
            (Reason::Conflict("x".into()), "conflict: x", 409),
            (Reason::NotFound("x".into()), "invalid: x", 404),
            (Reason::TooSlow("x".into()), "error: x", 408),
            (Reason::Closed("x".into()), "closed: x", 410),
            (Reason::Unavailable("x".into()), "error: x", 503),
            (
                Reason::Coded {
                    status: 409,
                    code: "x_reset",
                    message: "x".into(),
                },
                "conflict: x_reset: x",
                409,
            ),
            (
                Reason::Coded {
                    status: 503,
                    code: "x_down",
                    message: "x".into(),
                },
                "error: x_down: x",
                503,
            ),
        ];
        for (reason, text, status) in cases {
            assert_eq!(
                (reason.wire_text().as_str(), reason.http_status()),
                (text, status)
            );
            // The metrics prefix is the wire text's own.
            assert!(
                text.starts_with(&format!("{}: ", reason.prefix())),
                "{text}"
            );
        }
    }
}
