//! NIP-AR's snapshot failures: each a [`Reason::Coded`] with the spec's status and code
//! (core turns it into `{"error": code, "code": code}`). Admission and membership
//! refusals keep their normal form, as the spec allows.

use buzz_core::error::Reason;

fn coded(status: u16, code: &'static str, message: impl Into<String>) -> Reason {
    Reason::Coded {
        status,
        code,
        message: message.into(),
    }
}

/// 409: the capture cannot be trusted any more; start a new one.
pub(crate) fn reset(message: impl Into<String>) -> Reason {
    coded(409, "snapshot_reset", message)
}

/// 413: a body batch or the query's scope is too large.
pub(crate) fn limit(message: impl Into<String>) -> Reason {
    coded(413, "snapshot_limit", message)
}

/// 422: a matching artifact lives in a channel version 1 cannot capture (TTL).
pub(crate) fn unsupported_scope(message: impl Into<String>) -> Reason {
    coded(422, "snapshot_unsupported_scope", message)
}

/// 400: the request is malformed.
pub(crate) fn invalid(message: impl Into<String>) -> Reason {
    coded(400, "snapshot_invalid", message)
}

/// 503: the relay cannot serve snapshots right now; retry with backoff.
pub(crate) fn unavailable(message: impl Into<String>) -> Reason {
    coded(503, "snapshot_unavailable", message)
}

/// A failure from elsewhere (storage, Redis, the artifact query parser) in the snapshot
/// contract: "not now" becomes `snapshot_unavailable`, a malformed predicate
/// `snapshot_invalid`, an inspection bound `snapshot_limit`. Admission refusals, coded
/// refusals and internal errors pass through unchanged.
pub(crate) fn contract(reason: Reason) -> Reason {
    match reason {
        Reason::Unavailable(message) => unavailable(message),
        Reason::Invalid(message) => invalid(message),
        Reason::TooLarge(message) => limit(message),
        other => other,
    }
}
