//! The index walk of a search (issue 45): it examines at most `max_count_rows` index
//! matches per filter, and only matches within its reader's scope — so matches in a
//! channel the reader cannot read, or in another community, neither use up those rows
//! nor (the point of it) cost the reader time. Over the wire, on both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::config::{CommunitySettings, Settings};
use buzz_core::testkit::TestBackend;
use common::*;
use serde_json::json;

both_backends!(
    a_search_examines_at_most_the_cap,
    unreadable_channels_are_not_walked,
    other_communities_are_not_walked,
);

/// The cap: a search of five matches examining three finds the newest three.
async fn a_search_examines_at_most_the_cap(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_count_rows": 3}), |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let mut posted = Vec::new();
    for i in 0..5 {
        posted.push(alice.post(&ch, &format!("okapi {i}")).await.id);
    }
    let found = alice.search(json!({"search": "okapi"})).await;
    assert_eq!(sorted(found), sorted(posted[2..].to_vec()));
    relay.stop().await;
}

/// More newer matches than the cap in a private channel: a non-member's walk never
/// reaches them, so the cap is left for what it may read (an open channel's message
/// and a community-wide note, both older). A member's walk is capped as before.
async fn unreadable_channels_are_not_walked(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_count_rows": 3}), |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let open = alice.create_channel(false).await;
    let secret = alice.create_channel(true).await;
    let public = alice.post(&open, "okapi in the open").await;
    let note = alice.publish(alice.sign(1, vec![], "okapi note")).await;
    for i in 0..5 {
        alice.post(&secret, &format!("okapi secret {i}")).await;
    }
    assert_eq!(
        sorted(bob.search(json!({"search": "okapi"})).await),
        sorted(vec![public.id.clone(), note.id.clone()])
    );
    assert_eq!(
        bob.search(json!({"search": "okapi", "#h": [open]})).await,
        vec![public.id]
    );
    assert_eq!(
        bob.search(json!({"search": "okapi", "kinds": [1]})).await,
        vec![note.id]
    );
    // Phrases and prefixes keep to the scope too.
    assert_eq!(
        bob.search(json!({"search": "\"okapi in\" op*"}))
            .await
            .len(),
        1
    );
    assert_eq!(alice.search(json!({"search": "okapi"})).await.len(), 3);
    relay.stop().await;
}

/// More newer matches than the cap in another community: neither an authenticated
/// reader nor an anonymous one (kind 1) of this community walks them.
async fn other_communities_are_not_walked(backend: TestBackend, name: &str) {
    let second = |s: &mut Settings| {
        s.communities.push(CommunitySettings {
            host: "second.test".into(),
            name: "Second".into(),
            owners: vec![],
            open: true,
            policies: Default::default(),
        })
    };
    let Some(relay) = relay_with(backend, name, json!({"max_count_rows": 3}), second).await else {
        return;
    };
    let mut here = User::new(&relay).await;
    let mut there = User::at(&relay, "second.test", buzz_nostr::keys::Keys::generate()).await;
    let ch_here = here.create_channel(false).await;
    let ch_there = there.create_channel(false).await;
    let mine = here.post(&ch_here, "okapi here").await;
    let note = here.publish(here.sign(1, vec![], "okapi note here")).await;
    for i in 0..5 {
        there.post(&ch_there, &format!("okapi there {i}")).await;
        there
            .publish(there.sign(1, vec![], &format!("okapi note there {i}")))
            .await;
    }
    assert_eq!(
        sorted(here.search(json!({"search": "okapi"})).await),
        sorted(vec![mine.id, note.id.clone()])
    );
    let mut anonymous = relay.ws().await;
    let found = anonymous
        .req(&sub(), vec![json!({"search": "okapi", "kinds": [1]})])
        .await
        .expect("kind 1 is public");
    assert_eq!(ids(&found), vec![note.id]);
    relay.stop().await;
}
