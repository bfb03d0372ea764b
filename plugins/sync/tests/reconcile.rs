//! NIP-77 over the wire: a client that holds part of a channel learns exactly what it
//! lacks and what the relay lacks; the record set is what REQ would serve (deleted,
//! removed and expired events left out); NIP-11 lists 77. Both backends.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend};
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;
use std::collections::HashSet;

both_backends!(
    a_client_learns_exactly_what_it_lacks_and_what_the_relay_lacks,
    the_set_is_what_req_serves,
    an_empty_client_learns_everything_over_several_frames,
    nip11_lists_77_while_enabled,
);

async fn a_client_learns_exactly_what_it_lacks_and_what_the_relay_lacks(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let channel = create_channel(&mut ws, &alice, false).await;
    let stored = post(&mut ws, &alice, &channel, 1_000).await;
    // Signed for the channel but never sent: the relay lacks these.
    let t = now();
    let unsent: Vec<_> = (0..20)
        .map(|i| {
            alice.sign(
                9,
                vec![tag(&["h", &channel])],
                &format!("offline {i}"),
                t - i,
            )
        })
        .collect();
    let mut held: Vec<(u64, String)> = stored[..300].iter().map(record).collect();
    held.extend(unsent.iter().map(record));

    let filter = json!({"kinds": [9], "#h": [channel]});
    let got = reconcile(&mut ws, "s1", filter, &held)
        .await
        .expect("reconciled");
    let lacking: HashSet<String> = stored[300..].iter().map(|e| e.id.clone()).collect();
    let relay_lacks: HashSet<String> = unsent.iter().map(|e| e.id.clone()).collect();
    assert_eq!(got.need.len(), 700);
    assert_eq!(
        got.need, lacking,
        "the client learns exactly the 700 it lacks"
    );
    assert_eq!(got.have, relay_lacks, "and exactly the 20 the relay lacks");

    // The client fetches what it learned and uploads what the relay lacks, over the same
    // connection; a second reconciliation then finds nothing to do.
    let ids: Vec<String> = lacking.iter().cloned().collect();
    let mut fetched = 0;
    for (i, chunk) in ids.chunks(500).enumerate() {
        let events = ws
            .req(&format!("get{i}"), vec![json!({"ids": chunk})])
            .await
            .expect("REQ");
        fetched += events.len();
    }
    assert_eq!(fetched, 700);
    for event in &unsent {
        assert!(ws.publish(event).await.0);
    }
    let all: Vec<(u64, String)> = stored.iter().chain(&unsent).map(record).collect();
    let again = reconcile(&mut ws, "s2", json!({"kinds": [9], "#h": [channel]}), &all)
        .await
        .expect("reconciled");
    assert!(again.need.is_empty() && again.have.is_empty(), "{again:?}");
    assert_eq!(again.rounds, 1, "equal sets agree in one round trip");
    relay.stop().await;
}

async fn the_set_is_what_req_serves(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let channel = create_channel(&mut ws, &alice, false).await;
    let kept = post(&mut ws, &alice, &channel, 5).await;
    let h = || vec![tag(&["h", &channel])];
    // Deleted by its author (NIP-09).
    let deleted = publish_kind(&mut ws, &alice, 9, h()).await;
    publish_kind(&mut ws, &alice, 5, vec![tag(&["e", &deleted.id])]).await;
    // Removed by a moderator (the channel's creator owns it).
    let removed = publish_kind(&mut ws, &alice, 9, h()).await;
    publish_kind(
        &mut ws,
        &alice,
        9005,
        vec![tag(&["h", &channel]), tag(&["e", &removed.id])],
    )
    .await;
    // Expires (NIP-40) two seconds from now.
    let soon = (now() + 2).to_string();
    let expiring = publish_kind(
        &mut ws,
        &alice,
        9,
        vec![tag(&["h", &channel]), tag(&["expiration", &soon])],
    )
    .await;
    let filter = json!({"kinds": [9], "#h": [channel]});
    let before = reconcile(&mut ws, "s1", filter.clone(), &[])
        .await
        .expect("reconciled");
    let mut expected: HashSet<String> = kept.iter().map(|e| e.id.clone()).collect();
    expected.insert(expiring.id.clone());
    assert_eq!(
        before.need, expected,
        "deleted and removed events are not offered"
    );
    let served: HashSet<String> = ws
        .req("r1", vec![filter.clone()])
        .await
        .expect("REQ")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(before.need, served, "the same set REQ serves");

    tokio::time::sleep(std::time::Duration::from_millis(3_100)).await;
    let after = reconcile(&mut ws, "s2", filter.clone(), &[])
        .await
        .expect("reconciled");
    expected.remove(&expiring.id);
    assert_eq!(after.need, expected, "an expired event is not offered");

    // A client that still holds the deleted event learns the relay lacks it.
    let held = vec![record(&deleted)];
    let got = reconcile(&mut ws, "s3", filter.clone(), &held)
        .await
        .expect("reconciled");
    assert_eq!(got.have, HashSet::from([deleted.id.clone()]));

    // The filter's other fields narrow the set as they narrow REQ.
    let two = json!({"kinds": [9], "#h": [channel], "limit": 2});
    let limited = reconcile(&mut ws, "s4", two.clone(), &[])
        .await
        .expect("reconciled");
    let served: HashSet<String> = ws
        .req("r2", vec![two])
        .await
        .expect("REQ")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(limited.need, served);
    assert_eq!(limited.need.len(), 2);
    let ids = json!({"ids": [kept[0].id, kept[1].id, deleted.id]});
    let by_id = reconcile(&mut ws, "s5", ids, &[])
        .await
        .expect("reconciled");
    assert_eq!(
        by_id.need,
        HashSet::from([kept[0].id.clone(), kept[1].id.clone()])
    );
    relay.stop().await;
}

async fn an_empty_client_learns_everything_over_several_frames(backend: TestBackend, name: &str) {
    // The smallest frame: 300 ids (9.6 kB) cannot go in one answer.
    let Some(relay) = relay(backend, name, |s| set(s, "frame_size_limit", json!(4096))).await
    else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let channel = create_channel(&mut ws, &alice, false).await;
    let stored = post(&mut ws, &alice, &channel, 300).await;
    let got = reconcile(&mut ws, "s1", json!({"#h": [channel], "kinds": [9]}), &[])
        .await
        .expect("reconciled");
    let all: HashSet<String> = stored.iter().map(|e| e.id.clone()).collect();
    assert_eq!(got.need, all);
    assert!(got.rounds > 1, "{} rounds", got.rounds);
    for answer in &got.answers {
        assert!(
            answer.len() <= 2 * 4096,
            "a frame of {} hex chars",
            answer.len()
        );
    }
    relay.stop().await;
}

async fn nip11_lists_77_while_enabled(backend: TestBackend, name: &str) {
    for enabled in [true, false] {
        let Some(relay) = relay(backend, name, |s| set_enabled(s, buzz_sync::NAME, enabled)).await
        else {
            return;
        };
        let (_, doc) = relay
            .http()
            .get("/", &[("accept", "application/nostr+json")])
            .await;
        let nips = doc["supported_nips"].clone();
        let listed = nips
            .as_array()
            .is_some_and(|list| list.iter().any(|n| n == 77));
        assert_eq!(listed, enabled, "{nips}");
        relay.stop().await;
    }
}
