//! The store's change mark (`store/change_mark.rs`): what a reader that keeps a set
//! between requests trusts. It moves with every commit that may change events — an
//! acknowledged event, any `Store::write` — before the answer leaves, and stays where it
//! was for a write that vouched for touching only its own rows. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{authed, now, publish_ok, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;

both_backends!(the_mark_moves_with_every_write_that_may_change_events);

async fn the_mark_moves_with_every_write_that_may_change_events(backend: TestBackend, name: &str) {
    // No purge ticks: nothing but this test writes.
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| s.storage.expired_purge_interval_secs = 0,
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let store = relay.running().services.store.clone();
    let mark = || async { store.change_mark().await.expect("change mark") };

    let before = mark().await;
    store
        .write_own_rows(|_| Ok(()))
        .await
        .expect("own-rows write");
    assert_eq!(mark().await, before, "an own-rows write leaves the mark");

    store.write(|_| Ok(())).await.expect("write");
    let after_write = mark().await;
    assert_ne!(after_write, before, "any other write moves it");

    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    publish_ok(&mut ws, alice.sign(1, vec![], "a note", now())).await;
    // Read right after the OK: the commit moved the mark before the answer left.
    assert_ne!(mark().await, after_write, "an acknowledged event moves it");
    relay.stop().await;
}
