//! Storage: diesel on SQLite (embedded default) or PostgreSQL, chosen by the URL scheme.
//!
//! **Architecture invariant:** only `store` (and plugins, through [`Conn`]) talk SQL.
//! Reads run on a blocking pool ([`Store::read`]); every write goes through one
//! group-committing writer thread ([`Store::write`]) so SQLite never sees two writers
//! and a burst of events shares one fsync.

mod change_mark;
pub mod channel_state;
mod checkpoint;
mod communities;
pub mod community_standing;
mod conn;
mod conn_state;
mod error;
mod events;
mod group_insert;
mod group_writes;
mod identity;
pub mod inspect;
mod lookups;
mod migrate;
pub mod moderation;
mod one_of;
mod planner_stats;
mod pool;
pub mod prepared;
pub mod purge;
mod query;
mod read_client;
mod read_lanes;
use read_lanes::Admission;
mod read_slow;
mod read_workers;
mod readable_fn;
pub mod schema;
mod stats;
mod tag_on_row;
pub mod threads;
pub mod transfer;
mod writer;

use change_mark::ChangeCounter;
pub use change_mark::{append_point, next_expiry, AppendPoint, ChangeMark};
pub use conn::{Backend, Conn};
pub use diesel::pg::PgConnection;
pub use diesel::sqlite::SqliteConnection;
pub use diesel_migrations::EmbeddedMigrations;
pub use error::StoreError;
pub use events::{
    apply_deletion, insert_event, insert_independent, replace_relay_event, soft_delete_event,
    DeletedRow, InsertOutcome,
};
pub use group_writes::{GroupRows, GroupWrites};
pub use identity::recorded_identity;
pub use lookups::{all_community_wide, event_channel, event_home, event_known, stored_ids};
pub use migrate::{MigrationId, MigrationSet, MigrationStatus, Migrations};
pub use query::{
    appended_stamps, count_matching, load_events, load_wire_events, query_events, query_keys,
    query_stamps, row_to_event, ChannelScope, ChannelSet, Count, EventKey, EventRow, Scope,
    WireEvent,
};
pub use stats::{community_stats, CommunityStats};

use crate::error::Reason;
use pool::Pool;
pub use pool::StatementBounds;
pub use read_client::ReadClient;
use std::sync::Arc;
use writer::Writer;
pub use writer::WriterMetrics;

/// A write [`Store::queue_event`] queued: awaiting it gives its answer, after the commit.
pub struct QueuedWrite<R>(writer::Answer<R>);

impl<R: Send + 'static> std::future::Future for QueuedWrite<R> {
    type Output = Result<R, Reason>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    pool: Pool,
    reads: read_workers::ReadWorkers,
    /// How long one read may run on SQLite (`None`: no bound).
    read_timeout: Option<std::time::Duration>,
    writer: Writer,
    /// Moved by the writer after each commit that changed events (`change_mark.rs`).
    changes: Arc<ChangeCounter>,
}

impl Store {
    /// Open the database at `url`. Migrations (core's and `plugin_sets`) are applied
    /// when `auto_migrate` is set; otherwise pending migrations make this fail, naming
    /// them.
    pub async fn open(
        url: &str,
        pool_size: u32,
        auto_migrate: bool,
        plugin_sets: &[MigrationSet],
    ) -> Result<Store, StoreError> {
        Self::open_bounded(
            url,
            pool_size,
            auto_migrate,
            plugin_sets,
            StatementBounds::NONE,
        )
        .await
    }

    /// [`Store::open`] with `bounds` on every PostgreSQL session that serves requests
    /// (migrations run without them: a schema change may legitimately take long).
    pub async fn open_bounded(
        url: &str,
        pool_size: u32,
        auto_migrate: bool,
        plugin_sets: &[MigrationSet],
        bounds: StatementBounds,
    ) -> Result<Store, StoreError> {
        let url = url.to_owned();
        let sets = plugin_sets.to_vec();
        tokio::task::spawn_blocking(move || {
            Self::open_blocking(&url, pool_size, auto_migrate, &sets, bounds)
        })
        .await
        .map_err(|e| StoreError::Join(e.to_string()))?
    }

