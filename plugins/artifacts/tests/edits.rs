//! "Identity and edits", "Access", "Moving and deleting": the rules every revision after
//! the create must follow, checked over the wire on both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use common::*;
use serde_json::json;

both_backends!(
    lifecycle_follows_the_prev_rules,
    stale_prev_conflicts_and_resubmission_succeeds,
    conflicts_disclose_nothing,
    root_must_anchor_in_h,
    write_permission_is_the_kind9_decision
);

fn d_of(e: &buzz_nostr::event::Event) -> String {
    e.tag_value("d").unwrap_or_default().to_owned()
}

async fn refused(user: &mut User, draft: &Draft, prefix: &str, text: &str) {
    let (ok, msg, event) = user.try_put(draft).await;
    assert!(!ok, "accepted: {draft:?}");
    assert!(
        msg.starts_with(prefix) && msg.contains(text),
        "wanted {prefix} …{text}…, got {msg}"
    );
    let _ = event;
}

async fn lifecycle_follows_the_prev_rules(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let a = alice.create_channel(false).await;
    let b = alice.create_channel(false).await;
    let v1 = alice.put(&Draft::create(&a, "one")).await;
    let d = d_of(&v1);

    // An update keeps h and type.
    let mut wrong_h = Draft::after(&v1, "update");
    wrong_h.h = b.clone();
    refused(&mut alice, &wrong_h, "invalid:", "keeps h; use op=move").await;
    let mut wrong_type = Draft::after(&v1, "update");
    wrong_type.ty = "buzz.doc".into();
    refused(&mut alice, &wrong_type, "invalid:", "type is immutable").await;
    // A move changes h; restore needs a deletion first.
    refused(
        &mut alice,
        &Draft::after(&v1, "move"),
        "invalid:",
        "a move changes h",
    )
    .await;
    refused(
        &mut alice,
        &Draft::after(&v1, "restore"),
        "invalid:",
        "only a deleted",
    )
    .await;

    let v2 = alice
        .put(&Draft::after(&v1, "update").content("{\"v\":2}"))
        .await;
    let mut to_b = Draft::after(&v2, "move");
    to_b.h = b.clone();
    let v3 = alice.put(&to_b).await;
    let v4 = alice.put(&Draft::after(&v3, "delete")).await;
    // Deleted: out of current state; a lookup by d still returns the deletion.
    assert!(alice.current(&relay, json!({"#d": [d]})).await.is_empty());
    assert_eq!(
        ids(&alice.history(&relay, &d).await),
        ids(&[v1.clone(), v2.clone(), v3.clone(), v4.clone()])
    );
    // Only restore, with the deletion's h.
    refused(
        &mut alice,
        &Draft::after(&v4, "update"),
        "invalid:",
        "only op=restore",
    )
    .await;
    let mut moved_restore = Draft::after(&v4, "restore");
    moved_restore.title = Some("back".into());
    moved_restore.h = a.clone();
    refused(&mut alice, &moved_restore, "invalid:", "keeps h").await;
    let mut restore = Draft::after(&v4, "restore").with("status", "open");
    restore.title = Some("back".into());
    let v5 = alice.put(&restore).await;
    assert_eq!(
        ids(&alice.current(&relay, json!({"#d": [d]})).await),
        vec![v5.id.clone()]
    );
    // The identity is never reused.
    let mut again = Draft::create(&a, "reuse");
    again.d = d.clone();
    refused(&mut alice, &again, "conflict:", "identity is taken").await;
    // Deleting then creating anew with the same d is refused too.
    let v6 = alice.put(&Draft::after(&v5, "delete")).await;
    refused(&mut alice, &again, "conflict:", "identity is taken").await;
    assert_eq!(alice.history(&relay, &d).await.len(), 6);
    let _ = v6;
    relay.stop().await;
}

