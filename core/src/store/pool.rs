//! Connection pools for both backends and per-connection SQLite settings.
//!
//! SQLite: WAL, `synchronous = FULL`, a busy timeout, stable plans (`buzz-sqlite-plans`,
//! registered before the first connection), no validity query at each checkout (a
//! connection to a local file does not go stale), each connection's statement cache
//! bounded (`one_of.rs`, `conn_state.rs`), and the writer's automatic checkpoint only as a
//! backstop (10,000 pages; `checkpoint.rs` does the work). PostgreSQL: every session gets
//! `statement_timeout` and `lock_timeout` from `[storage]` (`StatementBounds`) and plans
//! each execution for its own parameters (`plan_cache_mode = force_custom_plan`), so a
//! plan made while the tables were empty is never kept as they grow
//! (`core/tests/statement_bounds.rs`). Migrations run on an unbounded pool of their own.

use super::conn::{Backend, Conn};
use super::StoreError;
use crate::error::Reason;
use diesel::connection::SimpleConnection;
use diesel::pg::PgConnection;
use diesel::r2d2::{ConnectionManager, CustomizeConnection, Pool as R2d2, PooledConnection};
use diesel::sqlite::SqliteConnection;
use std::time::Duration;

#[derive(Clone)]
pub(crate) enum Pool {
    Sqlite(R2d2<ConnectionManager<SqliteConnection>>),
    Pg(R2d2<ConnectionManager<PgConnection>>),
}

/// WAL (set once per file, at open: [`Pool::connect`]) lets readers run beside the single
/// writer; `synchronous = FULL` makes a commit
/// durable before the relay says `OK`; the busy timeout covers WAL checkpoints. Savepoint
/// journals stay in memory (`temp_store`) and each connection caches 32 MiB of pages.
/// Checkpoints normally run on their own thread (`checkpoint.rs`); the automatic one at
/// 10,000 pages (40 MiB of WAL) is only the backstop that lets a busy WAL start over,
/// and a WAL that grew past 64 MiB is cut back when it does. Every connection also gets
/// `buzz_readable` (`readable_fn.rs`), how queries check large channel sets.
#[derive(Debug)]
struct SqliteSetup;

impl CustomizeConnection<SqliteConnection, diesel::r2d2::Error> for SqliteSetup {
    fn on_acquire(&self, conn: &mut SqliteConnection) -> Result<(), diesel::r2d2::Error> {
        conn.batch_execute(
            "PRAGMA busy_timeout = 10000;
             PRAGMA synchronous = FULL;
             PRAGMA foreign_keys = ON;
             PRAGMA temp_store = MEMORY;
             PRAGMA cache_size = -32768;
             PRAGMA wal_autocheckpoint = 10000;
             PRAGMA journal_size_limit = 67108864;",
        )
        .map_err(diesel::r2d2::Error::QueryError)?;
        diesel::Connection::set_instrumentation(conn, super::conn_state::ConnState::new());
        super::readable_fn::register(conn).map_err(diesel::r2d2::Error::QueryError)
    }
}

/// Server-side bounds on every statement of a PostgreSQL session (milliseconds, 0 = none).
/// The database itself cancels a statement that runs, or waits for a lock, longer than
/// this, so a deadline holds inside a statement and not only between statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatementBounds {
    /// PostgreSQL `statement_timeout`.
    pub statement_timeout_ms: u64,
    /// PostgreSQL `lock_timeout`.
    pub lock_timeout_ms: u64,
    /// SQLite: longest one [`Store::read`](super::Store::read) may run before its
    /// statement is interrupted (`storage.read_timeout_ms`).
    pub read_timeout_ms: u64,
    /// Reads one client may have in flight, running or queued
    /// (`limits.max_reads_per_client`).
    pub max_reads_per_client: usize,
    /// A read longer than this makes its client a slow reader for a while, whose reads
    /// leave one read thread to others (`storage.slow_read_ms`).
    pub slow_read_ms: u64,
}

