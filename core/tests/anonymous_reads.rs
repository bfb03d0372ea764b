//! Reads before NIP-42 AUTH, as lazily authenticating clients (nostr-sdk, nostr-tools
//! with `onauth`, NDK) and generic ones (relay test suites) send them: an anonymous
//! reader gets every community-wide event its filters match, and when they could also
//! match channel data the answer ends with `CLOSED "auth-required: ..."` instead of EOSE
//! — never a silent EOSE — so the same REQ after AUTH returns the rest. No answer tells a
//! private channel or message from one that does not exist. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{
    authed, create_channel, now, publish_kind, tag, ReqAnswer, TestBackend, TestRelay, WsClient,
};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

both_backends!(
    channel_data_before_auth_is_auth_required_then_served,
    public_data_stays_readable_anonymously,
    private_and_missing_answer_alike,
    closed_communities_need_auth_for_everything,
    public_events_come_first_then_auth_required,
    an_auth_required_answer_is_not_live,
);

fn fresh_sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The answer to one anonymous REQ of `filter`, which must end with
/// `CLOSED "auth-required: ..."` (panics on EOSE, naming what came back): its events and
/// the CLOSED text.
async fn closed_after(ws: &mut WsClient, filter: &Value) -> (Vec<Event>, String) {
    match ws.req_answer(&fresh_sub(), vec![filter.clone()]).await {
        Ok(ReqAnswer {
            events,
            closed: Some(text),
        }) => {
            assert!(text.starts_with("auth-required: "), "{filter}: {text}");
            (events, text)
        }
        other => panic!("{filter} did not end with CLOSED: {other:?}"),
    }
}

/// The CLOSED text of a REQ answered with no events at all.
async fn closed(ws: &mut WsClient, filter: &Value) -> String {
    let (events, text) = closed_after(ws, filter).await;
    assert!(events.is_empty(), "{filter} was answered with {events:?}");
    text
}

async fn channel_data_before_auth_is_auth_required_then_served(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let ch = create_channel(&mut writer, &alice, false).await;
    let message = publish_kind(&mut writer, &alice, 9, vec![tag(&["h", &ch])]).await;

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

    // A filter that names nothing channel-shaped is served (EOSE), without the channel rows.
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
    let note = publish_kind(&mut writer, &alice, 1, vec![]).await;
    let profile = publish_kind(&mut writer, &alice, 0, vec![]).await;
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
    let next = publish_kind(&mut writer, &alice, 1, vec![]).await;
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
    let secret = publish_kind(&mut writer, &alice, 9, vec![tag(&["h", &private])]).await;
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

/// The filters a generic NIP-01 suite sends before AUTH (mikedilger's relay-tester:
/// "Newest events are returned when filter is limited", "Accepts metadata", "Events are
/// ordered from newest to oldest"): a kind that may be a channel's (7) beside a public
/// one, ids among which some are replaced or unknown. The public events come, newest
/// first and within the limit, then `CLOSED auth-required:`; after AUTH the same REQ
/// adds the channel's events and ends with EOSE.
async fn public_events_come_first_then_auth_required(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let t = now();
    let dated = |kind: u32, tags: Vec<Vec<String>>, content: &str, at: i64| {
        alice.sign(kind, tags, content, at)
    };
    let notes = [
        dated(1, vec![tag(&["t", "a"])], "first", t - 40),
        dated(1, vec![tag(&["t", "b"])], "second", t - 45),
        dated(1, vec![tag(&["t", "a"])], "third", t - 50),
        dated(1, vec![tag(&["t", "b"])], "fourth", t - 55),
    ];
    let older_profile = dated(0, vec![], "older", t - 60);
    let newer_profile = dated(0, vec![], "newer", t - 1);
    for event in notes.iter().chain([&older_profile, &newer_profile]) {
        assert_eq!(writer.publish(event).await, (true, String::new()));
    }
    let ch = create_channel(&mut writer, &alice, false).await;
    // A channel reaction newer than every note: channel data, for members only.
    let message = publish_kind(&mut writer, &alice, 9, vec![tag(&["h", &ch])]).await;
    let reaction_tags = vec![tag(&["h", &ch]), tag(&["e", &message.id]), tag(&["t", "a"])];
    let reaction = dated(7, reaction_tags, "+", t - 30);
    assert_eq!(writer.publish(&reaction).await, (true, String::new()));

    let mut anon = relay.ws().await;
    let limited = json!({
        "authors": [alice.pubkey()], "kinds": [1, 7], "#t": ["a", "b"], "limit": 2
    });
    let (events, _) = closed_after(&mut anon, &limited).await;
    assert_eq!(
        events,
        vec![notes[0].clone(), notes[1].clone()],
        "newest notes"
    );

    // Ids: a replaced profile and an unknown id beside stored public events.
    let missing = "cd".repeat(32);
    let ids = json!({"ids": [older_profile.id, newer_profile.id, notes[2].id, missing]});
    let (events, by_ids) = closed_after(&mut anon, &ids).await;
    assert_eq!(
        events,
        vec![newer_profile.clone(), notes[2].clone()],
        "newest first"
    );
    // A channel event's id among them reads exactly like the unknown one.
    let with_reaction = json!({"ids": [newer_profile.id, notes[2].id, reaction.id]});
    let (events, text) = closed_after(&mut anon, &with_reaction).await;
    assert_eq!(events, vec![newer_profile.clone(), notes[2].clone()]);
    assert_eq!(text, by_ids);

    // After AUTH the same REQs are whole and end with EOSE.
    assert_eq!(anon.auth(&Keys::generate()).await, (true, String::new()));
    let got = anon
        .req(&fresh_sub(), vec![limited])
        .await
        .expect("after AUTH");
    assert_eq!(got, vec![reaction.clone(), notes[0].clone()]);
    let got = anon
        .req(&fresh_sub(), vec![with_reaction])
        .await
        .expect("ids after AUTH");
    assert_eq!(got, vec![newer_profile, reaction, notes[2].clone()]);
    relay.stop().await;
}

/// NIP-01: CLOSED ends a subscription. An anonymous answer that ends with
/// `auth-required:` keeps nothing live: a later public event reaches the subscription
/// that ended with EOSE and never the one that ended with CLOSED.
async fn an_auth_required_answer_is_not_live(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let mut anon = relay.ws().await;
    let (events, _) = closed_after(&mut anon, &json!({"kinds": [1, 9]})).await;
    assert!(events.is_empty(), "{events:?}");
    anon.req("mixed", vec![json!({"kinds": [1, 9]})])
        .await
        .expect_err("ends with CLOSED");
    anon.req("public", vec![json!({"kinds": [1]})])
        .await
        .expect("public kinds end with EOSE");
    let note = publish_kind(&mut writer, &alice, 1, vec![]).await;
    // Everything the relay sends this connection arrives in order: read up to the EOSE
    // of a later REQ, so a live copy for "mixed" would have come by then.
    let live = anon
        .recv_where(|v| v[0] == "EVENT" && v[1] == "public")
        .await
        .expect("live note on the EOSE subscription");
    assert_eq!(live[2], json!(note));
    anon.send(&json!(["REQ", "marker", {"ids": [note.id], "kinds": [1]}]))
        .await
        .expect("REQ");
    loop {
        let v = anon.recv().await.expect("marker answer");
        assert_ne!(v[1], "mixed", "a CLOSED subscription stayed live: {v}");
        if v[0] == "EOSE" && v[1] == "marker" {
            break;
        }
    }
    relay.stop().await;
}
