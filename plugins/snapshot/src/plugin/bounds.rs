//! What bounds every snapshot action: its elapsed-time deadline, the database statement
//! limit inside it, admission against the per-process operation budget, and how
//! capture-store refusals read on the wire.

use crate::error::{self, contract};
use crate::limits::Limits;
use crate::scope;
use crate::state::Refusal;
use buzz_core::access::{AccessService, Authority};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::RunQueryDsl;
use std::time::{Duration, Instant};

/// One operation's elapsed-time bound, checked between steps.
#[derive(Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    ms: u64,
}

impl Deadline {
    /// `ms` from now.
    pub(crate) fn after_ms(ms: u64) -> Deadline {
        Deadline {
            at: Instant::now() + Duration::from_millis(ms),
            ms,
        }
    }

    pub(crate) fn check(self) -> Result<(), Reason> {
        if Instant::now() >= self.at {
            return Err(error::unavailable(format!(
                "the snapshot operation exceeded its {} ms limit; retry later",
                self.ms
            )));
        }
        Ok(())
    }
}

/// Bound every following statement of this transaction (PostgreSQL; SQLite's
/// statements are checked between, by the deadline).
pub(super) fn bound_statements(conn: &mut Conn<'_>, ms: u64) -> Result<(), Reason> {
    if let Conn::Pg(c) = conn {
        diesel::sql_query(format!("SET LOCAL statement_timeout = {ms}")).execute(*c)?;
    }
    Ok(())
}

/// The reader's authority decided in this transaction, its statements bounded, and
/// refused when the reader may not capture at all (banned, not a member): what every
/// step that reads captured state starts with.
pub(crate) fn admitted(
    conn: &mut Conn<'_>,
    access: &AccessService,
    community: &buzz_core::community::Community,
    reader: &str,
    now: i64,
    limits: &Limits,
) -> Result<Authority, Reason> {
    bound_statements(conn, limits.statement_ms)?;
    let authority = access
        .authority(conn, community, reader, now, limits.max_inspected)
        .map_err(contract)?;
    scope::admit(&authority)?;
    Ok(authority)
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, Reason> {
    serde_json::from_str(text)
        .map_err(|e| Reason::Internal(anyhow::anyhow!("snapshot {what}: {e}")))
}

pub(super) fn refused(refusal: Refusal, limits: &Limits) -> Reason {
    error::unavailable(match refusal {
        Refusal::Capacity => format!(
            "all {} shared snapshot captures are in use; retry later",
            limits.max_captures
        ),
        Refusal::Community => format!(
            "the free snapshot captures are kept for other communities \
             (captures_reserved_per_community = {}); retry later",
            limits.captures_reserved_per_community
        ),
        Refusal::CommunityBytes => format!(
            "the free snapshot storage is kept for other communities \
             (charged_bytes_reserved_per_community = {}); retry later",
            limits.charged_bytes_reserved_per_community
        ),
        Refusal::Reader => format!(
            "you hold {} captures in this community already; let one expire",
            limits.captures_per_reader
        ),
        Refusal::Bytes => format!(
            "the shared snapshot storage ({} bytes) is full; retry later",
            limits.max_charged_bytes
        ),
        Refusal::Lapsed => "the capture took longer than its registration lease".into(),
    })
}
