//! A lookup by ids returns every stored event it names, however many ids that is within
//! `max_filter_values` (each id matches at most one event, so `max_limit` does not cut
//! it), in one statement. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::collections::HashSet;

both_backends!(an_ids_lookup_returns_every_stored_id);

async fn an_ids_lookup_returns_every_stored_id(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let t = now();
    let mut ws = relay.ws().await;
    // Ids that match nothing stored read like channel data before AUTH (anonymous.rs).
    assert!(ws.auth(&keys).await.0);
    // More than `max_limit` (500): an ids lookup is bounded by the ids it names.
    let events: Vec<_> = (0..1_000)
        .map(|i| keys.sign(1, vec![], &format!("note {i}"), t - (i % 50)))
        .collect();
    let oks = ws.burst(&events).await;
    assert_eq!(oks.len(), events.len());
    assert!(oks.values().all(|(ok, _)| *ok));

    // Every stored id, and as many that are stored nowhere.
    let mut ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    let missing: Vec<String> = (0..900)
        .map(|i| keys.sign(1, vec![], &format!("never sent {i}"), t).id)
        .collect();
    ids.extend(missing.iter().cloned());
    let got = ws
        .req("ids", vec![json!({"ids": ids})])
        .await
        .expect("REQ by ids");
    let got: HashSet<String> = got.into_iter().map(|e| e.id).collect();
    let stored: HashSet<String> = events.iter().map(|e| e.id.clone()).collect();
    assert_eq!(got.len(), 1_000, "every stored id, once");
    assert_eq!(got, stored);

    // An explicit limit still holds.
    let got = ws
        .req("few", vec![json!({"ids": ids, "limit": 10})])
        .await
        .expect("REQ by ids with a limit");
    assert_eq!(got.len(), 10);
    relay.stop().await;
}
