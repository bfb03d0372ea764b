//! The answer of a policy check.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a request is denied; each maps to a NIP-01 machine-readable prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DenyKind {
    /// `invalid:` — the request itself is wrong (e.g. posting to an archived channel).
    Invalid,
    /// `restricted:` — the actor may not do this.
    Restricted,
    /// `blocked:` — the actor is banned.
    Blocked,
    /// `rate-limited:` — too many requests.
    RateLimited,
    /// `auth-required:` — authenticate first.
    AuthRequired,
}

impl DenyKind {
    /// Every kind, in declaration order.
    pub const ALL: [DenyKind; 5] = [
        DenyKind::Invalid,
        DenyKind::Restricted,
        DenyKind::Blocked,
        DenyKind::RateLimited,
        DenyKind::AuthRequired,
    ];

    /// The string scripts pass to `buzz.deny` and the NIP-01 prefix (without the colon).
    pub fn as_str(self) -> &'static str {
        match self {
            DenyKind::Invalid => "invalid",
            DenyKind::Restricted => "restricted",
            DenyKind::Blocked => "blocked",
            DenyKind::RateLimited => "rate-limited",
            DenyKind::AuthRequired => "auth-required",
        }
    }
}

impl fmt::Display for DenyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`DenyKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown deny kind {0:?} (expected invalid, restricted, blocked, rate-limited or auth-required)")]
pub struct UnknownDenyKind(pub String);

impl FromStr for DenyKind {
    type Err = UnknownDenyKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DenyKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownDenyKind(s.to_owned()))
    }
}

/// The outcome of a check. Errors are not verdicts: they are `Err(PolicyError)` and core
/// fails closed on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny { kind: DenyKind, message: String },
}

impl Verdict {
    pub fn deny(kind: DenyKind, message: impl Into<String>) -> Verdict {
        Verdict::Deny {
            kind,
            message: message.into(),
        }
    }

    pub fn is_allow(&self) -> bool {
        matches!(self, Verdict::Allow)
    }
}

impl fmt::Display for Verdict {
    /// `allow`, or the NIP-01 text `kind: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Allow => f.write_str("allow"),
            Verdict::Deny { kind, message } => write!(f, "{kind}: {message}"),
        }
    }
}