async fn stale_prev_conflicts_and_resubmission_succeeds(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(true).await;
    alice.add_member(&ch, &bob.pubkey()).await;
    let v1 = alice.put(&Draft::create(&ch, "shared")).await;
    let v2 = bob
        .put(&Draft::after(&v1, "update").content("{\"by\":\"bob\"}"))
        .await;
    // A different event naming the old prev: conflict, on both transports.
    let stale = Draft::after(&v1, "update").content("{\"by\":\"alice\"}");
    refused(&mut alice, &stale, "conflict:", "not the current revision").await;
    let stale_event = stale.content("{\"by\":\"alice, again\"}").sign(&alice.keys);
    let (status, body) = alice.post_event(&relay, &stale_event).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["accepted"], json!(false));
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("conflict:"),
        "{body}"
    );
    assert_eq!(relay.stored_rows(&stale_event.id).await, 0);

    let v3 = alice.put(&Draft::after(&v2, "update")).await;
    // Resubmitting accepted revisions after later ones: accepted, nothing applied again.
    for (user, event) in [(&mut bob, &v2), (&mut alice, &v1)] {
        let (ok, msg) = user.send(event).await;
        assert!(ok, "{msg}");
        assert!(msg.starts_with("duplicate:"), "{msg}");
    }
    let (status, body) = bob.post_event(&relay, &v2).await;
    assert_eq!(
        (status, body["accepted"].clone()),
        (200, json!(true)),
        "{body}"
    );
    let d = d_of(&v1);
    assert_eq!(
        ids(&alice.current(&relay, json!({"#d": [d]})).await),
        vec![v3.id.clone()]
    );
    assert_eq!(alice.history(&relay, &d).await.len(), 3);

    // Bob loses access: his old revision still answers accepted, revealing nothing new;
    // a new write is refused as any write there would be.
    alice.remove_member(&ch, &bob.pubkey()).await;
    let (ok, msg) = bob.send(&v2).await;
    assert!(ok && msg.starts_with("duplicate:"), "{msg}");
    assert!(!msg.contains(&v3.id) && !msg.contains(&ch), "{msg}");
    let (ok, msg, _) = bob.try_put(&Draft::after(&v3, "update")).await;
    assert!(!ok && !msg.starts_with("conflict:"), "{msg}");
    // Someone else sending bob's revision is not its author: the usual checks apply.
    let carol = User::new(&relay).await;
    let (status, body) = carol.post_event(&relay, &v2).await;
    assert_ne!(status, 200, "{body}");
    relay.stop().await;
}

async fn conflicts_disclose_nothing(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    let open = bob.create_channel(false).await;
    let mut secret = Draft::create(&private, "acquisition of acme");
    secret.ty = "corp.secret-deal".into();
    let secret = alice.put(&secret).await;
    let d = d_of(&secret);

    let leaks = |msg: &str| {
        [
            private.as_str(),
            "acquisition",
            "corp.secret-deal",
            secret.id.as_str(),
        ]
        .iter()
        .any(|s| msg.contains(s))
    };
    // Create with the taken d: only "taken".
    let mut taken = Draft::create(&open, "mine");
    taken.d = d.clone();
    let (ok, msg, _) = bob.try_put(&taken).await;
    assert!(
        !ok && msg == "conflict: this artifact identity is taken",
        "{msg}"
    );
    // Update naming a made-up prev: the same text as for an identity that does not exist.
    let mut guess = Draft::after(&secret, "update");
    guess.h = open.clone();
    guess.prev = Some("ab".repeat(32));
    let (ok, on_taken, _) = bob.try_put(&guess).await;
    let mut unknown = guess.clone();
    unknown.d = uuid();
    let (ok2, on_unknown, _) = bob.try_put(&unknown).await;
    assert!(!ok && !ok2);
    assert_eq!(on_taken, on_unknown);
    assert!(!leaks(&on_taken) && !leaks(&msg), "{on_taken}");
    // Over HTTP too.
    let (status, body) = bob
        .post_event(&relay, &taken.content("{}").sign(&bob.keys))
        .await;
    assert_eq!(status, 409);
    assert!(!leaks(&body.to_string()), "{body}");
    // And bob's queries see nothing of it.
    assert!(bob.current(&relay, json!({})).await.is_empty());
    assert!(bob.history(&relay, &d).await.is_empty());
    relay.stop().await;
}

async fn root_must_anchor_in_h(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let a = alice.create_channel(false).await;
    let b = alice.create_channel(false).await;
    let in_a = alice.post(&a, "anchor").await;
    let in_b = alice.post(&b, "elsewhere").await;
    let reaction = alice
        .publish(
            alice
                .keys
                .sign(7, vec![tag(&["h", &a]), tag(&["e", &in_a.id])], "+", now()),
        )
        .await;

    let mut bad = Draft::create(&a, "t");
    for root in [in_b.id.clone(), reaction.id.clone(), "cd".repeat(32)] {
        bad.root = Some(root);
        refused(&mut alice, &bad, "invalid:", "root must be an existing").await;
    }
    let mut good = Draft::create(&a, "anchored");
    good.root = Some(in_a.id.clone());
    let v1 = alice.put(&good).await;
    // The anchor goes away: edits that keep it still pass.
    alice
        .publish(
            alice
                .keys
                .sign(5, vec![tag(&["h", &a]), tag(&["e", &in_a.id])], "", now()),
        )
        .await;
    let v2 = alice
        .put(&Draft::after(&v1, "update").content("{\"v\":2}"))
        .await;
    // Changing it to a deleted one does not.
    let gone = alice.post(&a, "soon gone").await;
    alice
        .publish(
            alice
                .keys
                .sign(5, vec![tag(&["h", &a]), tag(&["e", &gone.id])], "", now()),
        )
        .await;
    let mut changed = Draft::after(&v2, "update");
    changed.root = Some(gone.id.clone());
    refused(&mut alice, &changed, "invalid:", "root must be").await;
    // A move: root absent or in the destination, never the source's.
    let mut keep_root = Draft::after(&v2, "move");
    keep_root.h = b.clone();
    refused(&mut alice, &keep_root, "invalid:", "root must be").await;
    let mut dest_root = keep_root.clone();
    dest_root.root = Some(in_b.id.clone());
    let v3 = alice.put(&dest_root).await;
    // A delete keeps the root.
    let mut drop_root = Draft::after(&v3, "delete");
    drop_root.root = None;
    refused(&mut alice, &drop_root, "invalid:", "keeps the current root").await;
    alice.put(&Draft::after(&v3, "delete")).await;
    relay.stop().await;
}

