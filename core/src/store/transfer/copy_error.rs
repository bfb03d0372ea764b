//! What a failed `copy` tells the operator: a refusal (something they can fix — a
//! non-empty destination, a source that is not complete or not fully migrated, a
//! database that does not open) apart from a failure of the copy itself, so an
//! operator's mistake never reads as the relay's "internal error".

use crate::error::Reason;

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The copy will not start: the text says why and what to do.
    #[error("{0}")]
    Refused(String),
    /// The copy failed while reading, writing or checking.
    #[error(transparent)]
    Failed(#[from] Reason),
}

impl CopyError {
    pub(super) fn refused(message: impl Into<String>) -> Self {
        CopyError::Refused(message.into())
    }
}

/// "1 row", "12 rows".
pub(super) fn rows(n: i64) -> String {
    if n == 1 {
        "1 row".to_owned()
    } else {
        format!("{n} rows")
    }
}
