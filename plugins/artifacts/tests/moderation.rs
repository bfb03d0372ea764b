//! "Moderation and retention": a kind-9005 removal redacts a revision from every surface
//! yet it stays the valid prev; redacting the current revision retires the artifact.
//! And revisions are not conversation messages: no thread metadata, no count changes.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use buzz_nostr::event::Event;
use common::*;
use serde_json::json;

both_backends!(
    redaction_withholds_but_keeps_prev,
    revisions_are_not_conversation_messages
);

async fn remove(owner: &mut User, channel: &str, target: &Event) {
    owner
        .publish(owner.keys.sign(
            9005,
            vec![tag(&["h", channel]), tag(&["e", &target.id])],
            "",
            now(),
        ))
        .await;
}

async fn redaction_withholds_but_keeps_prev(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut owner = User::new(&relay).await;
    let mut alice = User::new(&relay).await;
    let ch = owner.create_channel(false).await;
    let v1 = alice
        .put(&Draft::create(&ch, "x").with("status", "open"))
        .await;
    let v2 = alice.put(&Draft::after(&v1, "update")).await;
    let d = v1.tag_value("d").unwrap_or_default().to_owned();

    // An earlier revision: gone from history and plain REQ; current unchanged.
    remove(&mut owner, &ch, &v1).await;
    assert_eq!(ids(&alice.history(&relay, &d).await), vec![v2.id.clone()]);
    assert!(alice
        .req(vec![json!({"ids": [v1.id]})])
        .await
        .expect("REQ")
        .is_empty());
    assert_eq!(
        ids(&alice.current(&relay, json!({"#d": [d]})).await),
        vec![v2.id.clone()]
    );
    // Resubmitting it still answers accepted: it was accepted.
    let (ok, msg) = alice.send(&v1).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");

    // The current revision: the artifact retires from current state …
    let v3 = alice.put(&Draft::after(&v2, "update")).await;
    remove(&mut owner, &ch, &v3).await;
    assert!(alice.current(&relay, json!({"#d": [d]})).await.is_empty());
    assert!(alice
        .current(&relay, json!({"#status": ["open"]}))
        .await
        .is_empty());
    assert_eq!(ids(&alice.history(&relay, &d).await), vec![v2.id.clone()]);
    // … a create cannot take its identity, an edit naming an older prev conflicts …
    let mut reuse = Draft::create(&ch, "again");
    reuse.d = d.clone();
    let (ok, msg, _) = alice.try_put(&reuse).await;
    assert!(!ok && msg.starts_with("conflict:"), "{msg}");
    let stale = Draft::after(&v2, "update").content("{\"stale\":true}");
    let (ok, msg, _) = alice.try_put(&stale).await;
    assert!(!ok && msg.starts_with("conflict:"), "{msg}");
    // … but its id stays the valid prev for a client that holds it.
    let v4 = alice.put(&Draft::after(&v3, "update")).await;
    assert_eq!(
        ids(&alice.current(&relay, json!({"#status": ["open"]})).await),
        vec![v4.id.clone()]
    );
    assert_eq!(
        ids(&alice.history(&relay, &d).await),
        vec![v2.id.clone(), v4.id.clone()]
    );
    relay.stop().await;
}

async fn revisions_are_not_conversation_messages(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let root = alice.post(&ch, "let's track this").await;
    let reply = alice
        .publish(alice.keys.sign(
            9,
            vec![tag(&["h", &ch]), tag(&["e", &root.id, "", "reply"])],
            "on it",
            now(),
        ))
        .await;
    let before = relay.thread_row(&root.id).await.expect("root row");
    assert_eq!(before.reply_count, 1);

    let mut draft = Draft::create(&ch, "tracked").with("p", &alice.pubkey());
    draft.root = Some(root.id.clone());
    let v1 = alice.put(&draft).await;
    let v2 = alice.put(&Draft::after(&v1, "update")).await;
    let v3 = alice.put(&Draft::after(&v2, "delete")).await;

    let after = relay.thread_row(&root.id).await.expect("root row");
    assert_eq!(
        (
            after.reply_count,
            after.descendant_count,
            after.last_reply_at
        ),
        (
            before.reply_count,
            before.descendant_count,
            before.last_reply_at
        ),
        "revisions change no counts"
    );
    for revision in [&v1, &v2, &v3] {
        assert!(
            relay.thread_row(&revision.id).await.is_none(),
            "no thread metadata for a revision"
        );
    }
    assert!(relay.thread_row(&reply.id).await.is_some());
    relay.stop().await;
}
