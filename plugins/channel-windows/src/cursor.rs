//! The composite cursor `(created_at, id)`: a position in the total order
//! `created_at DESC, id ASC` (windows) or `created_at ASC, id ASC` (legacy threads).
//!
//! One-second timestamps alone cannot tell same-second events apart, so every cursor
//! carries the event id as a tie-breaker (NIP-CW "Motivation").

use serde_json::{json, Value};

/// A position in an event order: unix seconds plus the 64-character lowercase hex id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: i64,
    pub id: String,
}

impl Cursor {
    pub fn new(created_at: i64, id: impl Into<String>) -> Cursor {
        Cursor {
            created_at,
            id: id.into(),
        }
    }

    /// Canonical `<created_at>:<id>` (the `39006` `d`-tag suffix of a continuation).
    pub fn d_suffix(&self) -> String {
        format!("{}:{}", self.created_at, self.id)
    }

    /// `{"created_at": .., "id": ..}` as carried in `next_cursor`.
    pub fn to_json(&self) -> Value {
        json!({"created_at": self.created_at, "id": self.id})
    }
}

/// `next_cursor` content value: the cursor, or `null` when there is none.
pub(crate) fn next_cursor_json(cursor: Option<&Cursor>) -> Value {
    cursor.map_or(Value::Null, Cursor::to_json)
}
