//! `resolve_thread_roots`: summaries of owning roots from retained metadata, on both
//! backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use common::*;
use serde_json::{json, Value};

both_backends!(owning_roots_are_resolved_after_deletion);

fn resolve(channel: &str, ids: &[&str]) -> Value {
    json!({"resolve_thread_roots": true, "kinds": [39005], "#h": [channel], "ids": ids})
}

/// Check one recovered summary: exact tags naming `root`, and its content.
fn summary_of(relay: &TestRelay, summary: &Event, root: &Event, channel: &str) -> Value {
    let content = overlay(relay, summary, &["e", "d", "h"]);
    assert_eq!(summary.kind, 39005);
    assert_eq!(summary.tags[0][1], root.id);
    assert_eq!(summary.tags[1][1], root.id);
    assert_eq!(summary.tags[2][1], channel);
    content
}

async fn owning_roots_are_resolved_after_deletion(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let private = alice.create_channel(true).await;
    let t = now() - 100;
    let a = alice.post_at(&ch, "a", t).await;
    let a1 = bob.post_reply(&ch, &a, t + 1).await;
    let a2 = alice.post_reply(&ch, &a1, t + 2).await;
    let b = alice.post_at(&ch, "b", t + 3).await;
    let b1 = alice.post_reply(&ch, &b, t + 4).await;
    let lonely = alice.post_at(&ch, "c", t + 5).await;

    // A soft-deleted target still names its root; counts reflect the deletion.
    alice.delete(&ch, &a2, now()).await;
    let got = bob.query(&relay, vec![resolve(&ch, &[&a2.id])]).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        summary_of(&relay, &got[0], &a, &ch),
        json!({"reply_count": 1, "descendant_count": 1, "last_reply_at": t + 1,
            "participants": [bob.pubkey()]})
    );
    // All replies gone: one summary with zero counts, once for both targets.
    bob.delete(&ch, &a1, now()).await;
    for via in [Via::Http, Via::Ws] {
        let got = ask(&relay, &mut bob, via, vec![resolve(&ch, &[&a1.id, &a2.id])])
            .await
            .expect("answered");
        assert_eq!(got.len(), 1, "{via:?}: {got:?}");
        assert_eq!(
            summary_of(&relay, &got[0], &a, &ch),
            json!({"reply_count": 0, "descendant_count": 0, "last_reply_at": null,
                "participants": []})
        );
    }
    // Several roots in target order; nothing for a root itself or a missing id; no
    // bounds; one summary per root across filters.
    let missing = "f".repeat(64);
    let got = bob
        .query(
            &relay,
            vec![
                resolve(&ch, &[&b1.id, &lonely.id, &missing, &a2.id]),
                resolve(&ch, &[&a1.id]),
            ],
        )
        .await;
    assert_eq!(got.len(), 2, "{got:?}");
    summary_of(&relay, &got[0], &b, &ch);
    summary_of(&relay, &got[1], &a, &ch);

    // Scope: another channel's #h, or a channel the reader cannot read.
    let other = alice.create_channel(false).await;
    assert_eq!(
        bob.query(&relay, vec![resolve(&other, &[&b1.id])]).await,
        vec![]
    );
    let secret = alice.post_at(&private, "s", t).await;
    let secret_reply = alice.post_reply(&private, &secret, t + 1).await;
    assert_eq!(
        bob.query(&relay, vec![resolve(&private, &[&secret_reply.id])])
            .await,
        vec![]
    );
    assert_eq!(
        alice
            .query(&relay, vec![resolve(&private, &[&secret_reply.id])])
            .await
            .len(),
        1
    );
    // At most 100 targets per request, across filters.
    let many: Vec<String> = (0..60).map(|i| format!("{i:064x}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let (status, _) = bob
        .http(&relay, vec![resolve(&ch, &many), resolve(&ch, &many)])
        .await;
    assert_eq!(status, 400);
    relay.stop().await;
}
