//! Record sets kept between opens (`set_cache.rs`) are reused only while they are still
//! the set: every open below comes right after another of the same filter and scope,
//! so it would be answered from the kept set if anything let a stale one through — a
//! write acknowledged a moment before (same connection, another connection, another
//! process on PostgreSQL), a deletion, a replaced event, a member's removal. Both
//! backends; the two-process case needs PostgreSQL + Redis.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{
    now, pg_admin_url, publish_ok, redis_url, tag, PgDatabase, TestBackend, TestRelay,
};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;
use std::collections::HashSet;

both_backends!(
    every_acknowledged_write_is_in_the_next_open,
    a_removed_member_loses_the_channel_at_the_next_open,
    messages_appended_since_a_kept_set_keep_the_reader_s_scope,
);

fn ids<'a>(events: impl IntoIterator<Item = &'a Event>) -> HashSet<String> {
    events.into_iter().map(|e| e.id.clone()).collect()
}

async fn every_acknowledged_write_is_in_the_next_open(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    // Anonymous: the community-wide set, what `NEG-OPEN {}` before AUTH covers.
    let mut reader = relay.ws().await;
    let notes = |n: usize| (0..n).map(|i| alice.sign(1, vec![], &format!("note {i}"), now()));
    let mut expected = HashSet::new();
    for note in notes(5) {
        expected.insert(publish_ok(&mut writer, note).await.id);
    }
    let filter = json!({});
    for round in 0..2 {
        let got = reconcile(&mut reader, &format!("a{round}"), filter.clone(), &[])
            .await
            .expect("reconciled");
        assert_eq!(got.need, expected, "open {round} of an unchanged set");
    }

    // A note, acknowledged: the very next open has it (same second as the last open).
    let fresh = publish_ok(&mut writer, alice.sign(1, vec![], "fresh", now())).await;
    expected.insert(fresh.id.clone());
    let got = reconcile(&mut reader, "b", filter.clone(), &[])
        .await
        .expect("reconciled");
    assert_eq!(
        got.need, expected,
        "an acknowledged note is in the next open"
    );

    // Deleted by its author (NIP-09): gone from the next open.
    publish_kind(&mut writer, &alice, 5, vec![tag(&["e", &fresh.id])]).await;
    expected.remove(&fresh.id);
    let got = reconcile(&mut reader, "c", filter.clone(), &[])
        .await
        .expect("reconciled");
    // The deletion request is itself a community-wide event.
    let deletions: HashSet<String> = got.need.difference(&expected).cloned().collect();
    assert_eq!(
        deletions.len(),
        1,
        "only the kind-5 request is new: {deletions:?}"
    );
    assert!(
        !got.need.contains(&fresh.id),
        "a deleted note is not offered"
    );
    expected.extend(deletions);

    // A replaceable profile: the replaced version leaves, the new one comes.
    let t = now();
    let first = publish_ok(
        &mut writer,
        alice.sign(0, vec![], "{\"name\":\"a\"}", t - 1),
    )
    .await;
    expected.insert(first.id.clone());
    let got = reconcile(&mut reader, "d", filter.clone(), &[])
        .await
        .expect("reconciled");
    assert_eq!(got.need, expected);
    let second = publish_ok(&mut writer, alice.sign(0, vec![], "{\"name\":\"b\"}", t)).await;
    expected.remove(&first.id);
    expected.insert(second.id.clone());
    let got = reconcile(&mut reader, "e", filter.clone(), &[])
        .await
        .expect("reconciled");
    assert_eq!(got.need, expected, "the replaced profile is not offered");

    // Same filter and scope from another connection: the same set.
    let mut other = relay.ws().await;
    let got = reconcile(&mut other, "f", filter, &[])
        .await
        .expect("reconciled");
    assert_eq!(got.need, expected);
    relay.stop().await;
}