impl StatementBounds {
    /// No bounds: migrations and tools, which may legitimately run long.
    pub const NONE: StatementBounds = StatementBounds {
        statement_timeout_ms: 0,
        lock_timeout_ms: 0,
        read_timeout_ms: 0,
        max_reads_per_client: 0,
        slow_read_ms: 0,
    };
}

/// Sets the session's bounds on every new PostgreSQL connection, and plans every
/// execution of a prepared statement with its own parameters (`plan_cache_mode =
/// force_custom_plan`): diesel keeps statements prepared per connection, and PostgreSQL
/// would otherwise settle on a generic plan made while the tables were empty, and keep
/// it as they grow. With autovacuum off (statistics never refreshed) that made channel
/// ingest fall from ~2,900 to ~550 events/s over 40,000 messages; custom plans read the
/// tables' current size at each plan and held ~2,500 (issue 21, item 10).
#[derive(Debug)]
struct PgSetup(StatementBounds);

impl CustomizeConnection<PgConnection, diesel::r2d2::Error> for PgSetup {
    fn on_acquire(&self, conn: &mut PgConnection) -> Result<(), diesel::r2d2::Error> {
        // Integers formatted by us, never input: nothing to quote.
        conn.batch_execute(&format!(
            "SET statement_timeout = {}; SET lock_timeout = {}; \
             SET plan_cache_mode = force_custom_plan;",
            self.0.statement_timeout_ms, self.0.lock_timeout_ms
        ))
        .map_err(diesel::r2d2::Error::QueryError)
    }
}

/// Switch the database file to WAL before any pooled connection opens it. The mode is
/// kept in the file; switching takes an exclusive lock, so the pool's connections (opened
/// concurrently) doing it each would find one another's locks ("database is locked").
fn use_wal(path: &str) -> Result<(), StoreError> {
    use diesel::Connection;
    let failed = |e: &dyn std::fmt::Display| StoreError::Connect(format!("{path}: {e}"));
    let mut conn = SqliteConnection::establish(path).map_err(|e| failed(&e))?;
    conn.batch_execute("PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL;")
        .map_err(|e| failed(&e))
}

