//! The store's change mark (`store/change_mark.rs`): what a reader that keeps a set
//! between requests trusts. It moves with every commit that may change events — an
//! acknowledged event, any `Store::write` — before the answer leaves, and stays where it
//! was for a write that vouched for touching only its own rows. Both backends.
//!
//! On SQLite, the append point: between two points with the same rewrite count only
//! rows after the first point's `seq` are new, and `appended_stamps` reads exactly the
//! ones of those a full read of the scope would add.

use buzz_core::both_backends;
use buzz_core::store::{
    append_point, appended_stamps, query_stamps, AppendPoint, ChannelScope, ChannelSet, Scope,
};
use buzz_core::testkit::{authed, create_channel, now, publish_ok, tag, TestBackend, TestRelay};
use buzz_nostr::filter::Filter;
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::collections::HashSet;

both_backends!(the_mark_moves_with_every_write_that_may_change_events);

async fn the_mark_moves_with_every_write_that_may_change_events(backend: TestBackend, name: &str) {
    // No purge ticks: nothing but this test writes.
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| s.storage.expired_purge_interval_secs = 0,
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let store = relay.running().services.store.clone();
    let mark = || async { store.change_mark().await.expect("change mark") };

    let before = mark().await;
    store
        .write_own_rows(|_| Ok(()))
        .await
        .expect("own-rows write");
    assert_eq!(mark().await, before, "an own-rows write leaves the mark");

    store.write(|_| Ok(())).await.expect("write");
    let after_write = mark().await;
    assert_ne!(after_write, before, "any other write moves it");

    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    publish_ok(&mut ws, alice.sign(1, vec![], "a note", now())).await;
    // Read right after the OK: the commit moved the mark before the answer left.
    assert_ne!(mark().await, after_write, "an acknowledged event moves it");
    relay.stop().await;
}

/// `appended_stamps` of every row the community holds (every channel, community-wide
/// rows too, no filter) between two points, at most `most_rows`.
async fn appended_whole_community(
    relay: &TestRelay,
    since: AppendPoint,
    until: AppendPoint,
    most_rows: i64,
) -> Option<Vec<(i64, String)>> {
    let scope = Scope {
        community_id: relay.running().services.communities[0].id,
        community_wide: true,
        channels: ChannelScope::All,
        expiry: Default::default(),
    };
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            appended_stamps(
                &mut conn,
                &scope,
                &Filter::default(),
                since,
                until,
                most_rows,
                now(),
            )
        })
        .await
        .expect("appended read")
}

/// The append point of a fresh read transaction.
async fn point(relay: &TestRelay) -> AppendPoint {
    relay
        .running()
        .services
        .store
        .read(|mut conn| append_point(&mut conn))
        .await
        .expect("append point")
        .expect("SQLite has append points")
}

#[tokio::test]
async fn sqlite_only_appends_keep_the_rewrite_count_and_their_rows_are_read_alone() {
    let name = "sqlite_only_appends_keep_the_rewrite_count_and_their_rows_are_read_alone";
    let Some(relay) = TestRelay::start_with(
        TestBackend::Sqlite,
        name,
        |s| s.storage.expired_purge_interval_secs = 0,
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let public = create_channel(&mut ws, &alice, false).await;
    let private = create_channel(&mut ws, &alice, true).await;
    let since = point(&relay).await;

    // Appends only: community-wide notes, channel messages (one with a later expiry),
    // a reaction.
    let t = now();
    let note = publish_ok(&mut ws, alice.sign(1, vec![], "note", t)).await;
    let in_public = publish_ok(&mut ws, alice.sign(9, vec![tag(&["h", &public])], "hi", t)).await;
    let in_private = publish_ok(
        &mut ws,
        alice.sign(9, vec![tag(&["h", &private])], "psst", t),
    )
    .await;
    let soon = (t + 3600).to_string();
    let expiring = publish_ok(
        &mut ws,
        alice.sign(1, vec![tag(&["expiration", &soon])], "later gone", t),
    )
    .await;
    let until = point(&relay).await;
    assert!(
        since.only_appends_until(&until),
        "notes and messages only append: {since:?} → {until:?}"
    );

    // What a full read adds is what the appended read finds, per scope and filter.
    let services = &relay.running().services;
    let community_id = services.communities[0].id;
    let scope = |channels: ChannelScope| Scope {
        community_id,
        community_wide: true,
        channels,
        expiry: Default::default(),
    };
    let public_only: ChannelSet = [public.clone()].into_iter().collect();
    let cases = [
        (scope(ChannelScope::None), json!({})),
        (scope(ChannelScope::Only(public_only)), json!({})),
        (scope(ChannelScope::All), json!({"kinds": [9]})),
        (scope(ChannelScope::All), json!({"#h": [private]})),
        (
            scope(ChannelScope::All),
            json!({"authors": [alice.pubkey()], "kinds": [1]}),
        ),
    ];
    for (scope, filter) in cases {
        let filter = Filter::parse(&filter).expect("filter");
        let read_scope = scope.clone();
        let read_filter = filter.clone();
        let (whole, appended) = services
            .store
            .read(move |mut conn| {
                let whole = query_stamps(&mut conn, &read_scope, &read_filter, 1_000, now())?;
                let appended = appended_stamps(
                    &mut conn,
                    &read_scope,
                    &read_filter,
                    since,
                    until,
                    100,
                    now(),
                )?;
                Ok((whole, appended))
            })
            .await
            .expect("reads");
        let appended = appended.expect("only appends since: the appended rows are read");
        let new_ids: HashSet<String> = [&note, &in_public, &in_private, &expiring]
            .iter()
            .map(|e| e.id.clone())
            .collect();
        let expected: HashSet<(i64, String)> = whole
            .into_iter()
            .filter(|(_, id)| new_ids.contains(id))
            .collect();
        let got: HashSet<(i64, String)> = appended.into_iter().collect();
        assert_eq!(got, expected, "appended rows of {filter:?} in {scope:?}");
    }

    // Every kind of rewrite counts: a deletion, a replaced slot, a membership change.
    let bob = Keys::generate();
    let rewrites = [
        alice.sign(5, vec![tag(&["e", &note.id])], "", now()),
        alice.sign(0, vec![], "{}", now()),
        alice.sign(
            9000,
            vec![tag(&["h", &private]), tag(&["p", bob.pubkey()])],
            "",
            now(),
        ),
    ];
    let mut before = point(&relay).await;
    for event in rewrites {
        let kind = event.kind;
        publish_ok(&mut ws, event).await;
        let after = point(&relay).await;
        assert!(
            !before.only_appends_until(&after),
            "kind {kind} is a rewrite: {before:?} → {after:?}"
        );
        let refused = appended_whole_community(&relay, before, after, 100).await;
        assert!(refused.is_none(), "no appended read across a kind {kind}");
        before = after;
    }

    // More appended rows than the caller allows: read the whole set instead.
    let from = point(&relay).await;
    for i in 0..3 {
        publish_ok(&mut ws, alice.sign(1, vec![], &format!("n{i}"), now())).await;
    }
    let to = point(&relay).await;
    let over = appended_whole_community(&relay, from, to, 2).await;
    assert!(over.is_none(), "3 appended rows past a bound of 2");
    relay.stop().await;
}
