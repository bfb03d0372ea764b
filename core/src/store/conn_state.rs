//! What the store remembers about one pooled SQLite connection, kept where diesel lets a
//! connection carry something of ours: its instrumentation, which sees every statement
//! the connection prepares and can be found again by downcasting.
//!
//! - How many statements its cache holds, so a client cycling through filter shapes
//!   cannot grow it (`one_of.rs` makes every shape one cacheable text; diesel's cache
//!   itself has no bound and no eviction).
//! - Which generation of planner statistics it has loaded (`planner_stats.rs`), so a
//!   checkout knows without asking SQLite (a `PRAGMA`, parsed anew, on every read).

use diesel::connection::{CacheSize, Connection, Instrumentation, InstrumentationEvent};
use diesel::sqlite::SqliteConnection;

/// How many statements one SQLite connection may keep prepared before it lets them all
/// go. The relay's fixed statements are a few dozen; each filter shape a client uses adds
/// one. Far above what chat clients use, far below what would hold memory that matters
/// (a prepared statement is a few kilobytes).
pub(crate) const MAX_CACHED_STATEMENTS: usize = 500;

/// Installed on every pooled SQLite connection as its instrumentation. Events go on to
/// the process's default instrumentation, if one is set (tests record statements with
/// one).
pub(crate) struct ConnState {
    cached_statements: usize,
    stats_generation: i64,
    inner: Option<Box<dyn Instrumentation>>,
}

impl ConnState {
    /// State for a new connection, in front of the instrumentation diesel would have
    /// given it.
    pub(crate) fn new() -> ConnState {
        ConnState {
            cached_statements: 0,
            stats_generation: 0,
            inner: diesel::connection::get_default_instrumentation(),
        }
    }

    /// `conn`'s state, if it is a pooled connection.
    pub(crate) fn of(conn: &mut SqliteConnection) -> Option<&mut ConnState> {
        conn.instrumentation().downcast_mut::<ConnState>()
    }

    /// Statements added to the connection's cache since it was last emptied.
    #[cfg(test)]
    pub(crate) fn cached_statements(&self) -> usize {
        self.cached_statements
    }

    /// The generation of planner statistics the connection has loaded (0: none).
    pub(crate) fn stats_generation(&self) -> i64 {
        self.stats_generation
    }

    pub(crate) fn set_stats_generation(&mut self, generation: i64) {
        self.stats_generation = generation;
    }
}

impl Instrumentation for ConnState {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if let InstrumentationEvent::CacheQuery { .. } = event {
            self.cached_statements += 1;
        }
        if let Some(inner) = &mut self.inner {
            inner.on_connection_event(event);
        }
    }
}

/// Keep `conn`'s statement cache within [`MAX_CACHED_STATEMENTS`]: past it, every kept
/// statement is let go (diesel offers no eviction of one) and the count starts again;
/// the statements in use come back at their next call. `true` when it emptied the cache.
pub(crate) fn bound_statement_cache(conn: &mut SqliteConnection) -> bool {
    let Some(state) = ConnState::of(conn) else {
        return false;
    };
    if state.cached_statements <= MAX_CACHED_STATEMENTS {
        return false;
    }
    state.cached_statements = 0;
    conn.set_prepared_statement_cache_size(CacheSize::Disabled);
    conn.set_prepared_statement_cache_size(CacheSize::Unbounded);
    true
}
