//! PostgreSQL sessions carry `statement_timeout` and `lock_timeout`: the database itself
//! ends a statement that runs or waits too long, and the write or read answers a
//! retryable `error:` / HTTP 503 with nothing stored.
//!
//! The stall is real: another session holds an exclusive lock on `events` while the
//! relay writes and reads. Needs `BUZZ_TEST_DATABASE_URL` (one `skipped:` line
//! otherwise; a failure under `CI`).

use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use diesel::connection::SimpleConnection;
use diesel::{Connection, PgConnection, RunQueryDsl};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_past_lock_timeout_answers_503() {
    held_lock_is_bounded("a_lock_wait_past_lock_timeout_answers_503", 0, 300).await;
}

/// With no lock bound the statement bound still ends the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_past_statement_timeout_answers_503() {
    held_lock_is_bounded("a_statement_past_statement_timeout_answers_503", 300, 0).await;
}

async fn held_lock_is_bounded(name: &str, statement_timeout_ms: u64, lock_timeout_ms: u64) {
    let Some(relay) = TestRelay::start_with(
        TestBackend::Postgres,
        name,
        |s| {
            s.storage.statement_timeout_ms = statement_timeout_ms;
            s.storage.lock_timeout_ms = lock_timeout_ms;
        },
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let early = keys.sign(1, vec![tag(&["t", "before"])], "before the lock", now());
    assert!(ws.publish(&early).await.0);

    // Another session takes `events` for itself and keeps it.
    let url = relay.settings.storage.database_url.clone();
    let mut holder = PgConnection::establish(&url).expect("second session");
    holder
        .batch_execute("BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE;")
        .expect("lock events");

    let stalled = keys.sign(1, vec![tag(&["t", "stalled"])], "during the lock", now());
    let started = Instant::now();
    let (accepted, message) = ws.publish(&stalled).await;
    assert!(!accepted);
    assert_eq!(message, "error: database timeout; retry with backoff");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by the database, not the client: {:?}",
        started.elapsed()
    );

    // The HTTP bridge gives the same answer as a 503; a read is bounded the same way.
    let http = relay.http();
    let other = keys.sign(1, vec![], "over http", now());
    let body = serde_json::to_vec(&other).expect("json");
    let (status, answer) = http.post_signed(&keys, "/events", &body).await;
    assert_eq!(status, 503, "{answer}");
    let query = serde_json::to_vec(&json!([{ "authors": [keys.pubkey()] }])).expect("json");
    let (status, answer) = http.post_signed(&keys, "/query", &query).await;
    assert_eq!(status, 503, "{answer}");
    assert_eq!(
        answer["error"],
        "error: database timeout; retry with backoff"
    );

    holder.batch_execute("ROLLBACK;").expect("release");
    // Nothing of the refused writes was kept, and the relay serves again at once.
    assert_eq!(relay.stored_rows(&stalled.id).await, 0);
    assert_eq!(relay.stored_rows(&other.id).await, 0);
    let (accepted, message) = ws.publish(&stalled).await;
    assert!(accepted, "{message}");
    assert_eq!(message, "", "stored now, not a duplicate");
    assert_eq!(relay.stored_in_order(keys.pubkey()).await.len(), 2);
    relay.stop().await;
}

/// `Conn::with_statement_timeout`: a tighter bound holds inside the call (the database
/// cancels the statement) and only there — on a read connection and inside the
/// writer's transaction alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tighter_bound_holds_inside_the_call_only() {
    let name = "a_tighter_bound_holds_inside_the_call_only";
    let Some(relay) = TestRelay::start(TestBackend::Postgres, name).await else {
        return;
    };
    let store = relay.running().services.store.clone();
    let sleep = |conn: &mut Conn<'_>, secs: f64| -> Result<(), Reason> {
        let sql = format!("SELECT pg_sleep({secs})");
        buzz_core::with_conn!(conn, |c| diesel::sql_query(&sql).execute(c))?;
        Ok(())
    };
    store
        .read(move |mut conn| {
            let err = conn
                .with_statement_timeout(100, |c| sleep(c, 1.0))
                .expect_err("cancelled by the database");
            assert_eq!(err.http_status(), 503, "{err}");
            assert_eq!(
                err.wire_text(),
                "error: database timeout; retry with backoff"
            );
            // The session's bound (8 s) applies again.
            sleep(&mut conn, 0.3)
        })
        .await
        .expect("read");
    store
        .write(move |conn| {
            conn.with_statement_timeout(200, |c| sleep(c, 0.01))?;
            // Later statements of the same transaction are not held to 200 ms.
            sleep(conn, 0.4)
        })
        .await
        .expect("write");
    relay.stop().await;
}

/// Every pooled session plans each execution with its own parameters: a statement
/// prepared while the tables were empty must not keep that plan as they grow (with
/// autovacuum off nothing would ever replace it). Read and writer sessions alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_plan_each_execution_for_its_parameters() {
    let name = "sessions_plan_each_execution_for_its_parameters";
    let Some(relay) = TestRelay::start(TestBackend::Postgres, name).await else {
        return;
    };
    #[derive(diesel::QueryableByName)]
    struct Setting {
        #[diesel(sql_type = diesel::sql_types::Text)]
        plan_cache_mode: String,
    }
    let mode = |conn: &mut Conn<'_>| -> Result<String, Reason> {
        let rows: Vec<Setting> = buzz_core::with_conn!(conn, |c| diesel::sql_query(
            "SELECT current_setting('plan_cache_mode') AS plan_cache_mode"
        )
        .load(c))?;
        Ok(rows.into_iter().map(|r| r.plan_cache_mode).collect())
    };
    let store = relay.running().services.store.clone();
    let read = store.read(move |mut conn| mode(&mut conn)).await;
    assert_eq!(read.expect("read"), "force_custom_plan");
    let written = store.write(move |conn| mode(conn)).await;
    assert_eq!(written.expect("write"), "force_custom_plan");
    relay.stop().await;
}
