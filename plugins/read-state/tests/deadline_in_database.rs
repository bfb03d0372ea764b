//! The 8 s intent deadline reaches into PostgreSQL: an intent whose write stalls
//! (another session holds `read_state_frontiers`) answers `unknown` at the deadline,
//! the database cancels the stalled statement then (the writer is free again at once),
//! and nothing of the intent lands after the lock is released.
//!
//! The relay's own session bounds are switched off here, so only the plugin's deadline
//! can end the wait. Needs `BUZZ_TEST_DATABASE_URL` (skipped otherwise; a failure under
//! `CI`).

mod common;

use buzz_core::testkit::{TableLock, TestBackend};
use buzz_read_state_client as client;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_intent_is_cancelled_by_the_database() {
    let name = "a_stalled_intent_is_cancelled_by_the_database";
    let Some(relay) = relay_with(
        TestBackend::Postgres,
        name,
        json!({"intent_deadline_ms": 500}),
        |s| {
            s.storage.statement_timeout_ms = 0;
            s.storage.lock_timeout_ms = 0;
        },
    )
    .await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("stall", "stream").await;
    bob.join(&ch).await;
    alice.start(&ch).await;
    bob.start(&ch).await;
    let m = alice.post(&ch).await;
    assert_eq!(bob.row(&ch).await["unread"], true);

    let mut lock = TableLock::take(&relay.settings.storage.database_url, "read_state_frontiers");

    let started = Instant::now();
    let out = bob.intents(&[client::mark_through(&ch, None, &m.id)]).await;
    assert_eq!(out, vec![json!({"status": "unknown", "retryable": true})]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at the deadline: {:?}",
        started.elapsed()
    );
    // The database ended the stalled write too (within a moment of the answer).
    assert!(
        lock.waiters_gone_within(Duration::from_secs(3)),
        "the stalled intent still waits for the lock after answering unknown"
    );
    lock.release();
    // Nothing of the intent landed once the lock was gone; the next one applies.
    assert_eq!(
        bob.row(&ch).await["unread"],
        true,
        "the stalled mark did not land"
    );
    bob.apply(client::mark_through(&ch, None, &m.id)).await;
    assert_eq!(bob.row(&ch).await["unread"], false);
    relay.stop().await;
}
