//! NIP-40 purge and read state: when core purges an expired message, the mention rows
//! it made go in the same transaction (`Plugin::on_events_purged`); a lasting message's stay.
//! On SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

both_backends!(expired_messages_take_their_mentions);

async fn mention_rows(relay: &TestRelay, event_id: &str) -> i64 {
    let cid = community_id(relay);
    count(
        relay,
        &format!(
            "SELECT COUNT(*) AS v FROM read_state_mentions \
             WHERE community_id = {cid} AND event_id = '{event_id}'"
        ),
    )
    .await
}

async fn expired_messages_take_their_mentions(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({}), |s| {
        s.storage.expired_purge_interval_secs = 1;
    })
    .await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("general", "stream").await;
    bob.join(&ch).await;
    let bob_pk = bob.keys.pubkey().to_owned();
    let soon = (now() + 2).to_string();
    let fleeting = alice
        .publish(alice.keys.sign(
            9,
            vec![
                tag(&["h", &ch]),
                tag(&["p", &bob_pk]),
                tag(&["expiration", &soon]),
            ],
            "bob, briefly",
            tick(),
        ))
        .await;
    let lasting = alice
        .publish(alice.keys.sign(
            9,
            vec![tag(&["h", &ch]), tag(&["p", &bob_pk])],
            "bob, for good",
            tick(),
        ))
        .await;
    assert_eq!(mention_rows(&relay, &fleeting.id).await, 1);
    assert_eq!(mention_rows(&relay, &lasting.id).await, 1);

    // Expiry in 2 s, a purge every second: gone within 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    while relay.stored_rows(&fleeting.id).await > 0 {
        assert!(
            Instant::now() < deadline,
            "the expired message is still stored"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        mention_rows(&relay, &fleeting.id).await,
        0,
        "its mention row"
    );
    assert_eq!(
        mention_rows(&relay, &lasting.id).await,
        1,
        "the lasting one's"
    );
    relay.stop().await;
}
