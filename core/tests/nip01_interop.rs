//! Findings of an outside NIP-01 suite (issue 10, item 8): what NIP-01 allows is
//! accepted, and every unparseable EVENT gets an answer a client can match.

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(
    an_empty_tag_is_accepted_and_served,
    raw_control_character_gets_ok_false_and_notice,
);

async fn an_empty_tag_is_accepted_and_served(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let event = keys.sign(
        1,
        vec![vec![], tag(&["t", "empty-tag"]), vec![]],
        "NIP-01 allows []",
        now(),
    );
    assert_eq!(ws.publish(&event).await, (true, String::new()));
    let got = ws
        .req("empty", vec![json!({"#t": ["empty-tag"]})])
        .await
        .expect("REQ");
    assert_eq!(got, vec![event.clone()], "served exactly as signed");
    let by_id = ws
        .req("by-id", vec![json!({"ids": [event.id]})])
        .await
        .expect("REQ");
    assert_eq!(by_id.len(), 1);
    relay.stop().await;
}

async fn raw_control_character_gets_ok_false_and_notice(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let event = keys.sign(1, vec![], "bell\u{7}here", now());
    // serde_json escapes the control character; put it back raw, which JSON forbids.
    let text = json!(["EVENT", event])
        .to_string()
        .replace("\\u0007", "\u{7}");
    assert!(text.contains('\u{7}'));
    ws.send_raw(&text).await.expect("send");
    let (accepted, message) = ws.wait_ok(&event.id).await;
    assert!(!accepted && message.starts_with("invalid:"), "{message}");
    let notice = ws
        .recv_where(|v| v[0] == "NOTICE")
        .await
        .expect("NOTICE arrives");
    assert!(
        notice[1].as_str().unwrap_or("").starts_with("invalid:"),
        "{notice}"
    );
    assert_eq!(relay.stored_rows(&event.id).await, 0);

    // Without a readable id there is still a NOTICE.
    ws.send_raw("[\"EVENT\", {\"content\": \"\u{1}\"}]")
        .await
        .expect("send");
    let notice = ws.recv_where(|v| v[0] == "NOTICE").await.expect("NOTICE");
    assert!(notice[1].as_str().unwrap_or("").starts_with("invalid:"));

    // A well-formed JSON object that is not an event: OK false and a NOTICE too.
    let mut partial = serde_json::to_value(&event).expect("json");
    partial["kind"] = json!("one");
    ws.send(&json!(["EVENT", partial])).await.expect("send");
    let (accepted, _) = ws.wait_ok(&event.id).await;
    assert!(!accepted);
    assert!(ws.recv_where(|v| v[0] == "NOTICE").await.is_some());

    // The connection still works.
    let fine = keys.sign(1, vec![], "fine", now());
    assert_eq!(ws.publish(&fine).await, (true, String::new()));
    relay.stop().await;
}
