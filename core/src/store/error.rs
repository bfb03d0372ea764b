//! `StoreError`, what the storage layer's failures are, and how each becomes the
//! [`Reason`] a client gets: the store owns these conversions so the error layer below
//! it never has to know the store.

use crate::error::Reason;

/// Failures of the storage layer, each with its cause.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] diesel::result::Error),
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    #[error("connection pool error: {0}")]
    Pool(#[from] diesel::r2d2::PoolError),
    #[error("migration failed: {0}")]
    Migration(String),
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
    #[error("unsupported database url {0:?} (use sqlite://PATH or postgres://...)")]
    BadUrl(String),
    #[error("the storage writer has stopped")]
    WriterGone,
    #[error("blocking task failed: {0}")]
    Join(String),
    #[error(
        "a copy into this database did not finish ({0}): it is not a complete database; \
         drop it, create it empty and run `buzz-relay copy` again"
    )]
    UnfinishedCopy(String),
}

/// A storage failure as the client's answer: "not now" ([`StoreError::transient`]) is a
/// retryable `error:` / 503, anything else internal.
impl From<StoreError> for Reason {
    fn from(err: StoreError) -> Self {
        match err.transient() {
            Some(text) => {
                tracing::warn!(error = %err, "storage temporarily unavailable");
                Reason::Unavailable(text.to_owned())
            }
            None => Reason::Internal(anyhow::Error::new(err)),
        }
    }
}

impl From<diesel::result::Error> for Reason {
    fn from(err: diesel::result::Error) -> Self {
        Reason::from(StoreError::Db(err))
    }
}

impl StoreError {
    /// The client-facing text when this failure says "not now" rather than "broken":
    /// no pooled connection came free in time, the database is locked by another writer,
    /// a statement or lock timed out, the connection dropped, or a serialization
    /// conflict. These reach clients as retryable `error:` (HTTP 503); anything else is
    /// an internal error (500).
    pub fn transient(&self) -> Option<&'static str> {
        use diesel::result::{DatabaseErrorKind as Kind, Error};
        // Matched by message: neither backend gives diesel a kind for these. SQLite's
        // texts are fixed; PostgreSQL's are its (default, English) server messages.
        const TIMEOUTS: [&str; 4] = [
            "database is locked",
            "database table is locked",
            "statement timeout",
            "lock timeout",
        ];
        match self {
            StoreError::Pool(_) => Some("database busy: no connection free; retry with backoff"),
            StoreError::Db(Error::DatabaseError(Kind::SerializationFailure, _)) => {
                Some("database conflict; retry")
            }
            StoreError::Db(Error::DatabaseError(_, info))
                if info.message().contains("deadlock detected") =>
            {
                Some("database conflict; retry")
            }
            StoreError::Db(Error::DatabaseError(
                Kind::ClosedConnection | Kind::UnableToSendCommand,
                _,
            )) => Some("database connection lost; retry with backoff"),
            StoreError::Db(Error::DatabaseError(_, info))
                if TIMEOUTS.iter().any(|t| info.message().contains(t)) =>
            {
                Some("database timeout; retry with backoff")
            }
            _ => None,
        }
    }
}
