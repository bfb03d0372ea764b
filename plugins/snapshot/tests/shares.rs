//! The shared capture limits keep a reserve for every community: whatever the readers of
//! one community do, a reader of another community still starts a capture, and a relay
//! of one community gives it NIP-AR's limits whole. The attacks this reproduces: sixteen
//! throwaway keys of one open community each take their two empty captures, and every
//! community of the relay waited out the captures' lifetime; and, with a fixed share per
//! community instead, the ninth reader of a one-community relay was refused.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use buzz_snapshot::Captures;
use common::*;
use serde_json::{json, Value};

both_backends!(
    a_lone_community_holds_every_capture,
    throwaway_keys_cannot_starve_other_communities,
    a_community_keeps_its_reserve,
    a_community_keeps_its_byte_reserve,
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
    let owner = User::at(&relay, CLOSED, owner).await;
    Some((relay, owner))
}

/// A member of the community at `host` with one task of its own there.
async fn member_with_a_task(relay: &TestRelay, host: &str, owner: Option<&mut User>) -> User {
    let keys = Keys::generate();
    if let Some(owner) = owner {
        admit(owner, keys.pubkey()).await;
    }
    let mut user = User::at(relay, host, keys).await;
    let channel = user.create_channel(false).await;
    user.put(&Draft::create(&channel, &format!("a task in {host}")))
        .await;
    user
}

/// Start a capture of tasks at `host` as `keys`: its status and body.
async fn start_at(relay: &TestRelay, host: &str, keys: &Keys) -> (u16, Value) {
    ask_at(relay, host, keys, start_filter(tasks())).await
}

/// The relay's defaults with one community: NIP-AR's limits hold exactly — 32 captures,
/// two per reader — and the reported failure was the ninth reader's start (503).
async fn a_lone_community_holds_every_capture(backend: TestBackend, name: &str) {
    let Some(relay) = relay_tuned(backend, name, json!({}), |_| {}).await else {
        return;
    };
    let spec = buzz_snapshot::Limits::default();
    let mut held = 0;
    for reader in 0..=spec.max_captures / spec.captures_per_reader {
        let keys = Keys::generate();
        for capture in 0..=spec.captures_per_reader {
            let answer = start_at(&relay, "localhost", &keys).await;
            if held < spec.max_captures && capture < spec.captures_per_reader {
                assert_eq!(
                    answer.0, 200,
                    "reader {reader}, capture {capture}: {}",
                    answer.1
                );
                held += 1;
            } else {
                // A reader's third, and anything past the relay's 32.
                assert_code(&answer, 503, "snapshot_unavailable");
            }
        }
    }
    assert_eq!(held, spec.max_captures);
    assert_eq!(captures_of(&relay).await.len(), spec.max_captures);
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
    // The attacker's community holds what the other two communities' reserves leave.
    let limits = buzz_snapshot::Limits::default();
    assert_eq!(
        held,
        limits.max_captures - 2 * limits.captures_reserved_per_community
    );
}

/// Five captures, one kept for each of the three communities: the default community's
/// readers hold three, the other communities still start theirs.
async fn a_community_keeps_its_reserve(backend: TestBackend, name: &str) {
    let options =
        json!({"max_captures": 5, "captures_reserved_per_community": 1, "captures_per_reader": 2});
    let Some((relay, mut owner)) = communities(backend, name, options).await else {
        return;
    };
    let closed = member_with_a_task(&relay, CLOSED, Some(&mut owner)).await;
    let (a, b, c) = (Keys::generate(), Keys::generate(), Keys::generate());
    // Three captures in the default community, by two readers.
    assert_eq!(start_at(&relay, "localhost", &a).await.0, 200);
    assert_eq!(start_at(&relay, "localhost", &a).await.0, 200);
    assert_eq!(start_at(&relay, "localhost", &b).await.0, 200);
    // A fourth is refused, to a reader with room of its own and to a new one alike:
    // the two free slots are the other communities' reserves.
    for reader in [&b, &c] {
        assert_code(
            &start_at(&relay, "localhost", reader).await,
            503,
            "snapshot_unavailable",
        );
    }
    // The same reader key in another community takes that community's reserve; a
    // second reader there would take the closed community's, and is refused.
    assert_eq!(start_at(&relay, OTHER, &a).await.0, 200);
    assert_code(
        &start_at(&relay, OTHER, &c).await,
        503,
        "snapshot_unavailable",
    );
    // The closed community's member starts the last one.
    let last = start_at(&relay, CLOSED, &closed.keys).await;
    assert_eq!(last.0, 200, "{}", last.1);
    let listed = captures_of(&relay).await;
    let mut per_community = std::collections::BTreeMap::new();
    for capture in &listed {
        *per_community.entry(capture.community).or_insert(0) += 1;
    }
    let mut counts: Vec<usize> = per_community.into_values().collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![1, 1, 3], "{listed:?}");
}

async fn a_community_keeps_its_byte_reserve(backend: TestBackend, name: &str) {
    // 36,000 bytes, 12,000 kept for each of three communities: the default community
    // may fill 12,000 while the others hold nothing.
    const MAX: u64 = 36_000;
    const RESERVE: u64 = 12_000;
    let options = json!({
        "max_charged_bytes": MAX,
        "charged_bytes_reserved_per_community": RESERVE,
    });
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
        assert!(held < 8, "more captures than the others' reserves leave");
    }
    let listed = captures_of(&relay).await;
    assert_eq!(listed.len(), held, "{listed:?}");
    let charged: u64 = listed.iter().map(|c| c.bytes).sum();
    let smallest = listed.iter().map(|c| c.bytes).min().expect("a capture");
    let left = MAX - 2 * RESERVE;
    println!("{held} captures of {smallest} bytes fit the {left} bytes reserves leave");
    assert!(held >= 2, "two captures of {smallest} bytes fit {left}");
    assert!(charged <= left, "{charged} bytes charged");
    assert!(
        charged + smallest > left,
        "{charged} + {smallest} fits, yet refused"
    );
    // Another community's reader starts a capture of the same size.
    let mut there = User::at(&relay, OTHER, Keys::generate()).await;
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
