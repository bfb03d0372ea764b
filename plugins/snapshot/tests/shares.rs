//! The shared capture limits are partitioned per community: whatever the readers of one
//! community do, a reader of another community still starts a capture. The attack this
//! reproduces: sixteen throwaway keys of one open community each take their two empty
//! captures, and every community of the relay waited out the captures' lifetime.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use buzz_snapshot::Captures;
use common::*;
use serde_json::{json, Value};

both_backends!(
    throwaway_keys_cannot_starve_other_communities,
    a_community_holds_at_most_its_share,
    a_community_holds_at_most_its_byte_share,
    outsiders_are_refused_before_any_slot_is_counted,
);

/// A relay of three communities (default, [`OTHER`], [`CLOSED`]) with these options; the
/// owner of [`CLOSED`].
async fn communities(
    backend: TestBackend,
    name: &str,
    options: Value,
) -> Option<(TestRelay, User)> {
    let owner = Keys::generate();
    let pubkey = owner.pubkey().to_owned();
    let relay = relay_tuned(backend, name, options, move |s| add_communities(s, &pubkey)).await?;
    let owner = user_at(&relay, CLOSED, owner).await;
    Some((relay, owner))
}

/// A member of the community at `host` with one task of its own there.
async fn member_with_a_task(relay: &TestRelay, host: &str, owner: Option<&mut User>) -> User {
    let keys = Keys::generate();
    if let Some(owner) = owner {
        admit(owner, keys.pubkey()).await;
    }
    let mut user = user_at(relay, host, keys).await;
    let channel = user.create_channel(false).await;
    user.put(&Draft::create(&channel, &format!("a task in {host}")))
        .await;
    user
}

/// Start a capture of tasks at `host` as `keys`: its status and body.
async fn start_at(relay: &TestRelay, host: &str, keys: &Keys) -> (u16, Value) {
    ask_at(relay, host, keys, start_filter(tasks())).await
}

async fn throwaway_keys_cannot_starve_other_communities(backend: TestBackend, name: &str) {
    // The relay's own defaults: nothing is configured for this test.
    let Some((relay, mut owner)) = communities(backend, name, json!({})).await else {
        return;
    };
    let closed = member_with_a_task(&relay, CLOSED, Some(&mut owner)).await;
    let other = member_with_a_task(&relay, OTHER, None).await;

    // Sixteen throwaway keys in the default community, two empty captures each.
    let began = std::time::Instant::now();
    let mut held = 0;
    for _ in 0..16 {
        let attacker = Keys::generate();
        for _ in 0..2 {
            let answer = start_at(&relay, "localhost", &attacker).await;
            if answer.0 == 200 {
                held += 1;
            } else {
                assert_code(&answer, 503, "snapshot_unavailable");
            }
        }
    }
    println!(
        "attacker holds {held} captures after {} ms",
        began.elapsed().as_millis()
    );

    // A member of a closed community the attacker is not in, and a reader of another
    // open community, still capture their tasks.
    let answer = start_at(&relay, CLOSED, &closed.keys).await;
    assert_eq!(answer.0, 200, "closed community: {}", answer.1);
    assert_eq!(entries(&answer.1).len(), 1);
    let answer = start_at(&relay, OTHER, &other.keys).await;
    assert_eq!(answer.0, 200, "other community: {}", answer.1);
    assert_eq!(entries(&answer.1).len(), 1);
    // The attacker's community holds its share of the relay's captures, no more.
    assert_eq!(
        held,
        buzz_snapshot::Limits::default().captures_per_community
    );
}

