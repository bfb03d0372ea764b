//! rust-nostr's `nostr-sdk` (a stock client, default settings plus a signer) against a
//! real Buzz relay, as an outside user runs it:
//!
//! - lazy NIP-42: the SDK answers the challenge on its own while its first REQ is
//!   already on the wire; channel data is `CLOSED auth-required:` until then and the SDK
//!   resubscribes, so `fetch_events` returns the channels;
//! - the NIP-29 flow: create with only `h`, join, `duplicate:` on a second join, leave
//!   and the relay's 9001;
//! - NIP-45 `count_events`, within the reader's access;
//! - a live `#h` subscription;
//! - `sync` (NIP-77) fails at once with the relay's reason instead of timing out;
//! - NIP-40: an expired event is refused.

use buzz_core::both_backends;
use buzz_core::testkit::{TestBackend, TestRelay};
use nostr_sdk::prelude::*;
use std::time::{Duration, Instant};

both_backends!(
    lazy_auth_lists_channels,
    nip29_group_flow,
    count_events_within_access,
    live_h_subscription,
    sync_fails_fast_with_a_reason,
    expired_events_are_refused,
);

const WAIT: Duration = Duration::from_secs(5);

fn relay_url(relay: &TestRelay) -> String {
    format!("ws://{}", relay.addr)
}

/// A client as an application would make it: a signer, automatic authentication (the
/// SDK's default), one relay.
async fn client(relay: &TestRelay, keys: &Keys) -> Client {
    let client = connecting(relay, keys).await;
    client.wait_for_connection(WAIT).await;
    client
}

/// The same client, returned as soon as it started connecting: what it sends next goes
/// out right after the relay's AUTH challenge, before its own AUTH is answered.
async fn connecting(relay: &TestRelay, keys: &Keys) -> Client {
    let client = Client::builder()
        .signer(keys.clone())
        .opts(ClientOptions::new().automatic_authentication(true))
        .build();
    client.add_relay(relay_url(relay)).await.expect("add relay");
    client.connect().await;
    client
}

fn h(channel: &str) -> Tag {
    Tag::parse(["h", channel]).expect("h tag")
}

/// Send, and return the relay's refusal (`None`: accepted).
async fn send(client: &Client, builder: EventBuilder) -> Option<String> {
    let output = client
        .send_event_builder(builder)
        .await
        .expect("signed and sent");
    output.failed.values().next().cloned()
}

/// A 9007 as NIP-29 helpers send it (`h` only), or with a `name`.
async fn create_group(client: &Client, private: bool, name: Option<&str>) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let mut builder = EventBuilder::new(Kind::Custom(9007), "").tag(h(&id));
    if let Some(name) = name {
        builder = builder.tag(Tag::parse(["name", name]).expect("tag"));
    }
    if private {
        builder = builder.tag(Tag::parse(["private"]).expect("tag"));
    }
    assert_eq!(send(client, builder).await, None, "9007 (name: {name:?})");
    id
}

async fn lazy_auth_lists_channels(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = client(&relay, &Keys::generate()).await;
    let group = create_group(&alice, false, Some("general")).await;
    let posted = alice
        .send_event_builder(EventBuilder::new(Kind::Custom(9), "hello").tag(h(&group)))
        .await
        .expect("sent");
    assert!(posted.failed.is_empty(), "{:?}", posted.failed);

    // New clients ask at once, before their AUTH has been answered. (Whether the REQ
    // overtakes the AUTH is up to timing, so several clients try; before the relay
    // answered `auth-required:` to such a REQ, most of them listed nothing.)
    for attempt in 0..5 {
        let bob = connecting(&relay, &Keys::generate()).await;
        let groups = bob
            .fetch_events(Filter::new().kind(Kind::Custom(39000)), WAIT)
            .await
            .expect("fetch 39000");
        assert!(
            groups
                .iter()
                .any(|e| e.tags.identifier() == Some(group.as_str())),
            "client {attempt}: the group is listed: {groups:?}"
        );
        let lazy = connecting(&relay, &Keys::generate()).await;
        let messages = lazy
            .fetch_events(Filter::new().id(posted.val), WAIT)
            .await
            .expect("fetch by id");
        assert_eq!(messages.len(), 1, "client {attempt}: the message by id");
        bob.shutdown().await;
        lazy.shutdown().await;
    }
    relay.stop().await;
}

