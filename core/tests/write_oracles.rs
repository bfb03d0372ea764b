//! Write paths are no existence oracles: to someone who cannot read it, an event or a
//! channel answers exactly like a missing one (byte for byte), while readers still get
//! the precise refusal. Both backends, over the wire.

use buzz_core::both_backends;

use buzz_core::testkit::{tag, Member as User, TestBackend, TestRelay};

both_backends!(
    events_in_unreadable_channels_read_as_missing,
    unreadable_channels_read_as_missing_to_join_and_create,
);

/// Events pointing at `target` from channel `from`: reaction, edit, reply, kind 5 and a
/// moderator's removal (9005; the author owns `from`).
fn pointing(from: &str, target: &str) -> Vec<(u32, Vec<Vec<String>>)> {
    let h = tag(&["h", from]);
    let e = tag(&["e", target]);
    vec![
        (7, vec![h.clone(), e.clone()]),
        (40_003, vec![h.clone(), e.clone()]),
        (9, vec![h.clone(), tag(&["e", target, "", "reply"])]),
        (5, vec![h.clone(), e.clone()]),
        (9005, vec![h, e]),
    ]
}

async fn events_in_unreadable_channels_read_as_missing(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    alice
        .publish_kind(
            9000,
            vec![
                tag(&["h", &private]),
                tag(&["p", &carol.pubkey(), "member"]),
            ],
        )
        .await;
    let secret = alice.publish_kind(9, vec![tag(&["h", &private])]).await.id;
    let random = hex::encode(rand_bytes());
    // Each writer acts from a channel of their own (so every kind is theirs to send).
    let bobs = bob.create_channel(false).await;
    let carols = carol.create_channel(false).await;

    for ((kind, at_secret), (_, at_random)) in pointing(&bobs, &secret)
        .into_iter()
        .zip(pointing(&bobs, &random))
    {
        let hidden = bob.refusal(kind, at_secret).await;
        let missing = bob.refusal(kind, at_random).await;
        assert_eq!(
            hidden, missing,
            "kind {kind}: an unreadable target is an oracle"
        );
    }
    // A reader of the private channel learns the precise reason.
    for (kind, tags) in pointing(&carols, &secret) {
        let precise = carol.refusal(kind, tags).await;
        assert!(
            precise.ends_with("belongs to a different channel"),
            "kind {kind}: {precise}"
        );
    }
    relay.stop().await;
}

async fn unreadable_channels_read_as_missing_to_join_and_create(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    alice
        .publish_kind(
            9000,
            vec![
                tag(&["h", &private]),
                tag(&["p", &carol.pubkey(), "member"]),
            ],
        )
        .await;
    let unknown = uuid::Uuid::new_v4().to_string();

    // Join: a private channel is as unknown as a missing one to an outsider.
    let hidden = bob.refusal(9021, vec![tag(&["h", &private])]).await;
    let missing = bob.refusal(9021, vec![tag(&["h", &unknown])]).await;
    assert_eq!(hidden, missing, "join");
    // Other writes into it, too.
    for kind in [9, 9002, 9022] {
        let hidden = bob
            .refusal(kind, vec![tag(&["h", &private]), tag(&["name", "x"])])
            .await;
        let missing = bob
            .refusal(kind, vec![tag(&["h", &unknown]), tag(&["name", "x"])])
            .await;
        assert_eq!(hidden, missing, "kind {kind}");
    }

    // Create with a taken id: an outsider cannot tell a live private channel from a
    // deleted one (which nobody can read), and is not told that a channel exists.
    let gone = alice.create_channel(false).await;
    alice.publish_kind(9008, vec![tag(&["h", &gone])]).await;
    let create = |id: &str| vec![tag(&["h", id]), tag(&["name", "mine"])];
    let hidden = bob.refusal(9007, create(&private)).await;
    let deleted = bob.refusal(9007, create(&gone)).await;
    assert_eq!(hidden, deleted, "create with a taken id");
    assert!(
        !hidden.contains("exist") && !hidden.starts_with("duplicate:"),
        "{hidden}"
    );
    // A member still gets the precise answers.
    assert_eq!(
        carol.refusal(9007, create(&private)).await,
        "duplicate: channel already exists"
    );
    // NIP-29: a member's join is a duplicate, whatever the channel's join rules.
    assert_eq!(
        carol.refusal(9021, vec![tag(&["h", &private])]).await,
        "duplicate: already a member of this channel"
    );
    relay.stop().await;
}

fn rand_bytes() -> [u8; 32] {
    let mut id = [0u8; 32];
    id[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    id[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    id
}
