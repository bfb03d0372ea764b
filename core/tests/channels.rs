//! Channels, membership, moderation and access on every read path — on both backends.

use buzz_core::both_backends;

use buzz_core::config::CommunitySettings;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(
    open_and_private_channels,
    join_and_leave,
    member_removal_revokes_reads_and_live_subscriptions,
    archived_channels_refuse_messages_but_stay_readable,
    ttl_channels_expire_like_deleted_ones,
    moderator_removal_and_author_deletion,
    bans_and_timeouts,
    channel_ids_are_per_community,
    group_state_events_follow_channel_access,
    reactions_must_target_the_same_channel,
    closed_communities_admit_only_added_members,
);

/// A user with an authenticated connection.
struct User {
    keys: Keys,
    ws: WsClient,
}

impl User {
    async fn new(relay: &TestRelay) -> User {
        Self::with_keys(relay, Keys::generate()).await
    }

    async fn with_keys(relay: &TestRelay, keys: Keys) -> User {
        let mut ws = relay.ws().await;
        assert_eq!(ws.auth(&keys).await, (true, String::new()));
        User { keys, ws }
    }

    fn sign(&self, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
        self.keys.sign(kind, tags, content, now())
    }

    async fn send(
        &mut self,
        kind: u32,
        tags: Vec<Vec<String>>,
        content: &str,
    ) -> (bool, String, Event) {
        let event = self.sign(kind, tags, content);
        let (ok, msg) = self.ws.publish(&event).await;
        (ok, msg, event)
    }

    async fn ok(&mut self, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
        let (ok, msg, event) = self.send(kind, tags, content).await;
        assert!(ok, "kind {kind} refused: {msg}");
        event
    }

    async fn create(&mut self, private: bool) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut tags = vec![tag(&["h", &id]), tag(&["name", "general"])];
        if private {
            tags.push(tag(&["private"]));
        }
        self.ok(9007, tags, "").await;
        id
    }

    async fn post(&mut self, channel: &str, text: &str) -> Event {
        self.ok(9, vec![tag(&["h", channel])], text).await
    }

    async fn read(&mut self, channel: &str) -> Vec<Event> {
        self.ws
            .req(&fresh_sub(), vec![json!({"#h": [channel], "kinds": [9]})])
            .await
            .expect("REQ answered")
    }
}

/// A subscription id never used before on the connection, so live events of earlier
/// subscriptions cannot mix into this answer.
fn fresh_sub() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn refused(result: (bool, String, Event), prefix: &str) {
    let (ok, msg, _) = result;
    assert!(
        !ok && msg.starts_with(prefix),
        "expected {prefix} got ok={ok} {msg}"
    );
}

async fn open_and_private_channels(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let open = alice.create(false).await;
    let private = alice.create(true).await;
    let hello = alice.post(&open, "hello").await;
    let secret = alice.post(&private, "secret").await;

    assert_eq!(bob.read(&open).await, vec![hello.clone()]);
    assert!(
        bob.read(&private).await.is_empty(),
        "private channel reads like a missing one"
    );
    let all = bob
        .ws
        .req("all", vec![json!({"kinds": [9]})])
        .await
        .expect("REQ");
    assert_eq!(
        all,
        vec![hello.clone()],
        "no private rows through an unscoped filter"
    );
    bob.ok(9, vec![tag(&["h", &open])], "hi").await;
    refused(
        bob.send(9, vec![tag(&["h", &private])], "let me in").await,
        "restricted:",
    );

    // The same over the HTTP bridge.
    let http = relay.http();
    let body = json!([{"ids": [secret.id]}]).to_string();
    let (status, rows) = http.post_signed(&bob.keys, "/query", body.as_bytes()).await;
    assert_eq!((status, rows), (200, json!([])));

    alice
        .ok(
            9000,
            vec![
                tag(&["h", &private]),
                tag(&["p", bob.keys.pubkey(), "member"]),
            ],
            "",
        )
        .await;
    assert_eq!(bob.read(&private).await, vec![secret.clone()]);
    let (status, rows) = http.post_signed(&bob.keys, "/query", body.as_bytes()).await;
    assert_eq!((status, rows), (200, json!([secret])));
    bob.ok(9, vec![tag(&["h", &private])], "thanks").await;
    relay.stop().await;
}

