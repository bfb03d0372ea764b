//! NIP-45 `COUNT` stops counting at `limits.max_count`: past it the answer is the cap
//! with `"approximate": true` (instead of a scan of every matching row); at or under it
//! the exact count, without the flag. NIP-11 advertises the cap. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{now, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(a_count_past_the_cap_is_approximate);

const CAP: u64 = 3;

async fn notes(ws: &mut WsClient, keys: &Keys, n: usize) {
    for i in 0..n {
        let event = keys.sign(1, vec![], &format!("note {i}"), now());
        let (accepted, message) = ws.publish(&event).await;
        assert!(accepted, "{message}");
    }
}

async fn a_count_past_the_cap_is_approximate(backend: TestBackend, name: &str) {
    let Some(relay) =
        TestRelay::start_with(backend, name, |s| s.limits.max_count = CAP, Vec::new()).await
    else {
        return;
    };
    let (under, over) = (Keys::generate(), Keys::generate());
    let mut ws = relay.ws().await;
    notes(&mut ws, &under, 3).await;
    notes(&mut ws, &over, 5).await;

    let exact = ws
        .count(
            "exact",
            vec![json!({"kinds": [1], "authors": [under.pubkey()]})],
        )
        .await
        .expect("COUNT");
    assert_eq!(exact, json!({"count": 3}));
    let capped = ws
        .count(
            "capped",
            vec![json!({"kinds": [1], "authors": [over.pubkey()]})],
        )
        .await
        .expect("COUNT");
    assert_eq!(capped, json!({"count": CAP, "approximate": true}));
    // The cap holds for all filters together.
    let both = vec![
        json!({"authors": [under.pubkey()]}),
        json!({"authors": [over.pubkey()]}),
    ];
    let capped = ws.count("both", both).await.expect("COUNT");
    assert_eq!(capped, json!({"count": CAP, "approximate": true}));

    let (status, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    assert_eq!(info["limitation"]["max_count"], CAP);
    relay.stop().await;
}
