//! What stock NIP-29 helpers send and expect (NDK `NDKSimpleGroup`, nostr-tools
//! `nip29`): a 9007 with only `h`, a refusal of a non-UUID id that says what to send,
//! `duplicate:` for a join by a member, the relay's 9001 after a 9022, and NIP-11
//! `pubkey` equal to the key that signs group state. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{authed, now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(
    a_channel_needs_no_name,
    non_uuid_ids_are_refused_in_actionable_words,
    a_member_joining_again_is_a_duplicate,
    leaving_issues_the_relays_removal,
    nip11_pubkey_is_the_group_state_signer,
);

fn fresh_sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn send(ws: &mut WsClient, keys: &Keys, kind: u32, tags: Vec<Vec<String>>) -> (bool, String) {
    ws.publish(&keys.sign(kind, tags, "", now())).await
}

async fn metadata(ws: &mut WsClient, ch: &str) -> Event {
    let mut got = ws
        .req(&fresh_sub(), vec![json!({"kinds": [39000], "#d": [ch]})])
        .await
        .expect("REQ 39000");
    assert_eq!(got.len(), 1, "{got:?}");
    got.remove(0)
}

async fn a_channel_needs_no_name(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let ch = uuid::Uuid::new_v4().to_string();
    // nostr-tools generateCreateGroupEventTemplate / NDK createGroup: only `h`.
    assert_eq!(
        send(&mut ws, &alice, 9007, vec![tag(&["h", &ch])]).await,
        (true, String::new())
    );
    let unnamed = metadata(&mut ws, &ch).await;
    assert_eq!(unnamed.tag_value("name"), None, "{:?}", unnamed.tags);
    // Messages work at once; a 9002 names it later.
    assert!(send(&mut ws, &alice, 9, vec![tag(&["h", &ch])]).await.0);
    assert_eq!(
        send(
            &mut ws,
            &alice,
            9002,
            vec![tag(&["h", &ch]), tag(&["name", "Pizza"])]
        )
        .await,
        (true, String::new())
    );
    assert_eq!(
        metadata(&mut ws, &ch).await.tag_value("name"),
        Some("Pizza")
    );
    // An explicitly empty name is still refused: it names nothing.
    let other = uuid::Uuid::new_v4().to_string();
    let (accepted, message) = send(
        &mut ws,
        &alice,
        9007,
        vec![tag(&["h", &other]), tag(&["name", " "])],
    )
    .await;
    assert!(!accepted && message.starts_with("invalid: "), "{message}");
    relay.stop().await;
}

async fn non_uuid_ids_are_refused_in_actionable_words(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    for id in ["pizza-lovers", "0F8B7E3C-1D2A-4B5C-9E8F-123456789ABC"] {
        let (accepted, message) = send(&mut ws, &alice, 9007, vec![tag(&["h", id])]).await;
        assert!(!accepted, "{id} accepted");
        assert!(message.starts_with("invalid: "), "{message}");
        // It says which id, what shape is wanted, and how to make one.
        assert!(message.contains(id), "{message}");
        assert!(message.contains("lowercase UUID"), "{message}");
        assert!(message.contains("8-4-4-4-12"), "{message}");
    }
    relay.stop().await;
}

async fn a_member_joining_again_is_a_duplicate(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let (alice, bob) = (Keys::generate(), Keys::generate());
    let mut a = authed(&relay, &alice).await;
    let mut b = authed(&relay, &bob).await;
    let open = uuid::Uuid::new_v4().to_string();
    let private = uuid::Uuid::new_v4().to_string();
    let named = |id: &str| vec![tag(&["h", id]), tag(&["name", "x"])];
    assert!(send(&mut a, &alice, 9007, named(&open)).await.0);
    let mut private_tags = named(&private);
    private_tags.push(tag(&["private"]));
    assert!(send(&mut a, &alice, 9007, private_tags).await.0);
    assert_eq!(
        send(&mut b, &bob, 9021, vec![tag(&["h", &open])]).await,
        (true, String::new())
    );
    let members_before = a
        .req(&fresh_sub(), vec![json!({"kinds": [39002], "#d": [open]})])
        .await
        .expect("members");
    let join_again = bob.sign(9021, vec![tag(&["h", &open])], "again", now());
    let (accepted, message) = b.publish(&join_again).await;
    assert!(!accepted, "a second join was accepted: {message}");
    assert!(message.starts_with("duplicate: "), "{message}");
    assert_eq!(relay.stored_rows(&join_again.id).await, 0);
    let members_after = a
        .req(&fresh_sub(), vec![json!({"kinds": [39002], "#d": [open]})])
        .await
        .expect("members");
    assert_eq!(
        members_before, members_after,
        "a duplicate join changes nothing"
    );
    // The owner of a private channel is a member too.
    let (accepted, message) = send(&mut a, &alice, 9021, vec![tag(&["h", &private])]).await;
    assert!(!accepted && message.starts_with("duplicate: "), "{message}");
    relay.stop().await;
}

async fn leaving_issues_the_relays_removal(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let relay_pk = relay.running().services.relay_keys.pubkey().to_owned();
    let (alice, bob) = (Keys::generate(), Keys::generate());
    let mut a = authed(&relay, &alice).await;
    let mut b = authed(&relay, &bob).await;
    let ch = uuid::Uuid::new_v4().to_string();
    assert!(
        send(
            &mut a,
            &alice,
            9007,
            vec![tag(&["h", &ch]), tag(&["name", "x"])]
        )
        .await
        .0
    );
    assert!(send(&mut b, &bob, 9021, vec![tag(&["h", &ch])]).await.0);
    a.req("removals", vec![json!({"kinds": [9001], "#h": [ch]})])
        .await
        .expect("live 9001 subscription");
    assert_eq!(
        send(&mut b, &bob, 9022, vec![tag(&["h", &ch])]).await,
        (true, String::new())
    );
    // Live, then stored: one relay-signed 9001 naming bob.
    let live = a
        .recv_where(|v| v[0] == "EVENT" && v[1] == "removals")
        .await
        .expect("the relay's 9001 arrives live");
    let removal: Event = serde_json::from_value(live[2].clone()).expect("event");
    assert_eq!(removal.kind, 9001);
    assert_eq!(removal.pubkey, relay_pk);
    assert_eq!(removal.tag_value("h"), Some(ch.as_str()));
    assert_eq!(removal.tag_value("p"), Some(bob.pubkey()));
    let stored = a
        .req(&fresh_sub(), vec![json!({"kinds": [9001], "#h": [ch]})])
        .await
        .expect("stored 9001");
    assert_eq!(stored, vec![removal]);
    // And the join before it got the relay's 9000, so "the latest 9000/9001 naming
    // you" (NIP-29's membership rule) has both halves to go by.
    let added = a
        .req(
            &fresh_sub(),
            vec![json!({"kinds": [9000], "#p": [bob.pubkey()], "#h": [ch]})],
        )
        .await
        .expect("9000 after the join");
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(added[0].pubkey, relay_pk);
    relay.stop().await;
}

async fn nip11_pubkey_is_the_group_state_signer(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let (status, doc) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200, "{doc}");
    let signer = relay.running().services.relay_keys.pubkey().to_owned();
    assert_eq!(doc["self"], json!(signer));
    assert_eq!(doc["pubkey"], json!(signer), "{doc}");
    relay.stop().await;
}
