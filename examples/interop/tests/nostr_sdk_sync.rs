//! rust-nostr's `nostr-sdk` `sync` (NIP-77, negentropy) against a real Buzz relay with
//! the sync plugin, as an offline-first client runs it: its local database holds part of
//! a channel plus messages written offline; one `sync` in both directions learns exactly
//! what each side lacks, downloads the one and uploads the other. A stranger syncing a
//! private channel learns nothing. Both backends.

use buzz_core::both_backends;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{TestBackend, TestRelay};
use nostr_sdk::prelude::*;
use std::collections::HashSet;
use std::time::Duration;

both_backends!(
    sync_both_ways_learns_exactly_what_each_side_lacks,
    a_private_channel_syncs_like_an_empty_one_for_a_stranger,
);

const WAIT: Duration = Duration::from_secs(5);

async fn start(backend: TestBackend, name: &str) -> Option<TestRelay> {
    TestRelay::start_with(
        backend,
        name,
        |_| {},
        vec![PluginEntry::of::<buzz_sync::SyncPlugin>()],
    )
    .await
}

/// A stock client with a local event store (what `sync` compares against) and automatic
/// NIP-42 authentication.
async fn client(relay: &TestRelay, keys: &Keys) -> Client {
    let database = MemoryDatabase::with_opts(MemoryDatabaseOptions {
        events: true,
        max_events: None,
    });
    let client = Client::builder()
        .signer(keys.clone())
        .database(database)
        .opts(ClientOptions::new().automatic_authentication(true))
        .build();
    client
        .add_relay(format!("ws://{}", relay.addr))
        .await
        .expect("add relay");
    client.connect().await;
    client.wait_for_connection(WAIT).await;
    client
}

/// Authenticate before syncing: the SDK answers AUTH when a REQ is refused
/// `auth-required:` (an empty channel id here, so nothing lands in its database), while
/// its `sync` gives up on a `NEG-ERR`.
async fn authenticate(client: &Client) {
    let nowhere = uuid::Uuid::new_v4().to_string();
    let filter = Filter::new()
        .kind(Kind::Custom(9))
        .custom_tag(SingleLetterTag::lowercase(Alphabet::H), nowhere);
    let fetched = client.fetch_events(filter, WAIT).await.expect("fetch");
    assert!(fetched.is_empty());
}

fn h(channel: &str) -> Tag {
    Tag::parse(["h", channel]).expect("h tag")
}

fn in_channel(channel: &str) -> Filter {
    Filter::new()
        .kind(Kind::Custom(9))
        .custom_tag(SingleLetterTag::lowercase(Alphabet::H), channel)
}

async fn create_group(client: &Client, keys: &Keys, private: bool) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut builder = EventBuilder::new(Kind::Custom(9007), "").tag(h(&id));
    if private {
        builder = builder.tag(Tag::parse(["private"]).expect("tag"));
    }
    let event = builder.sign_with_keys(keys).expect("signed");
    let sent = client.send_event(&event).await.expect("sent");
    assert!(sent.failed.is_empty(), "{:?}", sent.failed);
    id
}

fn messages(keys: &Keys, channel: &str, n: usize, what: &str) -> Vec<Event> {
    (0..n)
        .map(|i| {
            EventBuilder::new(Kind::Custom(9), format!("{what} {i}"))
                .tag(h(channel))
                .sign_with_keys(keys)
                .expect("signed")
        })
        .collect()
}

async fn sync_both_ways_learns_exactly_what_each_side_lacks(backend: TestBackend, name: &str) {
    let Some(relay) = start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let writer = client(&relay, &keys).await;
    authenticate(&writer).await;
    let group = create_group(&writer, &keys, false).await;
    let posted = messages(&keys, &group, 30, "posted");
    for event in &posted {
        let sent = writer.send_event(event).await.expect("sent");
        assert!(sent.failed.is_empty(), "{:?}", sent.failed);
    }

    // The same person's other device: 10 of the 30, and 3 written offline.
    let device = client(&relay, &keys).await;
    let offline = messages(&keys, &group, 3, "offline");
    for event in posted[..10].iter().chain(&offline) {
        device.database().save_event(event).await.expect("saved");
    }
    authenticate(&device).await;
    let output = device
        .sync(
            in_channel(&group),
            &SyncOptions::default().direction(SyncDirection::Both),
        )
        .await
        .expect("sync runs");
    assert!(output.failed.is_empty(), "{:?}", output.failed);
    let reconciled = output.val;
    let lacking: HashSet<EventId> = posted[10..].iter().map(|e| e.id).collect();
    let relay_lacks: HashSet<EventId> = offline.iter().map(|e| e.id).collect();
    assert_eq!(reconciled.remote, lacking, "the 20 the device lacks");
    assert_eq!(reconciled.local, relay_lacks, "the 3 the relay lacks");
    assert_eq!(reconciled.received, lacking, "downloaded");
    assert_eq!(reconciled.sent, relay_lacks, "uploaded");

    // Both sides now hold all 33: another sync has nothing to move.
    let again = device
        .sync(
            in_channel(&group),
            &SyncOptions::default().direction(SyncDirection::Both),
        )
        .await
        .expect("sync runs")
        .val;
    assert!(
        again.remote.is_empty() && again.local.is_empty(),
        "{again:?}"
    );
    let on_relay = writer
        .fetch_events(in_channel(&group), WAIT)
        .await
        .expect("fetch");
    assert_eq!(on_relay.len(), 33);
    writer.shutdown().await;
    device.shutdown().await;
    relay.stop().await;
}

async fn a_private_channel_syncs_like_an_empty_one_for_a_stranger(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = start(backend, name).await else {
        return;
    };
    let alice_keys = Keys::generate();
    let alice = client(&relay, &alice_keys).await;
    authenticate(&alice).await;
    let group = create_group(&alice, &alice_keys, true).await;
    let secret = messages(&alice_keys, &group, 12, "secret");
    for event in &secret {
        let sent = alice.send_event(event).await.expect("sent");
        assert!(sent.failed.is_empty(), "{:?}", sent.failed);
    }
    let bob = client(&relay, &Keys::generate()).await;
    // Bob even holds two of its messages (learned elsewhere): the relay still says no
    // more than it would of a channel that does not exist.
    for event in &secret[..2] {
        bob.database().save_event(event).await.expect("saved");
    }
    authenticate(&bob).await;
    let hidden = bob
        .sync(in_channel(&group), &SyncOptions::default())
        .await
        .expect("sync runs");
    assert!(hidden.failed.is_empty(), "{:?}", hidden.failed);
    assert!(hidden.val.remote.is_empty(), "{:?}", hidden.val.remote);
    let held: HashSet<EventId> = secret[..2].iter().map(|e| e.id).collect();
    assert_eq!(hidden.val.local, held);
    // The member learns the rest.
    let member = client(&relay, &alice_keys).await;
    authenticate(&member).await;
    let seen = member
        .sync(in_channel(&group), &SyncOptions::default())
        .await
        .expect("sync runs");
    assert_eq!(seen.val.remote.len(), 12);
    for c in [alice, bob, member] {
        c.shutdown().await;
    }
    relay.stop().await;
}