async fn write_permission_is_the_kind9_decision(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut owner = User::new(&relay).await;
    let mut alice = User::new(&relay).await;
    let private = owner.create_channel(true).await;
    let open = owner.create_channel(false).await;
    owner.add_member(&private, &alice.pubkey()).await;
    let v1 = alice.put(&Draft::create(&private, "in private")).await;

    // Refused exactly as a kind-9 message there would be.
    let outsider = User::new(&relay).await;
    let mut outsider = outsider;
    let kind9 = outsider
        .send(
            &outsider
                .keys
                .sign(9, vec![tag(&["h", &private])], "hi", now()),
        )
        .await;
    let (ok, msg, _) = outsider.try_put(&Draft::create(&private, "sneak")).await;
    assert!(!kind9.0 && !ok);
    assert_eq!(msg, kind9.1, "same decision as kind 9");

    // A move needs write in the source too: in an archived channel she still reads,
    // alice cannot move her artifact out, though she may write the destination.
    let shelf = owner.create_channel(true).await;
    owner.add_member(&shelf, &alice.pubkey()).await;
    let shelved = alice.put(&Draft::create(&shelf, "on the shelf")).await;
    owner
        .publish(owner.keys.sign(
            9002,
            vec![tag(&["h", &shelf]), tag(&["archived", "true"])],
            "",
            now(),
        ))
        .await;
    let kind9 = alice
        .send(&alice.keys.sign(9, vec![tag(&["h", &shelf])], "hi", now()))
        .await;
    let mut out = Draft::after(&shelved, "move");
    out.h = open.clone();
    let (ok, msg, event) = alice.try_put(&out).await;
    assert!(!kind9.0 && !ok, "{msg}");
    assert_eq!(msg, kind9.1, "same decision as kind 9 in the source");
    assert_eq!(relay.stored_rows(&event.id).await, 0);
    // Removed from the private channel she no longer reads the source: the move is
    // answered like a prev that does not exist (tests/unreadable_prev.rs).
    owner.remove_member(&private, &alice.pubkey()).await;
    let kind9 = alice
        .send(&alice.keys.sign(9, vec![tag(&["h", &private])], "hi", now()))
        .await;
    let mut out = Draft::after(&v1, "move");
    out.h = open.clone();
    let (ok, msg, event) = alice.try_put(&out).await;
    assert!(
        !ok && msg.starts_with("conflict: prev is not the current"),
        "{msg}"
    );
    assert_eq!(relay.stored_rows(&event.id).await, 0);
    // And in the destination: a move into a channel she cannot write is refused.
    let v2 = owner.put(&Draft::after(&v1, "update")).await;
    let mut alices_own = Draft::create(&open, "mine");
    alices_own.d = uuid();
    let mine = alice.put(&alices_own).await;
    let mut into_private = Draft::after(&mine, "move");
    into_private.h = private.clone();
    let (ok, msg, _) = alice.try_put(&into_private).await;
    assert!(!ok && msg == kind9.1, "{msg}");

    // Archived: refused like kind 9.
    owner
        .publish(owner.keys.sign(
            9002,
            vec![tag(&["h", &private]), tag(&["archived", "true"])],
            "",
            now(),
        ))
        .await;
    let kind9 = owner
        .send(&owner.keys.sign(9, vec![tag(&["h", &private])], "hi", now()))
        .await;
    let (ok, msg, _) = owner.try_put(&Draft::after(&v2, "update")).await;
    assert!(!kind9.0 && !ok);
    assert_eq!(msg, kind9.1, "archived: same decision as kind 9");
    relay.stop().await;
}