async fn join_and_leave(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let open = alice.create(false).await;
    let private = alice.create(true).await;
    bob.ok(9021, vec![tag(&["h", &open])], "").await;
    let members = members_of(&mut bob.ws, &open).await;
    assert!(
        members.contains(&bob.keys.pubkey().to_owned()),
        "{members:?}"
    );
    let (ok, msg, _) = bob.send(9021, vec![tag(&["h", &private])], "").await;
    // To an outsider a private channel reads like a missing one.
    assert!(!ok && msg == "restricted: unknown channel", "{msg}");
    bob.ok(9022, vec![tag(&["h", &open])], "").await;
    let members = members_of(&mut bob.ws, &open).await;
    assert!(
        !members.contains(&bob.keys.pubkey().to_owned()),
        "{members:?}"
    );
    relay.stop().await;
}

/// Pubkeys in the channel's relay-signed 39002.
async fn members_of(ws: &mut WsClient, channel: &str) -> Vec<String> {
    let docs = ws
        .req(
            &fresh_sub(),
            vec![json!({"kinds": [39002], "#d": [channel]})],
        )
        .await
        .expect("REQ");
    assert_eq!(docs.len(), 1, "exactly one current 39002");
    docs[0].tag_values("p").map(str::to_owned).collect()
}

async fn member_removal_revokes_reads_and_live_subscriptions(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create(true).await;
    alice
        .ok(
            9000,
            vec![tag(&["h", &private]), tag(&["p", bob.keys.pubkey()])],
            "",
        )
        .await;

    let mut live = relay.ws().await;
    assert!(live.auth(&bob.keys).await.0);
    live.req("live", vec![json!({"#h": [&private], "kinds": [9]})])
        .await
        .expect("REQ");
    let before = alice.post(&private, "before").await;
    let got = live
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("live event");
    assert_eq!(got[2]["id"], json!(before.id));

    alice
        .ok(
            9001,
            vec![tag(&["h", &private]), tag(&["p", bob.keys.pubkey()])],
            "",
        )
        .await;
    let after = alice.post(&private, "after").await;
    // A marker on a public path proves the live stream is flowing past the removal.
    live.req("pub", vec![json!({"kinds": [1]})])
        .await
        .expect("REQ");
    let marker = alice.ok(1, vec![], "marker").await;
    let next = live
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("marker arrives");
    assert_eq!(
        next[2]["id"],
        json!(marker.id),
        "nothing from the private channel after removal"
    );
    assert_ne!(next[2]["id"], json!(after.id));
    assert!(bob.read(&private).await.is_empty());
    refused(
        bob.send(9, vec![tag(&["h", &private])], "still here?")
            .await,
        "restricted:",
    );
    relay.stop().await;
}

async fn archived_channels_refuse_messages_but_stay_readable(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create(false).await;
    let old = alice.post(&ch, "old").await;
    alice
        .ok(9002, vec![tag(&["h", &ch]), tag(&["archived", "true"])], "")
        .await;
    let (ok, msg, _) = alice.send(9, vec![tag(&["h", &ch])], "new").await;
    assert!(!ok && msg == "invalid: channel is archived", "{msg}");
    assert_eq!(alice.read(&ch).await, vec![old]);
    alice
        .ok(
            9002,
            vec![tag(&["h", &ch]), tag(&["archived", "false"])],
            "",
        )
        .await;
    alice.post(&ch, "back").await;
    relay.stop().await;
}

async fn ttl_channels_expire_like_deleted_ones(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = uuid::Uuid::new_v4().to_string();
    alice
        .ok(
            9007,
            vec![
                tag(&["h", &ch]),
                tag(&["name", "brief"]),
                tag(&["ttl", "2"]),
            ],
            "",
        )
        .await;
    alice.post(&ch, "soon gone").await;
    assert_eq!(alice.read(&ch).await.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(3_100)).await;
    assert!(
        alice.read(&ch).await.is_empty(),
        "expired channel reads as missing"
    );
    let (ok, msg, _) = alice.send(9, vec![tag(&["h", &ch])], "late").await;
    assert!(!ok, "{msg}");
    relay.stop().await;
}

