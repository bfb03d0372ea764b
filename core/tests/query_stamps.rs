//! `store::query_stamps` — the (created_at, id) pairs of a filter's matches, for set
//! reconciliation — reads exactly the rows `query_keys` (REQ) reads: the same scope
//! (channels, community-wide rows, a large channel set), deletion and NIP-40 expiry, and
//! `limit`, newest first. Both backends.

use buzz_core::both_backends;
use buzz_core::store::{query_keys, query_stamps, ChannelScope, ChannelSet, Scope};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(stamps_are_the_rows_req_reads,);

async fn ok(ws: &mut WsClient, keys: &Keys, kind: u32, tags: Vec<Vec<String>>, at: i64) -> Event {
    let event = keys.sign(kind, tags, &uuid::Uuid::new_v4().to_string(), at);
    let (accepted, message) = ws.publish(&event).await;
    assert!(accepted, "kind {kind} refused: {message}");
    event
}

async fn channel(ws: &mut WsClient, keys: &Keys) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    ok(
        ws,
        keys,
        9007,
        vec![tag(&["h", &id]), tag(&["name", "c"])],
        now(),
    )
    .await;
    id
}

async fn stamps_are_the_rows_req_reads(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&alice).await.0);
    let (a, b) = (
        channel(&mut ws, &alice).await,
        channel(&mut ws, &alice).await,
    );
    let t = now();
    let mut in_a = Vec::new();
    for i in 0..6 {
        // Two share a second: the id breaks the tie.
        in_a.push(ok(&mut ws, &alice, 9, vec![tag(&["h", &a])], t - i / 2).await);
    }
    ok(&mut ws, &alice, 9, vec![tag(&["h", &b])], t).await;
    let note = ok(&mut ws, &alice, 1, vec![tag(&["t", "x"])], t - 3).await;
    let deleted = ok(&mut ws, &alice, 9, vec![tag(&["h", &a])], t).await;
    ok(&mut ws, &alice, 5, vec![tag(&["e", &deleted.id])], t).await;
    let soon = (t + 2).to_string();
    let expiring = ok(
        &mut ws,
        &alice,
        9,
        vec![tag(&["h", &a]), tag(&["expiration", &soon])],
        t,
    )
    .await;

    let services = &relay.running().services;
    let community_id = services.communities[0].id;
    let scope = |channels: ChannelScope, community_wide: bool| Scope {
        community_id,
        community_wide,
        channels,
        expiry: Default::default(),
    };
    // More channels than SQLite binds inline: the readable function decides.
    let mut large: ChannelSet = (0..300).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    large.insert(a.clone());
    let only_a: ChannelSet = [a.clone()].into_iter().collect();
    let scopes = [
        scope(ChannelScope::All, true),
        scope(ChannelScope::None, true),
        scope(ChannelScope::None, false),
        scope(ChannelScope::Only(only_a), true),
        scope(ChannelScope::Only(large), false),
    ];
    let filters = [
        json!({}),
        json!({"kinds": [9]}),
        json!({"#h": [a]}),
        json!({"#h": [a, b], "limit": 3}),
        json!({"#t": ["x"]}),
        json!({"authors": [alice.pubkey()], "since": t - 1}),
        json!({"ids": [in_a[0].id, deleted.id, note.id]}),
        json!({"kinds": [9], "limit": 0}),
    ];
    let compare = |at: i64| {
        let mut cases = Vec::new();
        for scope in &scopes {
            for filter in &filters {
                cases.push((scope.clone(), Filter::parse(filter).expect("filter"), at));
            }
        }
        cases
    };
    for at in [t, t + 3] {
        let cases = compare(at);
        let store = services.store.clone();
        let results = store
            .read(move |mut conn| {
                let mut out = Vec::new();
                for (scope, filter, at) in &cases {
                    let limit = filter.limit.unwrap_or(10_000);
                    let keys: Vec<(i64, String)> =
                        query_keys(&mut conn, scope, filter, limit, *at)?
                            .into_iter()
                            .map(|(key, id)| (key.created_at, id))
                            .collect();
                    let stamps =
                        conn.repeatable_read(|c| query_stamps(c, scope, filter, limit, *at))?;
                    out.push((format!("{:?} {filter:?}", scope.channels), keys, stamps));
                }
                Ok(out)
            })
            .await
            .expect("reads");
        for (case, keys, stamps) in results {
            assert_eq!(stamps, keys, "{case} at {at}");
            assert!(!stamps.iter().any(|(_, id)| *id == deleted.id), "{case}");
            if at > t + 2 {
                assert!(!stamps.iter().any(|(_, id)| *id == expiring.id), "{case}");
            }
        }
    }
    // Not vacuous: the whole-community read sees every live event of the test.
    let all = Filter::parse(&json!({"kinds": [9]})).expect("filter");
    let whole = scope(ChannelScope::All, true);
    let stamps = services
        .store
        .read(move |mut conn| query_stamps(&mut conn, &whole, &all, 100, t))
        .await
        .expect("read");
    assert_eq!(stamps.len(), in_a.len() + 2, "{stamps:?}");
    let newest_first =
        |w: &[(i64, String)]| w[0].0 > w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1);
    assert!(stamps.windows(2).all(newest_first), "{stamps:?}");
    relay.stop().await;
}
