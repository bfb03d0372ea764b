//! A read still running at its deadline is cut, whatever statement it runs: on SQLite
//! at `storage.read_timeout_ms` (a progress handler the read threads arm,
//! `buzz-sqlite-plans`), on PostgreSQL at `storage.statement_timeout_ms` (the database).
//! The caller gets a clear refusal naming the bound, never a partial answer; the
//! connection and the read thread serve the next read normally, and the writer is never
//! cut by the read deadline. Both backends.

use buzz_core::both_backends;
use buzz_core::error::Reason;
use buzz_core::testkit::{TestBackend, TestRelay};
use diesel::sql_types::BigInt;
use diesel::{QueryableByName, RunQueryDsl};
use std::time::{Duration, Instant};

both_backends!(a_read_past_its_deadline_is_cut_and_the_next_is_served);

const DEADLINE_MS: u64 = 200;

/// Counts the rows of a recursive sequence: with no end it runs until cut.
fn sequence(end: Option<u64>) -> String {
    let stop = end.map_or(String::new(), |end| format!(" WHERE x < {end}"));
    format!(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n{stop}) \
         SELECT count(*) AS rows FROM n"
    )
}

#[derive(QueryableByName)]
struct Rows {
    #[diesel(sql_type = BigInt)]
    rows: i64,
}

fn count(conn: &mut buzz_core::store::Conn<'_>, sql: &str) -> Result<i64, Reason> {
    let rows: Rows = buzz_core::with_conn!(conn, |c| diesel::sql_query(sql).get_result(c))?;
    Ok(rows.rows)
}

async fn a_read_past_its_deadline_is_cut_and_the_next_is_served(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| {
            s.storage.read_timeout_ms = DEADLINE_MS;
            s.storage.statement_timeout_ms = DEADLINE_MS;
        },
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let store = relay.running().services.store.clone();

    let started = Instant::now();
    // Inside a read transaction, as the query service's reads are: its rollback must
    // not be cut too, or the connection would stay in the transaction.
    let cut = store
        .read(|mut conn| conn.repeatable_read(|conn| count(conn, &sequence(None))))
        .await
        .expect_err("a read that never ends is cut");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(DEADLINE_MS) && waited < Duration::from_secs(5),
        "cut after {waited:?}"
    );
    match backend {
        TestBackend::Sqlite => {
            assert!(matches!(cut, Reason::Blocked(_)), "{cut:?}");
            assert_eq!(
                cut.wire_text(),
                format!(
                    "blocked: read cut at its deadline of {DEADLINE_MS} ms \
                     (storage.read_timeout_ms); narrow the filters"
                )
            );
        }
        _ => assert_eq!(
            cut.wire_text(),
            "error: database timeout; retry with backoff"
        ),
    }

    // Every read thread and connection serves the next reads in full.
    for _ in 0..relay.settings.storage.pool_size {
        let rows = store
            .read(|mut conn| conn.repeatable_read(|conn| count(conn, &sequence(Some(1000)))))
            .await
            .expect("the next read");
        assert_eq!(rows, 1000);
    }

    // The writer is never held to the read deadline: one job running past it commits.
    if matches!(backend, TestBackend::Sqlite) {
        let rows = store
            .write(|conn| {
                let started = Instant::now();
                let mut rows = 0;
                while started.elapsed() < Duration::from_millis(3 * DEADLINE_MS) {
                    rows += count(conn, &sequence(Some(100_000)))?;
                }
                Ok(rows)
            })
            .await
            .expect("the writer runs past the read deadline");
        assert!(rows >= 100_000);
    }
    relay.stop().await;
}
