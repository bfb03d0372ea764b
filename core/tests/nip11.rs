//! NIP-11 `supported_nips`: exactly what the running relay implements — core's own list
//! plus what each *enabled* plugin's manifest declares.

use buzz_core::keys::Keys;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use serde_json::{json, Value};

async fn nip11(relay: &TestRelay) -> Value {
    let (status, doc) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200, "{doc}");
    doc
}

/// Every NIP core implements, each checked over the wire by some suite: 1 (nip01.rs),
/// 9 (deletion), 11 (this file), 29 (channels.rs, nip29_helpers.rs), 40 (expiration.rs),
/// 42 (AUTH), 45 (count.rs), 86 (nip86.rs), 98 (http_bridge.rs).
const CORE_NIPS: [u64; 9] = [1, 9, 11, 29, 40, 42, 45, 86, 98];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_alone_lists_what_core_implements() {
    let Some(relay) = TestRelay::start(TestBackend::Sqlite, "core_alone").await else {
        return;
    };
    let doc = nip11(&relay).await;
    assert_eq!(doc["supported_nips"], json!(CORE_NIPS), "{doc}");
    // Spot-check two of them are really there: COUNT answers, expiration is honoured.
    let alice = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&alice).await, (true, String::new()));
    let past = (now() - 1).to_string();
    let stale = alice.sign(1, vec![tag(&["expiration", &past])], "", now());
    assert!(!ws.publish(&stale).await.0);
    assert_eq!(
        ws.count("c", vec![json!({"kinds": [1]})]).await,
        Ok(json!({"count": 0}))
    );
    relay.stop().await;
}
