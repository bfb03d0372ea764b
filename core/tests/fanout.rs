//! Live fan-out through the subscription index (issue 10, item 2) delivers exactly the
//! events each subscription's filters match — by ids, authors, kinds, #tags, since/until
//! and filters with no indexed field — and nothing after CLOSE or replacement.

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

both_backends!(fanout_delivers_exactly_the_matching_events);

async fn fanout_delivers_exactly_the_matching_events(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let (alice, bob, carol) = (Keys::generate(), Keys::generate(), Keys::generate());
    let t = now();
    // The events to publish, signed up front so ids can be subscribed to.
    let events: Vec<Event> = vec![
        alice.sign(1, vec![tag(&["t", "rust"])], "a1", t - 100),
        alice.sign(3_333, vec![tag(&["t", "go"]), vec![]], "a7", t - 50),
        bob.sign(
            1,
            vec![tag(&["t", "rust", "x"]), tag(&["p", alice.pubkey()])],
            "b1",
            t,
        ),
        bob.sign(
            30_023,
            vec![tag(&["d", "doc"]), tag(&["t", "zig"])],
            "b30023",
            t - 10,
        ),
        carol.sign(1, vec![tag(&["e", &"e".repeat(64)])], "c1", t - 200),
        carol.sign(4_444, vec![tag(&["t", "x"])], "c4", t + 5),
    ];
    let many_ids: Vec<String> = (0..998)
        .map(|i| format!("{i:064x}"))
        .chain([events[1].id.clone(), events[4].id.clone()])
        .collect();
    let subs: Vec<(&str, Vec<Value>)> = vec![
        ("ids", vec![json!({"ids": many_ids})]),
        (
            "authors",
            vec![json!({"authors": [alice.pubkey(), carol.pubkey()]})],
        ),
        ("kinds", vec![json!({"kinds": [3333, 4444]})]),
        ("tag-t", vec![json!({"#t": ["rust", "zig"]})]),
        (
            "tag-and-kind",
            vec![json!({"#t": ["rust"], "kinds": [1], "authors": [bob.pubkey()]})],
        ),
        ("tag-p", vec![json!({"#p": [alice.pubkey()]})]),
        ("since", vec![json!({"since": t - 60})]),
        ("until", vec![json!({"until": t - 60})]),
        (
            "window",
            vec![json!({"kinds": [1], "since": t - 150, "until": t - 1})],
        ),
        (
            "two-filters",
            vec![json!({"#e": ["e".repeat(64)]}), json!({"kinds": [30023]})],
        ),
        ("second-value", vec![json!({"#t": ["x"]})]),
        ("nothing", vec![json!({"kinds": []})]),
        ("closed", vec![json!({})]),
        ("replaced", vec![json!({"kinds": [1]})]),
        ("all", vec![json!({})]),
    ];
    let mut ws = relay.ws().await;
    // Authenticated: an ids filter naming ids that are stored nowhere is refused
    // `auth-required:` before AUTH (it could name channel events).
    assert_eq!(ws.auth(&Keys::generate()).await, (true, String::new()));
    for (id, filters) in &subs {
        // limit 0: only live events matter here.
        let filters = filters
            .iter()
            .map(|f| {
                let mut f = f.clone();
                f["limit"] = json!(0);
                f
            })
            .collect();
        ws.req(id, filters).await.expect("subscribed");
    }
    ws.send(&json!(["CLOSE", "closed"])).await.expect("CLOSE");
    ws.req("replaced", vec![json!({"kinds": [4444], "limit": 0})])
        .await
        .expect("replaced");

    let mut publisher = relay.ws().await;
    for event in &events {
        assert_eq!(
            publisher.publish(event).await,
            (true, String::new()),
            "{}",
            event.content
        );
    }
    // A last event every open "all" subscription takes: once it arrives, everything
    // published before it has been delivered (one connection, in order).
    let marker = alice.sign(5_555, vec![], "marker", t);
    assert!(publisher.publish(&marker).await.0);

    let mut got: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    loop {
        let v = ws
            .recv_where(|v| v[0] == "EVENT")
            .await
            .expect("live events arrive");
        let (sub, id) = (
            v[1].as_str().unwrap_or("").to_owned(),
            v[2]["id"].as_str().unwrap_or("").to_owned(),
        );
        if id == marker.id && sub == "all" {
            break;
        }
        got.entry(sub).or_default().insert(id);
    }
    got.values_mut().for_each(|ids| {
        ids.remove(&marker.id);
    });
    got.retain(|_, ids| !ids.is_empty());

    // Expected, by plain NIP-01 matching of each open subscription's filters.
    let open: Vec<(&str, Vec<Value>)> = subs
        .into_iter()
        .filter(|(id, _)| *id != "closed")
        .map(|(id, f)| match id {
            "replaced" => (id, vec![json!({"kinds": [4444]})]),
            _ => (id, f),
        })
        .collect();
    let mut expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (id, filters) in &open {
        let filters: Vec<Filter> = filters
            .iter()
            .map(|f| Filter::parse(f).expect("filter"))
            .collect();
        for event in &events {
            if filters.iter().any(|f| f.matches(event)) {
                expected
                    .entry(id.to_string())
                    .or_default()
                    .insert(event.id.clone());
            }
        }
    }
    assert_eq!(got, expected);
    // Spot checks that the reference itself is what NIP-01 says.
    assert_eq!(expected["ids"].len(), 2);
    assert_eq!(
        expected["second-value"].len(),
        1,
        "only first tag values count"
    );
    assert!(!expected.contains_key("nothing"));
    relay.stop().await;
}
