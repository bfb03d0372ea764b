//! A community with 20,000 channels: reads stay correct and do not decide every channel
//! per request; a new channel, a membership change and a revocation reach cached
//! decisions at once. On both backends.

use buzz_core::both_backends;
use buzz_core::store::channel_state::{insert_rows, ChannelRow};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(twenty_thousand_channels_read_correctly_and_follow_changes);

const SEEDED: usize = 20_000;

fn uuid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

async fn user(relay: &TestRelay) -> (Keys, WsClient) {
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let (ok, msg) = ws.auth(&keys).await;
    assert!(ok, "auth: {msg}");
    (keys, ws)
}

async fn publish(ws: &mut WsClient, event: &Event) {
    let (ok, msg) = ws.publish(event).await;
    assert!(ok, "kind {} refused: {msg}", event.kind);
}

async fn ids(ws: &mut WsClient, filter: serde_json::Value) -> Vec<String> {
    let mut got: Vec<String> = ws
        .req(&uuid::Uuid::new_v4().simple().to_string(), vec![filter])
        .await
        .expect("REQ")
        .into_iter()
        .map(|e| e.id)
        .collect();
    got.sort();
    got
}

async fn twenty_thousand_channels_read_correctly_and_follow_changes(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let community = relay.running().services.communities[0].id;
    let at = now() - 100;
    let rows: Vec<ChannelRow> = (0..SEEDED)
        .map(|n| ChannelRow {
            community_id: community,
            id: uuid(n),
            name: format!("seeded {n}"),
            about: String::new(),
            // Every tenth is private, with no members: nobody below may read those.
            private: n % 10 == 0,
            channel_type: "stream".into(),
            archived: false,
            ttl_seconds: None,
            created_by: "ab".repeat(32),
            created_at: at,
            expires_at: None,
            deleted_at: None,
        })
        .collect();
    relay
        .running()
        .services
        .store
        .write(move |conn| insert_rows(conn, &rows))
        .await
        .expect("seed channels");

    let (alice, mut alice_ws) = user(&relay).await;
    let (bob, mut bob_ws) = user(&relay).await;
    let open = uuid(SEEDED + 1);
    let private = uuid(SEEDED + 2);
    for (id, extra) in [(&open, None), (&private, Some("private"))] {
        let mut tags = vec![tag(&["h", id]), tag(&["name", "made over the wire"])];
        tags.extend(extra.map(|t| tag(&[t])));
        publish(&mut alice_ws, &alice.sign(9007, tags, "", now())).await;
    }
    let in_open = alice.sign(9, vec![tag(&["h", &open])], "hello", now());
    let in_private = alice.sign(9, vec![tag(&["h", &private])], "secret", now());
    let in_seeded = alice.sign(9, vec![tag(&["h", &uuid(1)])], "seeded", now());
    for event in [&in_open, &in_private, &in_seeded] {
        publish(&mut alice_ws, event).await;
    }

    // Bob reads the open and seeded channels, never the private one, whether the request
    // names channels or not.
    let mut expected = vec![in_open.id.clone(), in_seeded.id.clone()];
    expected.sort();
    assert_eq!(ids(&mut bob_ws, json!({"kinds": [9]})).await, expected);
    assert_eq!(
        ids(&mut bob_ws, json!({"kinds": [9], "#h": [open, private]})).await,
        vec![in_open.id.clone()]
    );
    // A private seeded channel reads like a missing one.
    assert!(ids(&mut bob_ws, json!({"#h": [uuid(0)]})).await.is_empty());

    // Added to the private channel, Bob reads it at once (his cached decisions follow).
    let add = alice.sign(
        9000,
        vec![tag(&["h", &private]), tag(&["p", bob.pubkey(), "member"])],
        "",
        now(),
    );
    publish(&mut alice_ws, &add).await;
    let mut with_private = vec![
        in_open.id.clone(),
        in_seeded.id.clone(),
        in_private.id.clone(),
    ];
    with_private.sort();
    assert_eq!(ids(&mut bob_ws, json!({"kinds": [9]})).await, with_private);

    // A channel created after Bob's decisions were cached is readable at once ...
    let later = uuid(SEEDED + 3);
    publish(
        &mut alice_ws,
        &alice.sign(
            9007,
            vec![tag(&["h", &later]), tag(&["name", "later"])],
            "",
            now(),
        ),
    )
    .await;
    let in_later = alice.sign(9, vec![tag(&["h", &later])], "later", now());
    publish(&mut alice_ws, &in_later).await;
    let got = ids(&mut bob_ws, json!({"kinds": [9]})).await;
    assert!(got.contains(&in_later.id), "{got:?}");

    // ... and removal revokes at once.
    let remove = alice.sign(
        9001,
        vec![tag(&["h", &private]), tag(&["p", bob.pubkey()])],
        "",
        now(),
    );
    publish(&mut alice_ws, &remove).await;
    let got = ids(&mut bob_ws, json!({"kinds": [9]})).await;
    assert!(!got.contains(&in_private.id), "revoked: {got:?}");

    alice_ws.close().await;
    bob_ws.close().await;
    relay.stop().await;
}

/// More readable channels than SQLite allows bound variables in one statement (32,766):
/// a community-wide read still works (the channel set is one JSON parameter).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_readable_channels_than_sqlite_variables() {
    let relay = TestRelay::start(TestBackend::Sqlite, "many_channels::sqlite_variables")
        .await
        .expect("sqlite relay");
    let community = relay.running().services.communities[0].id;
    let rows: Vec<ChannelRow> = (0..40_000)
        .map(|n| ChannelRow {
            community_id: community,
            id: uuid(n),
            name: format!("open {n}"),
            about: String::new(),
            private: false,
            channel_type: "stream".into(),
            archived: false,
            ttl_seconds: None,
            created_by: "ab".repeat(32),
            created_at: now() - 100,
            expires_at: None,
            deleted_at: None,
        })
        .collect();
    relay
        .running()
        .services
        .store
        .write(move |conn| insert_rows(conn, &rows))
        .await
        .expect("seed channels");
    let (alice, mut alice_ws) = user(&relay).await;
    let channel = uuid(40_001);
    publish(
        &mut alice_ws,
        &alice.sign(
            9007,
            vec![tag(&["h", &channel]), tag(&["name", "x"])],
            "",
            now(),
        ),
    )
    .await;
    let message = alice.sign(9, vec![tag(&["h", &channel])], "hi", now());
    publish(&mut alice_ws, &message).await;
    let (_bob, mut bob_ws) = user(&relay).await;
    assert_eq!(
        ids(&mut bob_ws, json!({"kinds": [9]})).await,
        vec![message.id.clone()]
    );
    alice_ws.close().await;
    bob_ws.close().await;
    relay.stop().await;
}
