//! Channel rules outside clients broke (issue #40): privacy and roles in the other
//! spelling clients use, roles that never drop by omission, a channel that always keeps
//! an owner, edits by their author only and archived channels that take no new content.
//! Both backends, over the wire.

use buzz_core::both_backends;

use buzz_core::testkit::{tag, Member as User, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(
    privacy_and_roles_in_the_other_spelling,
    roles_never_drop_by_omission_and_a_channel_keeps_an_owner,
    only_authors_edit_and_archived_channels_take_no_new_content,
);

/// What these suites ask of a member beyond the testkit's.
trait Rules {
    /// `(pubkey, role)` of every member, from the channel's relay-signed 39002.
    async fn roles(&mut self, channel: &str) -> Vec<(String, String)>;
    /// The role of `who` in `channel`, if a member.
    async fn role_of(&mut self, channel: &str, who: &str) -> Option<String>;
}

impl Rules for User {
    async fn roles(&mut self, channel: &str) -> Vec<(String, String)> {
        let sub = uuid::Uuid::new_v4().simple().to_string();
        let docs = self
            .ws
            .req(&sub, vec![json!({"kinds": [39002], "#d": [channel]})])
            .await
            .expect("REQ");
        assert_eq!(docs.len(), 1, "exactly one current 39002");
        docs[0]
            .tags
            .iter()
            .filter(|t| t.first().map(String::as_str) == Some("p"))
            .map(|t| (t[1].clone(), t.get(2).cloned().unwrap_or_default()))
            .collect()
    }

    async fn role_of(&mut self, channel: &str, who: &str) -> Option<String> {
        self.roles(channel)
            .await
            .into_iter()
            .find(|(pk, _)| pk == who)
            .map(|(_, role)| role)
    }
}

/// `["visibility","private"]` makes a private channel (never a public one), an unknown
/// visibility is refused naming the supported tags, and `["role", r]` beside a bare
/// `["p", pk]` sets the role.
async fn privacy_and_roles_in_the_other_spelling(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let unknown = bob
        .refusal(9021, vec![tag(&["h", &uuid::Uuid::new_v4().to_string()])])
        .await;

    let private = alice
        .create_channel_with(&[&["visibility", "private"]])
        .await;
    alice.publish_kind(9, vec![tag(&["h", &private])]).await;
    assert_eq!(
        bob.refusal(9021, vec![tag(&["h", &private])]).await,
        unknown,
        "a channel created with [\"visibility\",\"private\"] is private"
    );
    let sub = uuid::Uuid::new_v4().simple().to_string();
    let seen = bob
        .ws
        .req(&sub, vec![json!({"kinds": [9], "#h": [private]})])
        .await
        .expect("REQ");
    assert!(seen.is_empty(), "an outsider reads nothing: {seen:?}");
    let public = alice
        .create_channel_with(&[&["visibility", "public"]])
        .await;
    bob.publish_kind(9021, vec![tag(&["h", &public])]).await;

    let id = uuid::Uuid::new_v4().to_string();
    let msg = alice
        .refusal(9007, vec![tag(&["h", &id]), tag(&["visibility", "secret"])])
        .await;
    assert!(
        msg.starts_with("invalid: ") && msg.contains("[\"private\"]"),
        "{msg}"
    );
    let msg = alice
        .refusal(
            9007,
            vec![
                tag(&["h", &id]),
                tag(&["private"]),
                tag(&["visibility", "public"]),
            ],
        )
        .await;
    assert!(msg.starts_with("invalid: "), "{msg}");
    // The refused 9007s left nothing: the id is still free.
    alice.publish_kind(9007, vec![tag(&["h", &id])]).await;

    // A 9002 takes the same spelling.
    alice
        .publish_kind(
            9002,
            vec![tag(&["h", &public]), tag(&["visibility", "private"])],
        )
        .await;
    let carol = User::new(&relay).await;
    let mut carol = carol;
    assert_eq!(
        carol.refusal(9021, vec![tag(&["h", &public])]).await,
        unknown
    );

    let h = tag(&["h", &private]);
    let bob_pk = bob.pubkey();
    alice
        .publish_kind(
            9000,
            vec![h.clone(), tag(&["p", &bob_pk]), tag(&["role", "admin"])],
        )
        .await;
    assert_eq!(
        alice.role_of(&private, &bob_pk).await.as_deref(),
        Some("admin")
    );
    for bad in [
        vec![
            h.clone(),
            tag(&["p", &bob_pk, "member"]),
            tag(&["role", "admin"]),
        ],
        vec![h.clone(), tag(&["p", &bob_pk]), tag(&["role", "king"])],
    ] {
        let msg = alice.refusal(9000, bad).await;
        assert!(
            msg.starts_with("invalid: ") && msg.contains("role"),
            "{msg}"
        );
    }
    assert_eq!(
        alice.role_of(&private, &bob_pk).await.as_deref(),
        Some("admin")
    );
    relay.stop().await;
}

/// A 9000 without a role never lowers a role; the last owner cannot be demoted,
/// removed or leave, and refusals change nothing.
async fn roles_never_drop_by_omission_and_a_channel_keeps_an_owner(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel_with(&[&["private"]]).await;
    let h = tag(&["h", &ch]);
    let (a, b) = (alice.pubkey(), bob.pubkey());

    alice
        .publish_kind(9000, vec![h.clone(), tag(&["p", &b, "owner"])])
        .await;
    // Bob's own 9000 with no role (a client re-adding itself) keeps him owner.
    bob.publish_kind(9000, vec![h.clone(), tag(&["p", &b])])
        .await;
    assert_eq!(alice.role_of(&ch, &b).await.as_deref(), Some("owner"));
    // A plain member named without a role stays a member; a guest stays a guest.
    let carol = Keys::generate();
    let c = carol.pubkey().to_owned();
    alice
        .publish_kind(9000, vec![h.clone(), tag(&["p", &c, "guest"])])
        .await;
    alice
        .publish_kind(9000, vec![h.clone(), tag(&["p", &c])])
        .await;
    assert_eq!(alice.role_of(&ch, &c).await.as_deref(), Some("guest"));

    // Two owners: one may step down.
    bob.publish_kind(9000, vec![h.clone(), tag(&["p", &b, "member"])])
        .await;
    assert_eq!(alice.role_of(&ch, &b).await.as_deref(), Some("member"));

    // Alice is the last owner now.
    for (kind, tags) in [
        (9000, vec![h.clone(), tag(&["p", &a, "admin"])]),
        (9001, vec![h.clone(), tag(&["p", &a])]),
        (9022, vec![h.clone()]),
    ] {
        let msg = alice.refusal(kind, tags).await;
        assert!(
            msg.starts_with("restricted: ") && msg.contains("last owner"),
            "kind {kind}: {msg}"
        );
    }
    assert_eq!(alice.role_of(&ch, &a).await.as_deref(), Some("owner"));

    // With another owner she may go.
    alice
        .publish_kind(9000, vec![h.clone(), tag(&["p", &b, "owner"])])
        .await;
    alice.publish_kind(9022, vec![h.clone()]).await;
    assert_eq!(bob.role_of(&ch, &a).await, None);
    let msg = bob.refusal(9001, vec![h.clone(), tag(&["p", &b])]).await;
    assert!(msg.contains("last owner"), "{msg}");
    relay.stop().await;
}

/// Only a message's author edits it; an archived channel takes no messages, reactions
/// or edits, while authors may still delete.
async fn only_authors_edit_and_archived_channels_take_no_new_content(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel_with(&[]).await;
    let h = tag(&["h", &ch]);
    bob.publish_kind(9021, vec![h.clone()]).await;
    let m = bob.publish_kind(9, vec![h.clone()]).await;
    let e = tag(&["e", &m.id]);

    let msg = alice.refusal(40_003, vec![h.clone(), e.clone()]).await;
    assert!(
        msg.starts_with("restricted: ") && msg.contains("author"),
        "{msg}"
    );
    bob.publish_kind(40_003, vec![h.clone(), e.clone()]).await;
    alice.publish_kind(7, vec![h.clone(), e.clone()]).await;

    alice
        .publish_kind(9002, vec![h.clone(), tag(&["archived", "true"])])
        .await;
    for kind in [7, 40_003] {
        let msg = bob.refusal(kind, vec![h.clone(), e.clone()]).await;
        assert_eq!(msg, "invalid: channel is archived", "kind {kind}");
    }
    assert_eq!(
        bob.refusal(9, vec![h.clone()]).await,
        "invalid: channel is archived"
    );
    bob.publish_kind(5, vec![h.clone(), e.clone()]).await;
    relay.stop().await;
}
