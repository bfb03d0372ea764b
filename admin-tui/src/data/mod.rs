//! Data gathering, apart from the UI (the console only draws a [`Snapshot`]): the
//! relay's own database and config (works with the relay stopped), each relay
//! process's `/metrics`, the live NIP-11 document, NIP-86 calls and policy dry-runs.
//!
//! This is the one place besides `src/main.rs` that may name plugins. Every plugin's
//! pane data is its `AdminPanel` (see `ui/plugins.rs`), except one view that is not a
//! panel: a reader's read-state frontiers (`frontiers.rs`, the read-state plugin's
//! `reader_frontiers`), asked for one (community, pubkey) at a time.

pub mod captures;
pub mod dryrun;
pub mod figures;
pub mod frontiers;
pub mod history;
pub mod nip86;
pub mod report;
pub mod sources;

use buzz_core::store::inspect::{AppliedAt, IndexState};
use buzz_core::store::moderation::{MemberListing, SanctionListing};
use figures::Live;
use report::Report;

/// A value from a source that may be down: the last good value, and the error of the
/// latest attempt when it failed (the UI then marks the value stale).
#[derive(Debug, Clone)]
pub struct Sourced<T> {
    pub value: Option<T>,
    pub error: Option<String>,
}

impl<T> Default for Sourced<T> {
    fn default() -> Self {
        Sourced {
            value: None,
            error: None,
        }
    }
}

impl<T> Sourced<T> {
    /// Record one refresh: a success replaces the value, a failure keeps it (stale).
    pub fn update(&mut self, result: Result<T, String>) {
        match result {
            Ok(value) => {
                self.value = Some(value);
                self.error = None;
            }
            Err(error) => self.error = Some(error),
        }
    }

    pub fn is_stale(&self) -> bool {
        self.error.is_some()
    }
}

/// Moderation state of one community, from the database.
#[derive(Debug, Clone)]
pub struct CommunityModeration {
    pub host: String,
    pub sanctions: Vec<SanctionListing>,
    pub members: Vec<MemberListing>,
}

/// Everything read from the database and config.
pub struct DbState {
    pub report: Report,
    /// When each applied migration ran.
    pub applied_at: Vec<AppliedAt>,
    /// PostgreSQL indexes and their `pg_index` flags (`None` on SQLite).
    pub indexes: Option<Vec<IndexState>>,
    pub moderation: Vec<CommunityModeration>,
}

/// One relay process's metrics endpoint, what it last said, and its last minutes (the
/// Overview's charts).
#[derive(Debug, Clone)]
pub struct Process {
    pub addr: String,
    pub live: Sourced<Live>,
    pub history: history::History,
}

impl Process {
    pub fn new(addr: impl Into<String>) -> Process {
        Process {
            addr: addr.into(),
            live: Sourced::default(),
            history: history::History::default(),
        }
    }

    /// Record one scrape taken at `at` (a failure keeps the last figures, stale, and is a
    /// gap in the history).
    pub fn record(&mut self, at: std::time::Instant, live: Result<Live, String>) {
        self.history.record(at, live.as_ref().ok());
        self.live.update(live);
    }
}

/// What every pane draws from.
#[derive(Default)]
pub struct Snapshot {
    pub db: Sourced<DbState>,
    pub processes: Vec<Process>,
    /// The relay's NIP-11 document (plugin fields), from the running relay.
    pub nip11: Sourced<serde_json::Value>,
    /// The snapshot plugin's captures, from Redis or the database.
    pub captures: Sourced<captures::CapturesView>,
    /// The reader the Frontiers pane asked about, refreshed with the database.
    pub frontiers: Sourced<frontiers::Frontiers>,
}