async fn moderator_removal_and_author_deletion(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create(false).await;
    let rude = bob.post(&ch, "rude").await;
    let mine = bob.post(&ch, "mine").await;
    let alices = alice.post(&ch, "alice's").await;
    // A plain member cannot remove someone else's message.
    refused(
        bob.send(9005, vec![tag(&["h", &ch]), tag(&["e", &alices.id])], "")
            .await,
        "restricted:",
    );
    alice
        .ok(9005, vec![tag(&["h", &ch]), tag(&["e", &rude.id])], "")
        .await;
    bob.ok(5, vec![tag(&["h", &ch]), tag(&["e", &mine.id])], "")
        .await;
    assert_eq!(alice.read(&ch).await, vec![alices]);
    relay.stop().await;
}

async fn bans_and_timeouts(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let owner_pk = owner.pubkey().to_owned();
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        move |s| s.communities[0].owners = vec![owner_pk],
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let mut admin = User::with_keys(&relay, owner).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let ch = admin.create(false).await;
    let note = bob.post(&ch, "before").await;
    // Only community owners moderate the community.
    refused(
        carol
            .send(9042, vec![tag(&["p", bob.keys.pubkey()])], "")
            .await,
        "restricted:",
    );

    admin
        .ok(
            9042,
            vec![tag(&["p", bob.keys.pubkey()]), tag(&["reason", "spam"])],
            "",
        )
        .await;
    // The ban closes bob's session and refuses his AUTH (core/tests/bans.rs); what he
    // signs is refused on any connection, public kinds included.
    let (code, _) = bob.ws.close_frame().await.expect("closed by the ban");
    assert_eq!(code, 1008);
    let mut anon = relay.ws().await;
    let (ok, msg) = anon.publish(&bob.sign(1, vec![], "anything")).await;
    assert!(!ok && msg.starts_with("blocked:"), "{msg}");
    let mut again = relay.ws().await;
    let (ok, msg) = again.auth(&bob.keys).await;
    assert!(!ok && msg.starts_with("blocked:"), "{msg}");
    admin
        .ok(9043, vec![tag(&["p", bob.keys.pubkey()])], "")
        .await;
    let mut bob = User::with_keys(&relay, bob.keys).await;
    bob.post(&ch, "unbanned").await;

    let until = now() + 600;
    admin
        .ok(
            9044,
            vec![
                tag(&["p", carol.keys.pubkey()]),
                tag(&["until", &until.to_string()]),
            ],
            "",
        )
        .await;
    let (ok, msg, _) = carol.send(9, vec![tag(&["h", &ch])], "shh").await;
    assert!(
        !ok && msg == format!("restricted: timed out until {until}"),
        "{msg}"
    );
    assert!(
        carol.read(&ch).await.contains(&note),
        "reads stay allowed during a timeout"
    );
    admin
        .ok(
            9044,
            vec![tag(&["p", carol.keys.pubkey()]), tag(&["until", "0"])],
            "",
        )
        .await;
    carol.post(&ch, "free").await;
    relay.stop().await;
}

async fn channel_ids_are_per_community(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| {
            s.communities.push(CommunitySettings {
                host: "other.test".into(),
                name: "Other".into(),
                owners: vec![],
                open: true,
                policies: Default::default(),
            })
        },
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let keys = Keys::generate();
    let mut here = User::with_keys(&relay, keys.clone()).await;
    let other_host = format!("other.test:{}", relay.addr.port());
    let mut ws = WsClient::connect(relay.addr, &other_host)
        .await
        .expect("connect");
    assert!(ws.auth(&keys).await.0);
    let mut there = User { keys, ws };

    let ch = here.create(false).await;
    let msg = here.post(&ch, "local only").await;
    assert!(
        there.read(&ch).await.is_empty(),
        "nothing leaks across communities"
    );
    // The same channel id is free in the other community, and the same event too.
    there
        .ok(9007, vec![tag(&["h", &ch]), tag(&["name", "twin"])], "")
        .await;
    assert!(there.read(&ch).await.is_empty());
    let (ok, text) = there.ws.publish(&msg).await;
    assert!(
        ok && text.is_empty(),
        "stored fresh in the other community: {text}"
    );
    assert_eq!(there.read(&ch).await, vec![msg]);
    relay.stop().await;
}