async fn a_community_holds_at_most_its_share(backend: TestBackend, name: &str) {
    let options = json!({"max_captures": 5, "captures_per_community": 3, "captures_per_reader": 2});
    let Some((relay, mut owner)) = communities(backend, name, options).await else {
        return;
    };
    let closed = member_with_a_task(&relay, CLOSED, Some(&mut owner)).await;
    let (a, b, c) = (Keys::generate(), Keys::generate(), Keys::generate());
    // Three captures in the default community, by two readers.
    assert_eq!(start_at(&relay, "localhost", &a).await.0, 200);
    assert_eq!(start_at(&relay, "localhost", &a).await.0, 200);
    assert_eq!(start_at(&relay, "localhost", &b).await.0, 200);
    // A fourth is refused, to a reader with room of its own and to a new one alike.
    for reader in [&b, &c] {
        assert_code(
            &start_at(&relay, "localhost", reader).await,
            503,
            "snapshot_unavailable",
        );
    }
    // The same reader keys in another community have their own share there.
    assert_eq!(start_at(&relay, OTHER, &a).await.0, 200);
    assert_eq!(start_at(&relay, OTHER, &c).await.0, 200);
    // Five shared by the whole relay still hold: the closed community's member waits.
    let full = start_at(&relay, CLOSED, &closed.keys).await;
    assert_code(&full, 503, "snapshot_unavailable");
    let listed = captures_of(&relay).await;
    let mut per_community = std::collections::BTreeMap::new();
    for capture in &listed {
        *per_community.entry(capture.community).or_insert(0) += 1;
    }
    let mut counts: Vec<usize> = per_community.into_values().collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![2, 3], "{listed:?}");
}

async fn a_community_holds_at_most_its_byte_share(backend: TestBackend, name: &str) {
    const SHARE: u64 = 12_000;
    let options = json!({ "charged_bytes_per_community": SHARE });
    let Some((relay, _owner)) = communities(backend, name, options).await else {
        return;
    };
    // Ten tasks in one channel of the default community: every reader's capture of
    // them is charged about the same, a few kilobytes.
    let mut author = User::new(&relay).await;
    let channel = author.create_channel(false).await;
    for i in 0..10 {
        author
            .put(&Draft::create(&channel, &format!("task {i}")))
            .await;
    }
    let mut held = 0;
    loop {
        let answer = start_at(&relay, "localhost", &Keys::generate()).await;
        if answer.0 != 200 {
            assert_code(&answer, 503, "snapshot_unavailable");
            break;
        }
        held += 1;
        assert!(held < 8, "more captures than the byte share allows");
    }
    let listed = captures_of(&relay).await;
    assert_eq!(listed.len(), held, "{listed:?}");
    let charged: u64 = listed.iter().map(|c| c.bytes).sum();
    let smallest = listed.iter().map(|c| c.bytes).min().expect("a capture");
    println!("{held} captures of {smallest} bytes fit a share of {SHARE} bytes");
    assert!(held >= 2, "two captures of {smallest} bytes fit {SHARE}");
    assert!(charged <= SHARE, "{charged} bytes charged");
    assert!(
        charged + smallest > SHARE,
        "{charged} + {smallest} fits, yet refused"
    );
    // Another community's reader starts a capture of the same size.
    let mut there = user_at(&relay, OTHER, Keys::generate()).await;
    let channel = there.create_channel(false).await;
    for i in 0..10 {
        there
            .put(&Draft::create(&channel, &format!("task {i}")))
            .await;
    }
    let answer = start_at(&relay, OTHER, &there.keys).await;
    assert_eq!(answer.0, 200, "{}", answer.1);
    assert_eq!(entries(&answer.1).len(), 10);
}

async fn outsiders_are_refused_before_any_slot_is_counted(backend: TestBackend, name: &str) {
    // One capture for the whole relay: the member's fills it.
    let options = json!({"max_captures": 1});
    let Some((relay, mut owner)) = communities(backend, name, options).await else {
        return;
    };
    let member = member_with_a_task(&relay, CLOSED, Some(&mut owner)).await;
    assert_eq!(start_at(&relay, CLOSED, &member.keys).await.0, 200);
    // Someone who is not a member of the closed community is refused as a non-member
    // (admission comes first), not as a full quota: a non-member's start never holds
    // a slot of a community it cannot read, even for the moment of its access check.
    let (status, body) = start_at(&relay, CLOSED, &Keys::generate()).await;
    assert_eq!(status, 403, "{body}");
    assert_ne!(body["code"], "snapshot_unavailable", "{body}");
    assert_eq!(captures_of(&relay).await.len(), 1);
}

async fn captures_of(relay: &TestRelay) -> Vec<buzz_snapshot::CaptureInfo> {
    Captures::of_relay(&relay.settings, relay.running().services.store.clone())
        .await
        .expect("capture store")
        .list()
        .await
        .expect("list")
}
