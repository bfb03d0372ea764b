//! Why the protocol refuses an event, a filter or an auth event.
//!
//! The relay turns a [`Refusal`] into its own error type (and from there into wire text,
//! in one place); the NIP-01 prefix a refusal carries is the protocol's, so it is fixed
//! here.

/// A protocol rule the input breaks. `Display` is the NIP-01 message: the
/// machine-readable prefix, a colon, the human text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Malformed or semantically wrong input (`invalid:`).
    #[error("invalid: {0}")]
    Invalid(String),
    /// An auth event (NIP-42, NIP-98) that does not authenticate (`auth-required:`).
    #[error("auth-required: {0}")]
    AuthRequired(String),
}

impl Refusal {
    /// Shorthand for the most common refusal.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Refusal::Invalid(msg.into())
    }

    /// The human text without its prefix.
    pub fn message(&self) -> &str {
        match self {
            Refusal::Invalid(m) | Refusal::AuthRequired(m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Refusal;

    #[test]
    fn each_refusal_has_its_prefix() {
        assert_eq!(Refusal::invalid("x").to_string(), "invalid: x");
        assert_eq!(
            Refusal::AuthRequired("y".into()).to_string(),
            "auth-required: y"
        );
        assert_eq!(Refusal::invalid("x").message(), "x");
    }
}