async fn nip29_group_flow(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let relay_pk =
        PublicKey::from_hex(relay.running().services.relay_keys.pubkey()).expect("relay key");
    let (alice_keys, bob_keys) = (Keys::generate(), Keys::generate());
    let alice = client(&relay, &alice_keys).await;
    let bob = client(&relay, &bob_keys).await;
    let group = create_group(&alice, false, None).await;
    // A 9002 names it (none was needed to create it).
    let named = EventBuilder::new(Kind::Custom(9002), "")
        .tag(h(&group))
        .tag(Tag::parse(["name", "Pizza"]).expect("tag"));
    assert_eq!(send(&alice, named).await, None);

    let join = || EventBuilder::new(Kind::Custom(9021), "").tag(h(&group));
    assert_eq!(send(&bob, join()).await, None, "first join");
    let again = send(&bob, join()).await.expect("a second join is refused");
    assert!(again.starts_with("duplicate:"), "{again}");

    // Alice watches removals; bob leaves; the relay issues the 9001.
    let mut notifications = alice.notifications();
    alice
        .subscribe(
            Filter::new()
                .kind(Kind::Custom(9001))
                .custom_tag(SingleLetterTag::lowercase(Alphabet::H), group.clone()),
            None,
        )
        .await
        .expect("subscribe");
    let leave = EventBuilder::new(Kind::Custom(9022), "").tag(h(&group));
    assert_eq!(send(&bob, leave).await, None);
    let removal = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(RelayPoolNotification::Event { event, .. }) = notifications.recv().await {
                if event.kind == Kind::Custom(9001) {
                    return event;
                }
            }
        }
    })
    .await
    .expect("the relay's 9001 arrives");
    assert_eq!(removal.pubkey, relay_pk);
    assert!(removal
        .tags
        .public_keys()
        .any(|p| *p == bob_keys.public_key()));

    // Group state signed by the relay key, as nip29 loaders filter it.
    let metadata = alice
        .fetch_events(
            Filter::new()
                .kind(Kind::Custom(39000))
                .author(relay_pk)
                .identifier(group.clone()),
            WAIT,
        )
        .await
        .expect("39000");
    let name_tag = metadata
        .first()
        .and_then(|e| e.tags.find(TagKind::Name))
        .and_then(|t| t.content())
        .map(str::to_owned);
    assert_eq!(name_tag.as_deref(), Some("Pizza"));
    relay.stop().await;
}

async fn count_events_within_access(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = client(&relay, &Keys::generate()).await;
    let bob = client(&relay, &Keys::generate()).await;
    let private = create_group(&alice, true, Some("private")).await;
    for text in ["one", "two", "three"] {
        let message = EventBuilder::new(Kind::Custom(9), text).tag(h(&private));
        assert_eq!(send(&alice, message).await, None);
    }
    let filter = Filter::new()
        .kind(Kind::Custom(9))
        .custom_tag(SingleLetterTag::lowercase(Alphabet::H), private.clone());
    let url = relay_url(&relay);
    let count = |who: Client, filter: Filter| {
        let url = url.clone();
        async move {
            who.relay(url)
                .await
                .expect("relay")
                .count_events(filter, WAIT)
                .await
        }
    };
    assert_eq!(
        count(alice.clone(), filter.clone()).await.expect("count"),
        3
    );
    // Bob is not a member: the private channel counts like an empty one.
    assert_eq!(count(bob.clone(), filter).await.expect("count"), 0);
    relay.stop().await;
}

async fn live_h_subscription(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = client(&relay, &Keys::generate()).await;
    let bob = client(&relay, &Keys::generate()).await;
    let group = create_group(&alice, false, Some("live")).await;
    let mut notifications = bob.notifications();
    bob.subscribe(
        Filter::new().custom_tag(SingleLetterTag::lowercase(Alphabet::H), group.clone()),
        None,
    )
    .await
    .expect("subscribe");
    // Give the subscription (and its AUTH retry) time to be live.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let message = EventBuilder::new(Kind::Custom(9), "live!").tag(h(&group));
    assert_eq!(send(&alice, message).await, None);
    let got = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(RelayPoolNotification::Event { event, .. }) = notifications.recv().await {
                if event.content == "live!" {
                    return event;
                }
            }
        }
    })
    .await
    .expect("the message arrives live");
    assert_eq!(got.kind, Kind::Custom(9));
    relay.stop().await;
}

async fn sync_fails_fast_with_a_reason(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = client(&relay, &Keys::generate()).await;
    let started = Instant::now();
    let output = alice
        .sync(Filter::new().kind(Kind::TextNote), &SyncOptions::default())
        .await
        .expect("sync runs");
    let elapsed = started.elapsed();
    let reason = output.failed.values().next().cloned().unwrap_or_default();
    assert!(reason.contains("blocked:"), "{reason:?} after {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    relay.stop().await;
}

async fn expired_events_are_refused(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = client(&relay, &Keys::generate()).await;
    let past = Timestamp::from_secs(Timestamp::now().as_secs() - 60);
    let stale = EventBuilder::text_note("gone").tag(Tag::expiration(past));
    let refusal = send(&alice, stale).await.expect("refused");
    assert!(refusal.starts_with("invalid:"), "{refusal}");
    relay.stop().await;
}
