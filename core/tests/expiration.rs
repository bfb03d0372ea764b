//! NIP-40: an event already past its `expiration` is refused on arrival, and a stored
//! one is never served once it expires — not by REQ, COUNT or POST /query. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{authed, now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::time::Duration;

both_backends!(
    expired_events_are_refused_on_arrival,
    events_vanish_from_every_read_when_they_expire,
);

async fn expired_events_are_refused_on_arrival(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let past = (now() - 10).to_string();
    let stale = alice.sign(1, vec![tag(&["expiration", &past])], "old news", now());
    let (accepted, message) = ws.publish(&stale).await;
    assert!(!accepted, "an expired event was accepted");
    assert!(message.starts_with("invalid: "), "{message}");
    assert_eq!(relay.stored_rows(&stale.id).await, 0);
    // Not a timestamp: refused too, naming the tag.
    let garbled = alice.sign(1, vec![tag(&["expiration", "soon"])], "when?", now());
    let (accepted, message) = ws.publish(&garbled).await;
    assert!(!accepted && message.starts_with("invalid: "), "{message}");
    assert!(message.contains("expiration"), "{message}");
    relay.stop().await;
}

async fn events_vanish_from_every_read_when_they_expire(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let ch = uuid::Uuid::new_v4().to_string();
    let create = alice.sign(9007, vec![tag(&["h", &ch]), tag(&["name", "x"])], "", now());
    assert_eq!(ws.publish(&create).await, (true, String::new()));
    let soon = (now() + 2).to_string();
    let later = (now() + 3_600).to_string();
    let fleeting = alice.sign(1, vec![tag(&["expiration", &soon])], "brief", now());
    let lasting = alice.sign(1, vec![tag(&["expiration", &later])], "long", now());
    let chat = alice.sign(
        9,
        vec![tag(&["h", &ch]), tag(&["expiration", &soon])],
        "brief chat",
        now(),
    );
    for event in [&fleeting, &lasting, &chat] {
        assert_eq!(ws.publish(event).await, (true, String::new()));
    }
    let notes = json!({"kinds": [1], "authors": [alice.pubkey()]});
    let chats = json!({"kinds": [9], "#h": [ch]});
    let http = relay.http();
    let query = |filters: Value| {
        let http = http.clone();
        let alice = alice.clone();
        async move {
            let (status, body) = http
                .post_signed(&alice, "/query", filters.to_string().as_bytes())
                .await;
            assert_eq!(status, 200, "{body}");
            body.as_array()
                .expect("an array of events")
                .iter()
                .map(|e| e["id"].as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        }
    };

    // Before expiry: served everywhere.
    assert_eq!(
        ws.req("a", vec![notes.clone()]).await.expect("REQ").len(),
        2
    );
    assert_eq!(
        ws.req("b", vec![chats.clone()]).await.expect("REQ").len(),
        1
    );
    assert_eq!(
        ws.count("c", vec![notes.clone(), chats.clone()]).await,
        Ok(json!({"count": 3}))
    );
    assert_eq!(query(json!([notes, chats])).await.len(), 3);

    // Past the expiration second.
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let left = ws.req("d", vec![notes.clone()]).await.expect("REQ");
    assert_eq!(
        left.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![lasting.id.clone()]
    );
    assert_eq!(ws.req("e", vec![chats.clone()]).await, Ok(Vec::new()));
    assert_eq!(
        ws.req("f", vec![json!({"ids": [fleeting.id, chat.id]})])
            .await,
        Ok(Vec::new())
    );
    assert_eq!(
        ws.count("g", vec![notes.clone(), chats.clone()]).await,
        Ok(json!({"count": 1}))
    );
    assert_eq!(query(json!([notes, chats])).await, vec![lasting.id.clone()]);
    relay.stop().await;
}