    fn open_blocking(
        url: &str,
        pool_size: u32,
        auto_migrate: bool,
        plugin_sets: &[MigrationSet],
        bounds: StatementBounds,
    ) -> Result<Store, StoreError> {
        let pool = Pool::connect(url, pool_size, bounds)?;
        let migration_pool = match (pool.backend(), bounds == StatementBounds::NONE) {
            (Backend::Postgres, false) => Pool::connect(url, 1, StatementBounds::NONE)?,
            _ => pool.clone(),
        };
        let migrations = Migrations::new(migration_pool, plugin_sets);
        if auto_migrate {
            migrations.run_pending()?;
        } else {
            let status = migrations.status()?;
            if !status.pending.is_empty() {
                return Err(StoreError::Migration(format!(
                    "pending migrations and storage.auto_migrate is false: {} (run `buzz-relay migrate`)",
                    status
                        .pending
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        // Never serve a half-copied database (`transfer/copy.rs`).
        let marker = pool
            .with_conn(|mut conn| transfer::copy::unfinished(&mut conn))
            .map_err(|e| StoreError::Connect(e.to_string()))?;
        if let Some(marker) = marker {
            return Err(StoreError::UnfinishedCopy(marker));
        }
        // Before any read is planned: SQLite keeps a statement's first plan.
        pool.pin_planner_stats()?;
        let changes = Arc::new(ChangeCounter::default());
        let writer = Writer::start(pool.clone(), changes.clone())?;
        let reads = read_workers::ReadWorkers::start(
            pool_size as usize,
            bounds.max_reads_per_client,
            std::time::Duration::from_millis(bounds.slow_read_ms),
        )
        .map_err(|e| StoreError::Connect(format!("starting the read threads: {e}")))?;
        Ok(Store {
            inner: Arc::new(Inner {
                backend: pool.backend(),
                pool,
                reads,
                read_timeout: (bounds.read_timeout_ms > 0)
                    .then(|| std::time::Duration::from_millis(bounds.read_timeout_ms)),
                writer,
                changes,
            }),
        })
    }

    /// Run `f` on one connection of the database at `url`, without migrating it or
    /// starting a writer (the storage commands: export, backup).
    pub fn with_database<R>(
        url: &str,
        f: impl FnOnce(Conn<'_>) -> Result<R, Reason>,
    ) -> Result<R, Reason> {
        let pool =
            Pool::connect(url, 1, StatementBounds::NONE).map_err(|e| Reason::Internal(e.into()))?;
        pool.with_conn(f)
    }

    /// Migration status and runner for `url` (core's and `plugin_sets`) without opening
    /// a full store.
    pub fn migrations(url: &str, plugin_sets: &[MigrationSet]) -> Result<Migrations, StoreError> {
        Ok(Migrations::new(
            Pool::connect(url, 1, StatementBounds::NONE)?,
            plugin_sets,
        ))
    }

    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// Run a read on a pooled connection, off the async threads, in the lane of the
    /// client the current task serves ([`ReadClient::serve`]). Refused with
    /// `rate-limited:` when that client already has `limits.max_reads_per_client` reads in
    /// flight; on SQLite a read still running at `storage.read_timeout_ms` is cut and
    /// fails with `blocked:` naming the bound — never a partial answer (PostgreSQL cuts
    /// each statement at `storage.statement_timeout_ms` itself).
    pub async fn read<R, F>(&self, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        self.read_as(Admission::Bounded, f).await
    }

    /// Where the writes stand now ([`ChangeMark`]): what a read begun after this call
    /// returns stays true while the mark is equal. One small read on PostgreSQL, none
    /// on SQLite.
    pub async fn change_mark(&self) -> Result<ChangeMark, Reason> {
        let changes = self.inner.changes.clone();
        match self.inner.backend {
            Backend::Sqlite => Ok(changes.local_mark()),
            Backend::Postgres => self.read(move |mut conn| changes.mark(&mut conn)).await,
        }
    }

    /// [`Store::read`] for the next page of an answer whose first read was admitted: it
    /// waits its turn in the client's lane like any read, but the client's bound never
    /// refuses it — an answer already begun (a `POST /query` whose 200 left, a REQ whose
    /// first events left) is not cut because the same client asked for something else.
    pub async fn read_more<R, F>(&self, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        self.read_as(Admission::Continuing, f).await
    }

    async fn read_as<R, F>(&self, admission: Admission, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: FnOnce(Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        let pool = self.inner.pool.clone();
        let timeout = self.inner.read_timeout;
        let job = move || match timeout {
            None => pool.with_conn(f),
            Some(timeout) => {
                let deadline = std::time::Instant::now() + timeout;
                match buzz_sqlite_plans::with_deadline(deadline, || pool.with_conn(f)) {
                    // Even when the read caught the interruption itself: what it
                    // answers is missing what the cut statement would have given.
                    (_, true) => Err(Reason::Blocked(format!(
                        "read cut at its deadline of {} ms (storage.read_timeout_ms); \
                         narrow the filters",
                        timeout.as_millis()
                    ))),
                    (answer, false) => answer,
                }
            }
        };
        let answer = self
            .inner
            .reads
            .spawn_as(ReadClient::current(), admission, job)
            .map_err(|over| {
                Reason::RateLimited(format!(
                    "{} reads already in flight for this client \
                     (limits.max_reads_per_client); wait for an answer",
                    over.bound
                ))
            })?;
        answer
            .await
            .map_err(|e| Reason::Internal(anyhow::Error::new(StoreError::Join(e.to_string()))))?
    }

    /// Reads waiting for a read thread right now (all clients' lanes together).
    pub fn reads_waiting(&self) -> usize {
        self.inner.reads.waiting()
    }

    /// The writer's figures (queue depth, batch sizes), for the relay's metrics.
    pub fn writer_metrics(&self) -> &WriterMetrics {
        self.inner.writer.metrics()
    }

    /// Run `f` inside the writer's group transaction. An `Err` rolls back only this job
    /// (the batch is then rerun with a savepoint per job, so `f` may run twice: it must
    /// not consume what it captured); the answer arrives after the group's commit, so
    /// `Ok` means durable.
    pub async fn write<R, F>(&self, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        self.inner.writer.submit(f).await
    }

    /// [`Store::write`] for a write that changes no `events` row (a plugin's own
    /// tables: read state, an index, progress): its commit leaves the [`ChangeMark`]
    /// where it was, so sets kept by readers stay valid. A write that may change any
    /// event row, directly or through a trigger, must use [`Store::write`].
    pub async fn write_own_rows<R, F>(&self, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        self.inner.writer.submit_own_rows(f).await
    }

    /// Store `event` in the writer's group transaction (NIP-01 duplicate and
    /// replaceable rules, the tag index), then run `then` with the outcome in the same
    /// transaction; answered after the commit, like [`Store::write`]. `then` writes
    /// core's per-message follow-ups through the [`GroupWrites`] it is handed, which a
    /// PostgreSQL group writes once for all its members.
    ///
    /// `independent` says that `then` changes no other event's rows and reads none
    /// but the ones `event` names in its `e` tags. The PostgreSQL writer then inserts
    /// the event together with neighbouring independent events of its batch (two
    /// statements for all of them) before running each `then` in submission order; an
    /// event that settles a replaceable slot, or names an earlier member of the group,
    /// is never grouped with it.
    pub async fn write_event<R, F>(
        &self,
        event: Arc<crate::stored::StoredEvent>,
        independent: bool,
        then: F,
    ) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>, InsertOutcome, &mut GroupWrites) -> Result<R, Reason> + Send + 'static,
    {
        self.inner
            .writer
            .submit_event(event, independent, then)
            .await
    }

    /// [`Store::write_event`] in two steps: this returns once the write is queued behind
    /// every write queued before it; the returned future is its answer (after the
    /// commit). For imports, which queue events in file order and collect the answers
    /// later.
    pub async fn queue_event<R, F>(
        &self,
        event: Arc<crate::stored::StoredEvent>,
        independent: bool,
        then: F,
    ) -> Result<QueuedWrite<R>, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>, InsertOutcome, &mut GroupWrites) -> Result<R, Reason> + Send + 'static,
    {
        self.inner
            .writer
            .queue_event(event, independent, then)
            .await
            .map(QueuedWrite)
    }

    /// Make sure a community row exists for `host`; returns its id.
    pub async fn ensure_community(&self, host: &str, name: &str) -> Result<i64, Reason> {
        let (host, name) = (host.to_owned(), name.to_owned());
        self.write(move |conn| communities::ensure_community(conn, &host, &name))
            .await
    }

    /// Refresh the query planner's statistics (after a bulk load), through the writer.
    /// Not held to `statement_timeout`: on a large database it may take longer, and it
    /// is maintenance, not a request.
    pub async fn analyze(&self) -> Result<(), Reason> {
        self.write(|conn| {
            use diesel::connection::SimpleConnection;
            conn.with_statement_timeout(0, |conn| match conn {
                Conn::Sqlite(c) => {
                    // `events` and `event_tags` keep their pinned statistics.
                    let sql = format!("ANALYZE;\n{}", planner_stats::pin_sql());
                    c.batch_execute(&sql).map_err(Reason::from)
                }
                Conn::Pg(c) => c.batch_execute("ANALYZE").map_err(Reason::from),
            })?;
            Ok(())
        })
        .await?;
        planner_stats::taken();
        Ok(())
    }

    /// Stop accepting writes, finish the queued ones and wait for the writer to exit.
    pub async fn shutdown(&self) {
        self.inner.writer.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::StoreError;
    use crate::error::Reason;
    use diesel::connection::SimpleConnection;
    use diesel::{Connection, SqliteConnection};

    /// A second writer on a locked SQLite database is a retryable 503, not a 500.
    #[test]
    fn a_locked_database_is_transient() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("locked.db");
        let path = path.to_str().expect("utf-8 path");
        let mut holder = SqliteConnection::establish(path).expect("open");
        holder
            .batch_execute("PRAGMA journal_mode = WAL; CREATE TABLE t (x); BEGIN IMMEDIATE;")
            .expect("take the write lock");
        let mut other = SqliteConnection::establish(path).expect("open");
        let err = other
            .batch_execute("PRAGMA busy_timeout = 0; BEGIN IMMEDIATE;")
            .expect_err("the database is locked");

        let reason = Reason::from(StoreError::Db(err));
        assert!(matches!(reason, Reason::Unavailable(_)), "{reason:?}");
        assert_eq!(reason.http_status(), 503);
        assert_eq!(
            reason.wire_text(),
            "error: database timeout; retry with backoff"
        );
    }

    #[test]
    fn broken_data_stays_internal() {
        let err = diesel::result::Error::DeserializationError("bad column".into());
        let reason = Reason::from(StoreError::Db(err));
        assert!(matches!(reason, Reason::Internal(_)), "{reason:?}");
        assert_eq!(reason.http_status(), 500);
    }
}