async fn group_state_events_follow_channel_access(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create(true).await;
    let docs = alice
        .ws
        .req(
            "g",
            vec![json!({"kinds": [39000, 39001, 39002], "#d": [&private]})],
        )
        .await
        .expect("REQ");
    assert_eq!(docs.len(), 3);
    let relay_pk = relay.running().pubkey().to_owned();
    for doc in &docs {
        assert_eq!(doc.pubkey, relay_pk, "signed by the relay key");
        buzz_nostr::event::verify_signature(doc).expect("valid signature");
    }
    let meta = docs.iter().find(|d| d.kind == 39000).expect("39000");
    assert!(meta.tags.contains(&tag(&["private"])));
    let none = bob
        .ws
        .req(
            "g",
            vec![json!({"kinds": [39000, 39001, 39002], "#d": [&private]})],
        )
        .await
        .expect("REQ");
    assert!(
        none.is_empty(),
        "no state of a private channel for non-members"
    );
    // Clients cannot forge group state.
    let forged = alice.sign(39000, vec![tag(&["d", &private]), tag(&["name", "x"])], "");
    let (ok, msg) = alice.ws.publish(&forged).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    relay.stop().await;
}

async fn reactions_must_target_the_same_channel(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let a = alice.create(false).await;
    let b = alice.create(false).await;
    let msg = alice.post(&a, "in a").await;
    alice
        .ok(7, vec![tag(&["h", &a]), tag(&["e", &msg.id])], "+")
        .await;
    let (ok, text, _) = alice
        .send(7, vec![tag(&["h", &b]), tag(&["e", &msg.id])], "+")
        .await;
    assert!(
        !ok && text == "invalid: target event belongs to a different channel",
        "{text}"
    );
    let (ok, text, _) = alice
        .send(
            40003,
            vec![tag(&["h", &a]), tag(&["e", &"0".repeat(64)])],
            "x",
        )
        .await;
    assert!(!ok && text == "invalid: target event not found", "{text}");
    let (ok, text, _) = alice
        .send(9007, vec![tag(&["h", &a]), tag(&["name", "again"])], "")
        .await;
    assert!(!ok && text == "duplicate: channel already exists", "{text}");
    relay.stop().await;
}

async fn closed_communities_admit_only_added_members(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let owner_pk = owner.pubkey().to_owned();
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        move |s| {
            s.communities[0].open = false;
            s.communities[0].owners = vec![owner_pk];
        },
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let mut admin = User::with_keys(&relay, owner).await;
    let mut dave = User::new(&relay).await;
    let ch = admin.create(false).await;
    let hello = admin.post(&ch, "members only").await;
    let note = admin.ok(1, vec![], "community-wide note").await;

    // Not a member: no writes, no reads — not even of community-wide events.
    let (ok, msg, _) = dave.send(9, vec![tag(&["h", &ch])], "hi").await;
    assert!(
        !ok && msg == "restricted: not a member of this community",
        "{msg}"
    );
    refused(
        dave.send(
            9007,
            vec![
                tag(&["h", &uuid::Uuid::new_v4().to_string()]),
                tag(&["name", "x"]),
            ],
            "",
        )
        .await,
        "restricted:",
    );
    assert!(dave.read(&ch).await.is_empty());
    let notes = dave
        .ws
        .req(&fresh_sub(), vec![json!({"ids": [note.id]})])
        .await
        .expect("REQ");
    assert!(notes.is_empty(), "community-wide events are for members");

    // Added by an owner (9040): a member like any other.
    admin
        .ok(9040, vec![tag(&["p", dave.keys.pubkey()])], "")
        .await;
    assert_eq!(dave.read(&ch).await, vec![hello]);
    dave.post(&ch, "thanks").await;
    let notes = dave
        .ws
        .req(&fresh_sub(), vec![json!({"ids": [note.id]})])
        .await
        .expect("REQ");
    assert_eq!(notes, vec![note]);

    // Removed (9041): out again.
    admin
        .ok(9041, vec![tag(&["p", dave.keys.pubkey()])], "")
        .await;
    let (ok, msg, _) = dave.send(9, vec![tag(&["h", &ch])], "still?").await;
    assert!(
        !ok && msg == "restricted: not a member of this community",
        "{msg}"
    );
    relay.stop().await;
}
