//! Reads before NIP-42 AUTH, as lazily authenticating clients (nostr-sdk, nostr-tools
//! with `onauth`, NDK) send them: whatever could match channel-scoped data is answered
//! `CLOSED "auth-required: ..."` — never a silent empty EOSE — and the same REQ after
//! AUTH returns the data. Public data stays readable anonymously, and no answer tells a
//! private channel or message from one that does not exist. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

both_backends!(
    channel_data_before_auth_is_auth_required_then_served,
    public_data_stays_readable_anonymously,
    private_and_missing_answer_alike,
    closed_communities_need_auth_for_everything,
);

fn fresh_sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn authed(relay: &TestRelay, keys: &Keys) -> WsClient {
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(keys).await, (true, String::new()));
    ws
}

async fn ok(ws: &mut WsClient, keys: &Keys, kind: u32, tags: Vec<Vec<String>>) -> Event {
    let event = keys.sign(kind, tags, &uuid::Uuid::new_v4().to_string(), now());
    let (accepted, message) = ws.publish(&event).await;
    assert!(accepted, "kind {kind} refused: {message}");
    event
}

async fn create_channel(ws: &mut WsClient, keys: &Keys, private: bool) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut tags = vec![tag(&["h", &id]), tag(&["name", "general"])];
    if private {
        tags.push(tag(&["private"]));
    }
    ok(ws, keys, 9007, tags).await;
    id
}

/// The CLOSED text of a refused REQ (panics on EOSE, naming what came back).
async fn closed(ws: &mut WsClient, filter: &Value) -> String {
    match ws.req(&fresh_sub(), vec![filter.clone()]).await {
        Err(text) => text,
        Ok(events) => panic!(
            "{filter} was answered with {} events and EOSE",
            events.len()
        ),
    }
}

async fn channel_data_before_auth_is_auth_required_then_served(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let ch = create_channel(&mut writer, &alice, false).await;
    let message = ok(&mut writer, &alice, 9, vec![tag(&["h", &ch])]).await;

    // The filters, and others that could match channel-scoped rows.
    let filters = [
        json!({"kinds": [39000]}),
        json!({"kinds": [39000], "#d": [ch]}),
        json!({"ids": [message.id]}),
        json!({"kinds": [9]}),
        json!({"#h": [ch]}),
        json!({"#d": [ch]}),
        json!({"kinds": [1, 9], "limit": 10}),
        json!({"#d": [ch], "limit": 5}),
    ];
    let mut lazy = relay.ws().await;
    for filter in &filters {
        let text = closed(&mut lazy, filter).await;
        assert!(text.starts_with("auth-required: "), "{filter}: {text}");
    }

    // A filter that names nothing channel-shaped is served, without the channel rows.
    let public = lazy
        .req(&fresh_sub(), vec![json!({"authors": [alice.pubkey()]})])
        .await
        .expect("authors alone");
    assert!(public.is_empty(), "{public:?}");

    // Same connection, after AUTH: the same REQs return the data.
    let bob = Keys::generate();
    assert_eq!(lazy.auth(&bob).await, (true, String::new()));
    let groups = lazy
        .req(&fresh_sub(), vec![filters[0].clone()])
        .await
        .expect("kinds 39000 after AUTH");
    assert!(
        groups.iter().any(|e| e.tag_value("d") == Some(ch.as_str())),
        "the open channel's 39000 is listed after AUTH: {groups:?}"
    );
    let by_d = lazy
        .req(&fresh_sub(), vec![filters[1].clone()])
        .await
        .expect("39000 by d after AUTH");
    assert_eq!(by_d.len(), 1, "{by_d:?}");
    for filter in [&filters[2], &filters[3]] {
        let got = lazy
            .req(&fresh_sub(), vec![filter.clone()])
            .await
            .unwrap_or_else(|e| panic!("{filter} after AUTH: {e}"));
        assert_eq!(got, vec![message.clone()], "{filter}");
    }
    relay.stop().await;
}

async fn public_data_stays_readable_anonymously(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let note = ok(&mut writer, &alice, 1, vec![]).await;
    let profile = ok(&mut writer, &alice, 0, vec![]).await;
    let mut anon = relay.ws().await;
    let cases = [
        (json!({"kinds": [1]}), vec![note.clone()]),
        (
            json!({"kinds": [0], "authors": [alice.pubkey()]}),
            vec![profile.clone()],
        ),
        // Ids that all name stored community-wide events are served as asked.
        (json!({"ids": [note.id]}), vec![note.clone()]),
    ];
    for (filter, want) in cases {
        let got = anon
            .req(&fresh_sub(), vec![filter.clone()])
            .await
            .unwrap_or_else(|e| panic!("{filter} anonymously: {e}"));
        assert_eq!(got, want, "{filter}");
    }
    // No kinds and nothing channel-shaped: the community-wide rows (a channel message of
    // hers would be left out; see channel_data_before_auth_is_auth_required_then_served).
    let mut got = anon
        .req(&fresh_sub(), vec![json!({"authors": [alice.pubkey()]})])
        .await
        .expect("authors alone, anonymously");
    got.sort_by_key(|e| e.kind);
    assert_eq!(got, vec![profile.clone(), note.clone()]);
    // Live too: an anonymous kind-1 subscription gets the next note.
    anon.req("live", vec![json!({"kinds": [1]})])
        .await
        .expect("live REQ");
    let next = ok(&mut writer, &alice, 1, vec![]).await;
    let live = anon
        .recv_where(|v| v[0] == "EVENT" && v[1] == "live")
        .await
        .expect("live note");
    assert_eq!(live[2], json!(next));
    relay.stop().await;
}

async fn private_and_missing_answer_alike(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let private = create_channel(&mut writer, &alice, true).await;
    let secret = ok(&mut writer, &alice, 9, vec![tag(&["h", &private])]).await;
    let missing_channel = uuid::Uuid::new_v4().to_string();
    let missing_id = "ab".repeat(32);

    // Anonymous: the same words for a private channel's data and for nothing at all.
    let mut anon = relay.ws().await;
    let pairs = [
        (json!({"ids": [secret.id]}), json!({"ids": [missing_id]})),
        (
            json!({"kinds": [39000], "#d": [private]}),
            json!({"kinds": [39000], "#d": [missing_channel]}),
        ),
        (json!({"#h": [private]}), json!({"#h": [missing_channel]})),
    ];
    for (real, none) in &pairs {
        let a = closed(&mut anon, real).await;
        let b = closed(&mut anon, none).await;
        assert!(a.starts_with("auth-required: "), "{a}");
        assert_eq!(a, b, "{real} vs {none}");
    }
    // Authenticated but not a member: both are an empty EOSE.
    let mut bob = authed(&relay, &Keys::generate()).await;
    for (real, none) in &pairs {
        let a = bob.req(&fresh_sub(), vec![real.clone()]).await;
        let b = bob.req(&fresh_sub(), vec![none.clone()]).await;
        assert_eq!(a, Ok(Vec::new()), "{real}");
        assert_eq!(b, Ok(Vec::new()), "{none}");
    }
    relay.stop().await;
}

async fn closed_communities_need_auth_for_everything(backend: TestBackend, name: &str) {
    let Some(relay) =
        TestRelay::start_with(backend, name, |s| s.communities[0].open = false, Vec::new()).await
    else {
        return;
    };
    let mut anon = relay.ws().await;
    let text = closed(&mut anon, &json!({"kinds": [1]})).await;
    assert!(text.starts_with("auth-required: "), "{text}");
    relay.stop().await;
}
