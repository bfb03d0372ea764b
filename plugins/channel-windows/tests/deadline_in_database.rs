//! NIP-CW's thread-window deadline reaches into PostgreSQL: a window whose read stalls
//! (another session holds `thread_metadata`) answers 503 at the deadline, and the
//! database cancels the stalled statement then — it does not keep waiting (and keep a
//! pooled connection busy) after the client was told to retry.
//!
//! The relay's own session bounds are switched off here, so only the plugin's deadline
//! can end the wait. Needs `BUZZ_TEST_DATABASE_URL` (skipped otherwise; a failure under
//! `CI`).

mod common;

use buzz_channel_windows::ChannelWindowsPlugin;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, TableLock, TestBackend, TestRelay};
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_thread_window_is_cancelled_by_the_database() {
    let name = "a_stalled_thread_window_is_cancelled_by_the_database";
    let Some(relay) = TestRelay::start_with(
        TestBackend::Postgres,
        name,
        |s| {
            s.storage.statement_timeout_ms = 0;
            s.storage.lock_timeout_ms = 0;
            if let Some(section) = s.plugins.get_mut(buzz_channel_windows::NAME) {
                section
                    .options
                    .insert("thread_deadline_ms".into(), json!(500));
            }
        },
        vec![PluginEntry::of::<ChannelWindowsPlugin>()],
    )
    .await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 10;
    let root = alice.post_at(&ch, "root", t).await;
    alice.post_reply(&ch, &root, t + 1).await;
    let filters = vec![thread(&ch, &root.id, 5, None)];
    let (status, body) = alice.http(&relay, filters.clone()).await;
    assert_eq!(status, 200, "served before the stall: {body}");

    let mut lock = TableLock::take(&relay.settings.storage.database_url, "thread_metadata");

    let started = Instant::now();
    let (status, body) = alice.http(&relay, filters.clone()).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at the deadline: {:?}",
        started.elapsed()
    );
    // The database ended the stalled read too (within a moment of the answer).
    assert!(
        lock.waiters_gone_within(Duration::from_secs(3)),
        "the stalled statement still waits for the lock after the 503"
    );
    lock.release();
    let (status, body) = alice.http(&relay, filters).await;
    assert_eq!(status, 200, "served again: {body}");
    relay.stop().await;
}
