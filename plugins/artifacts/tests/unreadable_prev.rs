//! "Errors MUST NOT disclose inaccessible artifact details" (NIP-AR, Access): a sender who
//! cannot read the channel of the revision its `prev` names — a removed member who kept
//! the id of a private artifact's current revision — gets, for every kind of edit, the
//! answer a `prev` that does not exist gets, byte for byte, over WebSocket and
//! `POST /events`. Readers still get the precise refusals (`tests/edits.rs`).

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::event::Event;
use common::*;

both_backends!(unreadable_prev_answers_like_a_missing_one);

/// The answers to `draft`: the WebSocket `OK` message, then the HTTP status and message
/// for the same event (refused, so never stored: no resubmission).
async fn answers(relay: &TestRelay, user: &mut User, draft: &Draft) -> (String, u16, String) {
    let event = draft.sign(&user.keys);
    let (ok, ws) = user.send(&event).await;
    assert!(!ok, "accepted: {draft:?}");
    let (status, body) = user.post_event(relay, &event).await;
    let http = body["message"].as_str().unwrap_or_default().to_owned();
    (ws, status, http)
}

fn d_of(e: &Event) -> String {
    e.tag_value("d").unwrap_or_default().to_owned()
}

async fn unreadable_prev_answers_like_a_missing_one(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    alice.add_member(&private, &bob.pubkey()).await;
    // Bob's own open channel: he may write there, so the refusals below are about the
    // artifact, not about h.
    let open = bob.create_channel(false).await;
    let live = alice.put(&Draft::create(&private, "secret plan")).await;
    let doomed = alice.put(&Draft::create(&private, "secret doomed")).await;
    let deleted = alice.put(&Draft::after(&doomed, "delete")).await;
    // Bob saw both current revision ids while a member; then he is removed.
    alice.remove_member(&private, &bob.pubkey()).await;

    let homed_in_open = |prev: &Event, op: &str| {
        let mut d = Draft::after(prev, op);
        d.h = open.clone();
        d
    };
    let mut cases: Vec<(&str, Draft)> = Vec::new();
    let mut type_change = homed_in_open(&live, "update");
    type_change.ty = "buzz.doc".into();
    cases.push(("type change", type_change));
    cases.push(("h change (update)", homed_in_open(&live, "update")));
    cases.push(("move out (source check)", homed_in_open(&live, "move")));
    let mut move_in_place = Draft::after(&live, "move");
    move_in_place.h = private.clone();
    cases.push(("move to its own home", move_in_place));
    cases.push(("delete", homed_in_open(&live, "delete")));
    cases.push(("restore of a live one", homed_in_open(&live, "restore")));
    cases.push(("update of a deleted one", homed_in_open(&deleted, "update")));
    cases.push((
        "restore of a deleted one",
        homed_in_open(&deleted, "restore"),
    ));
    let mut restore_type = homed_in_open(&deleted, "restore");
    restore_type.ty = "buzz.doc".into();
    cases.push(("restore with another type", restore_type));

    let mut leaks = Vec::new();
    for (case, draft) in cases {
        // The same edit naming a prev that does not exist, of this identity and of an
        // identity nobody used.
        let mut made_up = draft.clone();
        made_up.prev = Some("ab".repeat(32));
        let mut unused = made_up.clone();
        unused.d = uuid();
        let leaked = answers(&relay, &mut bob, &draft).await;
        let missing = answers(&relay, &mut bob, &made_up).await;
        let never = answers(&relay, &mut bob, &unused).await;
        let named = [&private, &live.id, &deleted.id, &d_of(&live)]
            .iter()
            .any(|secret| leaked.0.contains(secret.as_str()) || leaked.2.contains(secret.as_str()));
        if leaked != missing || leaked != never || named {
            leaks.push(format!(
                "{case}: {leaked:?}, a made-up prev {missing:?}, an unused identity {never:?}"
            ));
        }
    }
    assert!(
        leaks.is_empty(),
        "answers that differ:\n{}",
        leaks.join("\n")
    );

    // Alice, who reads the channel, still gets the precise answer.
    let mut wrong_type = Draft::after(&live, "update");
    wrong_type.ty = "buzz.doc".into();
    let (ok, msg, _) = alice.try_put(&wrong_type).await;
    assert!(!ok && msg.contains("type is immutable"), "{msg}");
    relay.stop().await;
}
