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
//! `events` and `event_tags` are the exception: their statistics are pinned
//! ([`PINNED`]), written when the store opens and again after every `ANALYZE`, so every
//! plan over them is the one a large community needs whatever the tables hold. With
//! SQLite's plan stability guarantee on (`buzz-sqlite-plans`) a read connection keeps the
//! plan of its first prepare, so a relay that started empty would otherwise keep the
//! plans of an empty table; and the sampled statistics of a grown one (`analysis_limit`
//! reads 1,000 rows of an index) made a 300,000-event community look like ~1,000 rows, so an anonymous `{"limit":1}`, one author or one kind walked the whole
//! community's time index filtering row by row (issue 45). What the planner then chooses
//! is checked for every read shape by `core/tests/read_plans.rs`.
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

/// The statistics `events` and `event_tags` are planned with: one community of a million
/// events, 400,000 of them community-wide, with selectivity ranked as reads need it. A
/// named channel (`channel_id = ?`, 20 rows) is narrower than an author (50), an author
/// than a kind (200), a kind than the community-wide rows, and those than the whole
/// community: so every shape walks the index of its most specific field in answer order
/// and never the time index filtered row by row, and a list of kinds or authors (SQLite
/// assumes a `json_each` list holds ~25) still reads its index and sorts the few rows
/// rather than walk the community. A tag value holds 20 events. An author's
/// community-wide rows (`events_wide_by_author`) are fewer than all of the author's, so
/// an anonymous author read walks those alone.
const PINNED: &[(&str, &str, &str)] = &[
    ("events", "events_identity", "1000000 1000000 1"),
    ("events", "events_replace_key", "200000 200000 1"),
    ("events", "events_by_time", "1000000 1000000 2 1"),
    ("events", "events_wide", "400000 400000 2 1 1 1 1"),
    ("events", "events_wide_by_author", "400000 400000 20 2 1"),
    ("events", "events_by_kind", "1000000 1000000 200 2 1"),
    ("events", "events_by_author", "1000000 1000000 50 2 1"),
    ("events", "events_by_channel", "600000 600000 20 2 1"),
    (
        "event_tags",
        "event_tags_lookup",
        "3000000 3000000 300000 20 2 1",
    ),
    ("event_tags", "sqlite_autoindex_event_tags_1", "3000000 3 1"),
];

/// SQL that replaces whatever statistics `events` and `event_tags` have with [`PINNED`]
/// (`sqlite_stat1` must exist: `ANALYZE` makes it). Run it after any `ANALYZE`, in the
/// same transaction, then [`taken`].
pub(crate) fn pin_sql() -> String {
    let mut sql = String::from("DELETE FROM sqlite_stat1 WHERE tbl IN ('events', 'event_tags');\n");
    for (table, index, stat) in PINNED {
        sql.push_str(&format!(
            "INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('{table}', '{index}', '{stat}');\n"
        ));
    }
    sql
}

/// New statistics were committed: every pooled connection loads them at its next
/// checkout.
pub(crate) fn taken() {
    GENERATION.fetch_add(1, Ordering::Release);
}

#[derive(diesel::QueryableByName, PartialEq, Eq, PartialOrd, Ord)]
struct StatRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    tbl: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    idx: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    stat: String,
}

/// Does `sqlite_stat1` hold exactly [`PINNED`] for `events` and `event_tags`?
fn pinned_already(conn: &mut SqliteConnection) -> Result<bool, StoreError> {
    let exists = count(
        conn,
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'sqlite_stat1'",
    )?;
    if exists == 0 {
        return Ok(false);
    }
    let mut held: Vec<StatRow> = diesel::sql_query(
        "SELECT tbl, COALESCE(idx, '') AS idx, stat FROM sqlite_stat1 \
         WHERE tbl IN ('events', 'event_tags')",
    )
    .load(conn)?;
    held.sort();
    let mut wanted: Vec<StatRow> = PINNED
        .iter()
        .map(|(tbl, idx, stat)| StatRow {
            tbl: (*tbl).to_owned(),
            idx: (*idx).to_owned(),
            stat: (*stat).to_owned(),
        })
        .collect();
    wanted.sort();
    Ok(held == wanted)
}

/// Pin the statistics of `events` and `event_tags` (at open, before any read is
/// planned). Writes only when they are not pinned yet (a new database, or statistics an
/// older build or a manual `ANALYZE` took), so opening a pinned database takes no lock.
pub(crate) fn pin(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    if pinned_already(conn)? {
        return Ok(());
    }
    // `ANALYZE sqlite_schema` makes `sqlite_stat1` when missing and reads no table.
    conn.batch_execute("ANALYZE sqlite_schema;")?;
    conn.immediate_transaction(|c| c.batch_execute(&pin_sql()))?;
    conn.batch_execute("ANALYZE sqlite_schema;")?;
    taken();
    Ok(())
}

/// `ANALYZE` sampling `limit` rows per index, then pin `events` and `event_tags` again in
/// the same transaction: no connection ever loads their sampled numbers.
fn analyze_sampled(conn: &mut SqliteConnection, limit: u32) -> Result<(), StoreError> {
    conn.batch_execute(&format!("PRAGMA analysis_limit = {limit};"))?;
    conn.immediate_transaction(|c| c.batch_execute(&format!("ANALYZE;\n{}", pin_sql())))?;
    taken();
    Ok(())
}

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
        analyze_sampled(conn, ANALYSIS_LIMIT)?;
        self.analyzed_at = Some(rows);
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