impl Pool {
    /// A pool with `reads` connections for reads plus the ones the store keeps for
    /// itself: the writer's, and on SQLite the checkpoint thread's. On PostgreSQL every
    /// session gets `bounds` (SQLite has no statement deadline; its busy timeout bounds
    /// lock waits).
    pub(crate) fn connect(
        url: &str,
        reads: u32,
        bounds: StatementBounds,
    ) -> Result<Pool, StoreError> {
        let reads = reads.max(1);
        if let Some(path) = url.strip_prefix("sqlite://") {
            if let Some(dir) = std::path::Path::new(path).parent() {
                if !dir.as_os_str().is_empty() {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        StoreError::Connect(format!("creating {}: {e}", dir.display()))
                    })?;
                }
            }
            buzz_sqlite_plans::register();
            use_wal(path)?;
            // No validity query at every checkout (r2d2's default `SELECT 1`, parsed
            // anew each time): a connection to a local file does not go stale; a
            // failing one fails the statement that uses it.
            let pool = R2d2::builder()
                .max_size(reads + 2)
                .test_on_check_out(false)
                .connection_timeout(Duration::from_secs(10))
                .connection_customizer(Box::new(SqliteSetup))
                .build(ConnectionManager::<SqliteConnection>::new(path))
                .map_err(|e| StoreError::Connect(format!("{path}: {e}")))?;
            Ok(Pool::Sqlite(pool))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = R2d2::builder()
                .max_size(reads + 1)
                .connection_timeout(Duration::from_secs(10))
                .connection_customizer(Box::new(PgSetup(bounds)))
                .build(ConnectionManager::<PgConnection>::new(url))
                .map_err(|e| StoreError::Connect(e.to_string()))?;
            Ok(Pool::Pg(pool))
        } else {
            Err(StoreError::BadUrl(url.to_owned()))
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Pg(_) => Backend::Postgres,
        }
    }

    /// Take a connection out of the pool for as long as the caller keeps it (the writer
    /// keeps one, so its prepared-statement cache stays warm).
    pub(crate) fn take(&self) -> Result<OwnedConn, StoreError> {
        Ok(match self {
            Pool::Sqlite(p) => OwnedConn::Sqlite(p.get()?),
            Pool::Pg(p) => OwnedConn::Pg(p.get()?),
        })
    }

    /// Copy what the WAL holds back into the database file without blocking the writer
    /// or readers (SQLite `PASSIVE` checkpoint; PostgreSQL checkpoints on its own).
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        match self {
            Pool::Sqlite(p) => Ok(p.get()?.batch_execute("PRAGMA wal_checkpoint(PASSIVE);")?),
            Pool::Pg(_) => Ok(()),
        }
    }

    /// SQLite: take planner statistics if the events table has doubled since they were
    /// last taken (`planner_stats.rs`); PostgreSQL plans from its own statistics.
    pub(crate) fn refresh_planner_stats(
        &self,
        stats: &mut super::planner_stats::PlannerStats,
    ) -> Result<bool, StoreError> {
        match self {
            Pool::Sqlite(p) => stats.refresh_if_grown(&mut *p.get()?),
            Pool::Pg(_) => Ok(false),
        }
    }

    /// SQLite: pin the statistics `events` and `event_tags` are planned with
    /// (`planner_stats.rs`); PostgreSQL plans from its own statistics.
    pub(crate) fn pin_planner_stats(&self) -> Result<(), StoreError> {
        match self {
            Pool::Sqlite(p) => super::planner_stats::pin(&mut *p.get()?),
            Pool::Pg(_) => Ok(()),
        }
    }

    /// Borrow a connection for the duration of `f`.
    pub(crate) fn with_conn<R>(
        &self,
        f: impl FnOnce(Conn<'_>) -> Result<R, Reason>,
    ) -> Result<R, Reason> {
        match self {
            Pool::Sqlite(p) => {
                let mut c = p.get().map_err(StoreError::from)?;
                super::planner_stats::reload_if_stale(&mut c)?;
                let result = f(Conn::Sqlite(&mut c));
                super::conn_state::bound_statement_cache(&mut c);
                result
            }
            Pool::Pg(p) => {
                let mut c = p.get().map_err(StoreError::from)?;
                f(Conn::Pg(&mut c))
            }
        }
    }
}

/// A connection taken out of the pool (returned when dropped).
pub(crate) enum OwnedConn {
    Sqlite(PooledConnection<ConnectionManager<SqliteConnection>>),
    Pg(PooledConnection<ConnectionManager<PgConnection>>),
}

#[cfg(test)]
mod tests {
    use super::{Pool, StatementBounds};
    use diesel::sql_types::Text;
    use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection};

    #[derive(QueryableByName)]
    struct JournalMode {
        #[diesel(sql_type = Text)]
        journal_mode: String,
    }

    /// WAL is set once, at open, and kept by the file: every connection the pool (or
    /// anyone) opens later finds it.
    #[test]
    fn a_new_database_file_is_in_wal_mode_once_its_pool_opens() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("fresh.db");
        let path = path.to_str().expect("utf-8 path");
        let _pool = Pool::connect(&format!("sqlite://{path}"), 2, StatementBounds::NONE)
            .expect("pool opens");
        let mut other = SqliteConnection::establish(path).expect("open");
        let mode: JournalMode = diesel::sql_query("PRAGMA journal_mode")
            .get_result(&mut other)
            .expect("journal mode");
        assert_eq!(mode.journal_mode, "wal");
    }

    /// Every connection of a SQLite pool is opened with SQLite's plan stability
    /// guarantee, so the statements diesel caches are reused, not prepared again on
    /// every execution (`buzz-sqlite-plans`).
    #[test]
    fn a_sqlite_pool_opens_connections_with_stable_plans() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plans.db");
        let path = path.to_str().expect("utf-8 path");
        let before = buzz_sqlite_plans::connections_enabled();
        let pool = Pool::connect(&format!("sqlite://{path}"), 2, StatementBounds::NONE)
            .expect("pool opens");
        let _taken = pool.take().expect("a connection");
        // The read pool opens its connections at build; at least the one taken.
        assert!(buzz_sqlite_plans::connections_enabled() > before);
    }
}
