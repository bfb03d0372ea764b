//! Planner statistics for SQLite, refreshed as the tables grow (run by the checkpoint
//! thread, `checkpoint.rs`).
//!
//! Without statistics SQLite's planner guesses that an equality on an indexed column
//! matches about ten rows. Every query of the relay starts with `community_id = ?`, which
//! on a relay with one community matches every row, so the guess sent `authors`, `#t`
//! and by-seq lookups down a whole-community index walk (a 20,000-note community: ~4 ms
//! of CPU per REQ, issue 23). With `ANALYZE`'s counts the planner picks the author
//! index, the tag index and rowid lookups instead.
//!
//! Statistics are taken again whenever the events table has doubled since they were
//! last taken (and once at start when there are none), so the planner's picture is
//! never off by more than a factor of two and the cost stays logarithmic in the table's
//! growth. `analysis_limit` keeps each `ANALYZE` to a sample of every index (a few
//! milliseconds whatever the database's size); it holds the write lock only that long.
//!
//! A connection loads statistics with its schema; not every SQLite build reloads them
//! when another connection takes new ones (the system SQLite 3.40 did not, in a check
//! made for this), so each pooled connection reloads them (`ANALYZE sqlite_schema`) at
//! its first checkout after new ones were taken, remembering the generation it holds
//! (`conn_state.rs`): a comparison of two integers per checkout.

use super::StoreError;
use diesel::connection::SimpleConnection;
use diesel::sqlite::SqliteConnection;
use diesel::RunQueryDsl;
use std::sync::atomic::{AtomicI64, Ordering};

/// How many times statistics were taken in this process (0: never, nothing to reload).
/// Process-wide rather than per database: a connection of another database that reloads
/// for nothing only costs it one cheap statement.
static GENERATION: AtomicI64 = AtomicI64::new(0);

/// Rows sampled per index by each `ANALYZE` (SQLite's `analysis_limit`).
const ANALYSIS_LIMIT: u32 = 1000;
/// Below this many events the guesses do no harm: nothing is analysed yet.
const FIRST_AT: i64 = 256;

/// How far the events table had grown when statistics were last taken.
#[derive(Debug, Default)]
pub(crate) struct PlannerStats {
    /// `max(seq)` at the last `ANALYZE`; `None` until the first look.
    analyzed_at: Option<i64>,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

impl PlannerStats {
    /// Take statistics if the events table doubled since they were last taken; `true`
    /// when it did.
    pub(crate) fn refresh_if_grown(
        &mut self,
        conn: &mut SqliteConnection,
    ) -> Result<bool, StoreError> {
        // The highest seq bounds the rows ever stored: a cheap proxy of the size.
        let rows = count(conn, "SELECT COALESCE(MAX(seq), 0) AS n FROM events")?;
        let last = match self.analyzed_at {
            Some(last) => last,
            // After a restart: the statistics a previous run took count, if any.
            None => {
                let kept = count(
                    conn,
                    "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'sqlite_stat1'",
                )?;
                let last = if kept > 0 { rows } else { 0 };
                self.analyzed_at = Some(last);
                last
            }
        };
        if rows < FIRST_AT || rows < last.saturating_mul(2) {
            return Ok(false);
        }
        conn.batch_execute(&format!(
            "PRAGMA analysis_limit = {ANALYSIS_LIMIT}; ANALYZE;"
        ))?;
        self.analyzed_at = Some(rows);
        GENERATION.fetch_add(1, Ordering::Release);
        tracing::debug!(events = rows, "planner statistics taken");
        Ok(true)
    }
}

fn count(conn: &mut SqliteConnection, sql: &str) -> Result<i64, StoreError> {
    let rows: Vec<Count> = diesel::sql_query(sql).load(conn)?;
    Ok(rows.first().map_or(0, |c| c.n))
}

/// Make a pooled connection plan with the latest statistics this process took.
pub(crate) fn reload_if_stale(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let generation = GENERATION.load(Ordering::Acquire);
    if generation == 0 {
        return Ok(());
    }
    // A pooled connection remembers what it loaded (`conn_state.rs`); one without that
    // state reloads every time.
    let held = super::conn_state::ConnState::of(conn).map(|state| state.stats_generation());
    if held != Some(generation) {
        conn.batch_execute("ANALYZE sqlite_schema;")?;
        if let Some(state) = super::conn_state::ConnState::of(conn) {
            state.set_stats_generation(generation);
        }
    }
    Ok(())
}
