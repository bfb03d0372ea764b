//! Filters by a tag other than `#h` (`#t`, `#p`, `#e`, …), read by walking the tag index
//! newest first and stopping at the limit (`store/query/tag_walk.rs`): the hard cases
//! of that walk over the real wire, on SQLite and PostgreSQL — an event whose tags match
//! twice is answered once, same-second bursts come in `id` order and limits cut exactly,
//! the filter's other fields and tags are checked on every event the walk reaches, and
//! the reader's scope still holds (a private channel's tagged messages stay private).

use buzz_core::both_backends;
use buzz_core::testkit::{
    authed, create_channel, fresh_sub, now, publish_ok as publish, tag, TestBackend, TestRelay,
    WsClient,
};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

both_backends!(
    an_event_whose_tags_match_twice_is_answered_once,
    a_same_second_burst_comes_in_id_order_and_limits_cut_exactly,
    the_other_fields_and_tags_are_checked_on_every_event,
    a_private_channels_tagged_messages_stay_private,
);

fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

/// Every event the REQ answers (an anonymous one may end with `CLOSED auth-required:`).
async fn answer(ws: &mut WsClient, filter: Value) -> Vec<Event> {
    ws.req_answer(&fresh_sub(), vec![filter.clone()])
        .await
        .unwrap_or_else(|e| panic!("{filter}: {e}"))
        .events
}

async fn an_event_whose_tags_match_twice_is_answered_once(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = authed(&relay, &keys).await;
    let at = now();
    let twice = keys.sign(1, vec![tag(&["t", "x"]), tag(&["t", "x"])], "twice", at - 3);
    let both = keys.sign(1, vec![tag(&["t", "y"]), tag(&["t", "x"])], "both", at - 2);
    let only_y = keys.sign(1, vec![tag(&["t", "y"])], "y", at - 1);
    let other = keys.sign(1, vec![tag(&["t", "z"])], "z", at);
    for event in [&twice, &both, &only_y, &other] {
        publish(&mut ws, event.clone()).await;
    }

    let got = ws.req("x", vec![json!({"#t": ["x"]})]).await.expect("REQ");
    assert_eq!(ids(&got), ids(&[both.clone(), twice.clone()]));
    let got = ws
        .req("xy", vec![json!({"#t": ["x", "y"]})])
        .await
        .expect("REQ");
    assert_eq!(ids(&got), ids(&[only_y, both, twice]));
    // The limit counts events, not tag rows.
    let got = ws
        .req("x1", vec![json!({"#t": ["x", "y"], "limit": 2})])
        .await
        .expect("REQ");
    assert_eq!(got.len(), 2);
    let count = ws
        .count("c", vec![json!({"#t": ["x", "y"]})])
        .await
        .expect("COUNT");
    assert_eq!(count["count"], json!(3), "{count}");
    relay.stop().await;
}

async fn a_same_second_burst_comes_in_id_order_and_limits_cut_exactly(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = authed(&relay, &keys).await;
    let at = now();
    let mut burst = Vec::new();
    for i in 0..12 {
        let e = keys.sign(
            1,
            vec![tag(&["t", "burst"])],
            &format!("same second {i}"),
            at,
        );
        burst.push(publish(&mut ws, e).await);
    }
    let mut older = Vec::new();
    for i in 0..5 {
        let e = keys.sign(
            1,
            vec![tag(&["t", "burst"])],
            &format!("older {i}"),
            at - 10 - i,
        );
        older.push(publish(&mut ws, e).await);
    }
    // Noise under other values, interleaved in time.
    for i in 0..20 {
        let e = keys.sign(1, vec![tag(&["t", "noise"])], &format!("noise {i}"), at - i);
        publish(&mut ws, e).await;
    }
    burst.sort_by(|a, b| a.id.cmp(&b.id));
    let mut all = burst.clone();
    all.extend(older);

    for limit in [1usize, 6, 12, 13, 17, 100] {
        let got = ws
            .req("b", vec![json!({"#t": ["burst"], "limit": limit})])
            .await
            .expect("REQ");
        let want = &all[..limit.min(all.len())];
        assert_eq!(ids(&got), ids(want), "limit {limit}");
    }
    // Paging by `until` from a page's last event, as clients do, reaches every event once.
    let page = ws
        .req("p", vec![json!({"#t": ["burst"], "until": at - 1})])
        .await
        .expect("REQ");
    assert_eq!(ids(&page), ids(&all[12..]));
    relay.stop().await;
}

async fn the_other_fields_and_tags_are_checked_on_every_event(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let bob = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let at = now();
    let to_bob = publish(
        &mut ws,
        alice.sign(
            1,
            vec![tag(&["t", "x"]), tag(&["p", bob.pubkey()])],
            "to bob",
            at - 4,
        ),
    )
    .await;
    let plain = publish(
        &mut ws,
        alice.sign(1, vec![tag(&["t", "x"])], "plain", at - 3),
    )
    .await;
    let long_form = publish(
        &mut ws,
        alice.sign(
            30_023,
            vec![tag(&["t", "x"]), tag(&["d", "a"])],
            "article",
            at - 2,
        ),
    )
    .await;
    let mut bobs = authed(&relay, &bob).await;
    let by_bob = publish(
        &mut bobs,
        bob.sign(1, vec![tag(&["t", "x"])], "bob's", at - 1),
    )
    .await;

    let cases = [
        (json!({"#t": ["x"], "#p": [bob.pubkey()]}), vec![&to_bob]),
        (
            json!({"#t": ["x"], "kinds": [1]}),
            vec![&by_bob, &plain, &to_bob],
        ),
        (json!({"#t": ["x"], "kinds": [30023]}), vec![&long_form]),
        (
            json!({"#t": ["x"], "authors": [bob.pubkey()]}),
            vec![&by_bob],
        ),
        (
            json!({"#t": ["x"], "since": at - 3, "until": at - 2}),
            vec![&long_form, &plain],
        ),
        (json!({"#t": ["x"], "#d": ["a"]}), vec![&long_form]),
        (json!({"#t": ["x"], "#p": ["0".repeat(64)]}), vec![]),
    ];
    for (filter, want) in cases {
        let got = ws.req("c", vec![filter.clone()]).await.expect("REQ");
        let want: Vec<Event> = want.into_iter().cloned().collect();
        assert_eq!(ids(&got), ids(&want), "{filter}");
    }
    relay.stop().await;
}

async fn a_private_channels_tagged_messages_stay_private(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let channel = create_channel(&mut ws, &alice, true).await;
    let note = publish(
        &mut ws,
        alice.sign(1, vec![tag(&["t", "plans"])], "public", now() - 1),
    )
    .await;
    let secret = publish(
        &mut ws,
        alice.sign(
            9,
            vec![tag(&["h", &channel]), tag(&["t", "plans"])],
            "secret",
            now(),
        ),
    )
    .await;

    let mut anonymous = relay.ws().await;
    let got = answer(&mut anonymous, json!({"#t": ["plans"]})).await;
    assert_eq!(ids(&got), ids(std::slice::from_ref(&note)), "anonymous");

    let mallory = Keys::generate();
    let mut outsider = authed(&relay, &mallory).await;
    let got = answer(&mut outsider, json!({"#t": ["plans"], "limit": 1})).await;
    assert_eq!(ids(&got), ids(std::slice::from_ref(&note)), "non-member");

    let got = answer(&mut ws, json!({"#t": ["plans"]})).await;
    assert_eq!(ids(&got), ids(&[secret, note]), "member");
    relay.stop().await;
}