async fn a_removed_member_loses_the_channel_at_the_next_open(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let alice = Keys::generate();
    let bob = Keys::generate();
    let mut a = authed(&relay, &alice).await;
    let private = create_channel(&mut a, &alice, true).await;
    publish_kind(
        &mut a,
        &alice,
        9000,
        vec![tag(&["h", &private]), tag(&["p", bob.pubkey()])],
    )
    .await;
    let secret = post(&mut a, &alice, &private, 20).await;
    let mut b = authed(&relay, &bob).await;
    let filter = json!({"kinds": [9], "#h": [private]});
    for round in 0..2 {
        let got = reconcile(&mut b, &format!("m{round}"), filter.clone(), &[])
            .await
            .expect("reconciled");
        assert_eq!(got.need, ids(&secret), "a member's open {round}");
    }
    publish_kind(
        &mut a,
        &alice,
        9001,
        vec![tag(&["h", &private]), tag(&["p", bob.pubkey()])],
    )
    .await;
    let got = reconcile(&mut b, "gone", filter, &[])
        .await
        .expect("reconciled");
    assert!(
        got.need.is_empty(),
        "removed, bob reads the channel as an empty one: {} records",
        got.need.len()
    );
    relay.stop().await;
}

/// On SQLite a kept set made stale by appends alone is brought up to date with the rows
/// appended since (`records.rs`): those rows must be read under the reader's scope and
/// filter like the set itself — a message in a channel the reader cannot read, or of
/// another kind, stays out.
async fn messages_appended_since_a_kept_set_keep_the_reader_s_scope(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = relay(backend, name, |_| {}).await else {
        return;
    };
    let (alice, bob) = (Keys::generate(), Keys::generate());
    let mut a = authed(&relay, &alice).await;
    let open = create_channel(&mut a, &alice, false).await;
    let private = create_channel(&mut a, &alice, true).await;
    let mut expected = ids(&post(&mut a, &alice, &open, 3).await);
    let mut b = authed(&relay, &bob).await;
    let filter = json!({"kinds": [9]});
    for round in 0..2 {
        let got = reconcile(&mut b, &format!("k{round}"), filter.clone(), &[])
            .await
            .expect("reconciled");
        assert_eq!(got.need, expected, "open {round}");
    }
    for round in 0..3 {
        let readable = post(&mut a, &alice, &open, 1).await;
        post(&mut a, &alice, &private, 1).await;
        publish_ok(&mut a, alice.sign(1, vec![], "another kind", now())).await;
        expected.extend(ids(&readable));
        let got = reconcile(&mut b, &format!("n{round}"), filter.clone(), &[])
            .await
            .expect("reconciled");
        assert_eq!(
            got.need, expected,
            "after appends {round}: the open channel's new message only"
        );
    }
    relay.stop().await;
}

/// Two relay processes on one PostgreSQL + Redis: a note acknowledged by one is in the
/// next open on the other, which kept the set from before it (the shared change mark).
#[tokio::test]
async fn postgres_a_write_in_another_process_is_in_the_next_open() {
    let test = "postgres_a_write_in_another_process_is_in_the_next_open";
    let (Some(admin), Some(redis)) = (pg_admin_url(test), redis_url(test)) else {
        return;
    };
    let db = PgDatabase::create(&admin).expect("create test database");
    let prefix = format!("buzz-test-{}", uuid::Uuid::new_v4().simple());
    let key = Keys::generate().secret_hex();
    let start = || async {
        TestRelay::start_with(
            TestBackend::Sqlite,
            test,
            |s| {
                s.storage.database_url = db.url.clone();
                s.storage.redis_url = redis.clone();
                s.storage.redis_prefix = prefix.clone();
                s.relay.private_key = key.clone();
            },
            vec![buzz_core::plugin::PluginEntry::of::<buzz_sync::SyncPlugin>()],
        )
        .await
        .expect("relay on shared PostgreSQL + Redis")
    };
    let (one, two) = (start().await, start().await);
    let alice = Keys::generate();
    let mut writer = authed(&two, &alice).await;
    let mut reader = one.ws().await;
    let mut expected = HashSet::new();
    for i in 0..3 {
        let note = alice.sign(1, vec![], &format!("note {i}"), now());
        expected.insert(publish_ok(&mut writer, note).await.id);
    }
    for round in 0..2 {
        let got = reconcile(&mut reader, &format!("a{round}"), json!({}), &[])
            .await
            .expect("reconciled");
        assert_eq!(got.need, expected, "open {round} on the other process");
    }
    let fresh = publish_ok(&mut writer, alice.sign(1, vec![], "fresh", now())).await;
    expected.insert(fresh.id);
    let got = reconcile(&mut reader, "b", json!({}), &[])
        .await
        .expect("reconciled");
    assert_eq!(
        got.need, expected,
        "a note acknowledged by the other process is in the next open"
    );
    one.stop().await;
    two.stop().await;
    drop(db);
}
