//! SQLite storage upkeep that only the embedded backend has.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use std::time::{Duration, Instant};

/// The writer only appends to the WAL; a thread of its own copies it back into the
/// database file. Without that thread nothing would reach `buzz.db` until the WAL held
/// 10,000 pages (the writer's backstop), far more than this test writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_is_checkpointed_in_the_background() {
    let Some(relay) = TestRelay::start(TestBackend::Sqlite, "sqlite_wal").await else {
        return;
    };
    let db = relay.settings.relay.data_dir.join("buzz.db");
    let size = || std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    let before = size();

    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    for i in 0..200 {
        let event = keys.sign(1, vec![tag(&["t", "wal"])], &"x".repeat(2_000 + i), now());
        assert_eq!(ws.publish(&event).await, (true, String::new()));
    }
    // 200 events of 2 KB need ~100 new pages; the database file grows once they are
    // checkpointed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while size() < before + 100 * 4_096 {
        assert!(
            Instant::now() < deadline,
            "database file still {} bytes (was {before}): the WAL was not checkpointed",
            size()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.stop().await;
}
