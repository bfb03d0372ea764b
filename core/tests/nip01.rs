//! NIP-01 behaviour over the real wire, on SQLite and PostgreSQL.

use buzz_core::both_backends;

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(
    publish_query_and_survive_restart,
    replaceable_and_addressable_keep_newest,
    author_deletion_hides_events,
    duplicate_is_ok_true,
    live_fan_out_reaches_matching_subscriptions,
    every_tag_of_a_large_event_is_indexed,
    same_second_burst_orders_by_id_and_limits_cut_exactly,
);

async fn publish_query_and_survive_restart(backend: TestBackend, name: &str) {
    let Some(mut relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let event = keys.sign(1, vec![tag(&["t", "hello"])], "hello buzz", now());
    let mut ws = relay.ws().await;
    assert_eq!(ws.publish(&event).await, (true, String::new()));
    let got = ws.req("s", vec![json!({"kinds": [1]})]).await.expect("REQ");
    assert_eq!(got, vec![event.clone()]);
    ws.close().await;

    relay.restart().await;
    let mut ws = relay.ws().await;
    let got = ws
        .req("s", vec![json!({"#t": ["hello"]})])
        .await
        .expect("REQ after restart");
    assert_eq!(got, vec![event], "OK=true means durable across restart");
    relay.stop().await;
}

async fn replaceable_and_addressable_keep_newest(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let t = now();
    let mut ws = relay.ws().await;
    let old = keys.sign(0, vec![], "old profile", t - 10);
    let new = keys.sign(0, vec![], "new profile", t);
    assert!(ws.publish(&new).await.0);
    let (ok, msg) = ws.publish(&old).await;
    assert!(!ok && msg.starts_with("duplicate:"), "{msg}");
    let got = ws
        .req("p", vec![json!({"kinds": [0], "authors": [keys.pubkey()]})])
        .await
        .expect("REQ");
    assert_eq!(got, vec![new]);

    let a1 = keys.sign(30_023, vec![tag(&["d", "doc"])], "v1", t - 5);
    let a2 = keys.sign(30_023, vec![tag(&["d", "doc"])], "v2", t);
    let other = keys.sign(30_023, vec![tag(&["d", "other"])], "x", t);
    for e in [&a1, &a2, &other] {
        assert!(ws.publish(e).await.0);
    }
    let got = ws
        .req("a", vec![json!({"kinds": [30023], "#d": ["doc"]})])
        .await
        .expect("REQ");
    assert_eq!(got, vec![a2]);
    relay.stop().await;
}

async fn author_deletion_hides_events(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let (alice, mallory) = (Keys::generate(), Keys::generate());
    let t = now();
    let mut ws = relay.ws().await;
    let note = alice.sign(1, vec![], "oops", t);
    assert!(ws.publish(&note).await.0);
    // Someone else's deletion does nothing.
    let forged = mallory.sign(5, vec![tag(&["e", &note.id])], "", t);
    assert!(ws.publish(&forged).await.0);
    assert_eq!(
        ws.req("q", vec![json!({"ids": [note.id]})])
            .await
            .expect("REQ")
            .len(),
        1
    );
    // The author's deletion hides it, and it cannot be published again.
    let deletion = alice.sign(5, vec![tag(&["e", &note.id])], "", t);
    assert!(ws.publish(&deletion).await.0);
    assert!(ws
        .req("q", vec![json!({"ids": [note.id]})])
        .await
        .expect("REQ")
        .is_empty());
    let (ok, msg) = ws.publish(&note).await;
    assert!(!ok && msg.starts_with("blocked:"), "{msg}");
    relay.stop().await;
}

async fn duplicate_is_ok_true(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let event = keys.sign(1, vec![], "twice", now());
    let mut ws = relay.ws().await;
    assert!(ws.publish(&event).await.0);
    let (ok, msg) = ws.publish(&event).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");
    relay.stop().await;
}

async fn live_fan_out_reaches_matching_subscriptions(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut reader = relay.ws().await;
    assert!(reader
        .req("live", vec![json!({"kinds": [1], "#t": ["news"]})])
        .await
        .expect("REQ")
        .is_empty());
    let mut writer = relay.ws().await;
    let other = keys.sign(1, vec![tag(&["t", "other"])], "not for you", now());
    let news = keys.sign(1, vec![tag(&["t", "news"])], "for you", now());
    assert!(writer.publish(&other).await.0);
    assert!(writer.publish(&news).await.0);
    let got = reader
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("live event");
    assert_eq!(got, json!(["EVENT", "live", news]));
    relay.stop().await;
}

async fn every_tag_of_a_large_event_is_indexed(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    // The most tags an event may carry; each is indexed by its own statement.
    let tags: Vec<Vec<String>> = (0..2_000)
        .map(|i| tag(&["t", &format!("topic-{i}")]))
        .collect();
    let event = keys.sign(1, tags, "many topics", now());
    let mut ws = relay.ws().await;
    assert_eq!(ws.publish(&event).await, (true, String::new()));
    for topic in ["topic-0", "topic-1000", "topic-1999"] {
        // One subscription id per REQ: the event's live delivery may still reach the
        // first subscription after its stored answer (an OK precedes fan-out), and a
        // reused id would count that copy in the next answer.
        let got = ws
            .req(topic, vec![json!({"#t": [topic]})])
            .await
            .expect("REQ");
        assert_eq!(got, vec![event.clone()], "found by #t {topic}");
    }
    relay.stop().await;
}

/// NIP-01 order is created_at DESC, then id ASC: a burst within one second must come
/// back in id order, and `limit` / `until` must cut that order exactly.
async fn same_second_burst_orders_by_id_and_limits_cut_exactly(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let t = now() - 5;
    let mut events = Vec::new();
    for (offset, count) in [(0, 30), (-1, 5), (1, 5)] {
        for i in 0..count {
            events.push(keys.sign(1, vec![], &format!("burst {offset} {i}"), t + offset));
        }
    }
    let mut ws = relay.ws().await;
    for event in &events {
        assert_eq!(ws.publish(event).await, (true, String::new()));
    }
    let mut expected = events.clone();
    expected.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));

    let author = json!([keys.pubkey()]);
    let all = ws
        .req("all", vec![json!({"authors": author})])
        .await
        .expect("REQ");
    assert_eq!(all, expected, "created_at DESC, id ASC");

    let first = ws
        .req("first", vec![json!({"authors": author, "limit": 12})])
        .await
        .expect("REQ");
    assert_eq!(
        first,
        expected[..12],
        "limit cuts inside the same-second run"
    );

    // Everything at or before t: the 30-event burst, then the older five.
    let until = ws
        .req(
            "until",
            vec![json!({"authors": author, "until": t, "limit": 32})],
        )
        .await
        .expect("REQ");
    assert_eq!(
        until,
        expected[5..37],
        "until keeps the same second, limit cuts after it"
    );
    relay.stop().await;
}
