//! NIP-40 purge and the index: when core purges expired events, their search documents
//! go in the same transaction (`Plugin::on_events_purged`: FTS5's contentless rows are taken
//! out by rowid, nothing else would), and documents of events that have not expired
//! stay. Both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

both_backends!(expired_documents_leave_the_index);

/// Documents in the index (`search_fts` on SQLite, `search_documents` on PostgreSQL).
async fn documents(relay: &TestRelay) -> i64 {
    relay
        .running()
        .services
        .store
        .read(|mut conn| buzz_search::index_size(&mut conn))
        .await
        .expect("index size")
        .0
}

async fn expired_documents_leave_the_index(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({}), |s| {
        s.storage.expired_purge_interval_secs = 1;
    })
    .await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let channel = alice.create_channel(false).await;
    let kept = alice.post(&channel, "the walrus stays").await;
    let before = documents(&relay).await;
    let soon = (now() + 2).to_string();
    let mut fleeting = Vec::new();
    for word in ["walrus leaves", "walrus vanishes"] {
        let event = alice.sign(
            9,
            vec![tag(&["h", &channel]), tag(&["expiration", &soon])],
            word,
        );
        fleeting.push(alice.publish(event).await);
    }
    assert_eq!(documents(&relay).await, before + 2, "both indexed");

    // Expiry in 2 s, a purge every second: the documents go within 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    while documents(&relay).await > before {
        assert!(Instant::now() < deadline, "expired documents still indexed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(documents(&relay).await, before, "the lasting one stays");
    for event in &fleeting {
        assert_eq!(relay.stored_rows(&event.id).await, 0, "{}", event.content);
    }
    assert_eq!(
        alice.search(json!({"search": "walrus"})).await,
        vec![kept.id.clone()]
    );
    relay.stop().await;
}
