//! A reader reconciles only what it may read: a private channel's ids never reach a
//! non-member (reconciling it is byte for byte reconciling an empty channel), and channel
//! data before AUTH is `NEG-ERR "auth-required: ..."` — the same text for a private
//! channel and a random id. Both backends.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::TestBackend;
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;
use std::collections::HashSet;

both_backends!(
    a_private_channel_reconciles_like_an_empty_one_for_a_non_member,
    channel_data_before_auth_is_auth_required,
);

fn ids(events: &[buzz_nostr::event::Event]) -> HashSet<String> {
    events.iter().map(|e| e.id.clone()).collect()
}

async fn a_private_channel_reconciles_like_an_empty_one_for_a_non_member(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let bob = Keys::generate();
    let mut a = authed(&relay, &alice).await;
    let private = create_channel(&mut a, &alice, true).await;
    let secret = post(&mut a, &alice, &private, 50).await;
    let open = create_channel(&mut a, &alice, false).await;
    let public = post(&mut a, &alice, &open, 10).await;

    // The member sees the private channel.
    let member = reconcile(&mut a, "m", json!({"kinds": [9], "#h": [private]}), &[])
        .await
        .expect("reconciled");
    assert_eq!(member.need, ids(&secret));

    let mut b = authed(&relay, &bob).await;
    let random = uuid::Uuid::new_v4().to_string();
    // Holding nothing: the private channel's answer is the empty channel's, exactly.
    let hidden = reconcile(&mut b, "p", json!({"kinds": [9], "#h": [private]}), &[])
        .await
        .expect("reconciled");
    let empty = reconcile(&mut b, "r", json!({"kinds": [9], "#h": [random]}), &[])
        .await
        .expect("reconciled");
    assert!(hidden.need.is_empty(), "{:?}", hidden.need);
    assert_eq!(
        hidden.answers, empty.answers,
        "the same bytes as an empty channel"
    );

    // Holding some of its ids (learned elsewhere) tells bob nothing either: the relay
    // "lacks" them, as it would for a channel that does not exist.
    let leaked: Vec<(u64, String)> = secret[..5].iter().map(record).collect();
    let hidden = reconcile(
        &mut b,
        "p2",
        json!({"kinds": [9], "#h": [private]}),
        &leaked,
    )
    .await
    .expect("reconciled");
    let empty = reconcile(&mut b, "r2", json!({"kinds": [9], "#h": [random]}), &leaked)
        .await
        .expect("reconciled");
    assert_eq!(hidden.have, ids(&secret[..5]));
    assert!(hidden.need.is_empty());
    assert_eq!(hidden.answers, empty.answers);

    // Community-wide: only the channels bob reads.
    let wide = reconcile(&mut b, "w", json!({"kinds": [9]}), &[])
        .await
        .expect("reconciled");
    assert_eq!(wide.need, ids(&public));
    // Both channels named: only the readable one's records.
    let both = reconcile(
        &mut b,
        "both",
        json!({"#h": [private, open], "kinds": [9]}),
        &[],
    )
    .await
    .expect("reconciled");
    assert_eq!(both.need, ids(&public));
    relay.stop().await;
}

async fn channel_data_before_auth_is_auth_required(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let mut a = authed(&relay, &alice).await;
    let private = create_channel(&mut a, &alice, true).await;
    post(&mut a, &alice, &private, 3).await;
    let note = publish_kind(&mut a, &alice, 1, vec![]).await;

    let mut anon = relay.ws().await;
    let random = uuid::Uuid::new_v4().to_string();
    let mut reasons = Vec::new();
    for (sub, filter) in [
        ("a1", json!({"#h": [private]})),
        ("a2", json!({"#h": [random]})),
        ("a3", json!({"kinds": [9]})),
        ("a4", json!({"kinds": [39000]})),
    ] {
        let reason = reconcile(&mut anon, sub, filter.clone(), &[])
            .await
            .expect_err("refused before AUTH");
        assert!(reason.starts_with("auth-required: "), "{filter}: {reason}");
        reasons.push(reason);
    }
    assert_eq!(
        reasons[0], reasons[1],
        "a private channel and a random id read alike"
    );
    // Community-wide data is served before AUTH, as REQ serves it.
    let notes = reconcile(&mut anon, "n", json!({"kinds": [1]}), &[])
        .await
        .expect("community-wide records");
    assert_eq!(notes.need, HashSet::from([note.id.clone()]));
    // After AUTH the same connection reconciles the channel (the creator is a member).
    assert_eq!(anon.auth(&alice).await, (true, String::new()));
    let got = reconcile(&mut anon, "a1", json!({"#h": [private], "kinds": [9]}), &[])
        .await
        .expect("reconciled after AUTH");
    assert_eq!(got.need.len(), 3);
    relay.stop().await;
}
