//! "Moving and deleting": a move stores the arrival in the destination and a relay-signed
//! kind-45011 removal in the source in one transaction; each is delivered live only
//! through its own channel's access; earlier revisions stay under their original channel.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use buzz_nostr::event::{verify_signature, Event};
use common::*;
use serde_json::json;

both_backends!(move_leaves_a_removal_and_keeps_each_audience);

/// Live events of subscription `sub` on `user`'s socket until the kind-9 `sentinel`.
async fn live_until(user: &mut User, sub: &str, sentinel: &Event) -> Vec<Event> {
    let mut got = Vec::new();
    loop {
        let v = user
            .ws
            .recv_where(|v| v[0] == "EVENT" && v[1] == sub)
            .await
            .expect("live event arrives");
        let event: Event = serde_json::from_value(v[2].clone()).expect("event");
        if event.id == sentinel.id {
            return got;
        }
        got.push(event);
    }
}

async fn subscribe(user: &mut User, channel: &str) -> String {
    let id = sub();
    // Stored matches first (none yet), then live.
    let stored = user
        .ws
        .req(
            &id,
            vec![json!({"kinds": [9, 45010, 45011], "#h": [channel]})],
        )
        .await
        .expect("REQ");
    assert!(stored.is_empty(), "{stored:?}");
    id
}

async fn move_leaves_a_removal_and_keeps_each_audience(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut owner = User::new(&relay).await;
    let mut carol = User::new(&relay).await; // reads the source only
    let mut bob = User::new(&relay).await; // reads the destination only
    let source = owner.create_channel(true).await;
    let dest = owner.create_channel(true).await;
    owner.add_member(&source, &carol.pubkey()).await;
    owner.add_member(&dest, &bob.pubkey()).await;
    let carol_sub = subscribe(&mut carol, &source).await;
    let bob_sub = subscribe(&mut bob, &dest).await;
    // Bob also asks for the source: his scope must still withhold it.
    let bob_wide = sub();
    bob.ws
        .req(&bob_wide, vec![json!({"kinds": [45010, 45011]})])
        .await
        .expect("REQ");

    let v1 = owner
        .put(&Draft::create(&source, "travelling").with("assignee", "x"))
        .await;
    let v2 = owner.put(&Draft::after(&v1, "update")).await;
    let mut mv = Draft::after(&v2, "move");
    mv.h = dest.clone();
    let v3 = owner.put(&mv).await;
    let d = v1.tag_value("d").unwrap_or_default().to_owned();
    let in_source = owner.post(&source, "sentinel").await;
    let in_dest = owner.post(&dest, "sentinel").await;

    let carol_saw = live_until(&mut carol, &carol_sub, &in_source).await;
    let kinds: Vec<u32> = carol_saw.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![45_010, 45_010, 45_011], "{carol_saw:?}");
    let marker = carol_saw[2].clone();
    assert_eq!(marker.pubkey, relay.running().pubkey(), "relay-signed");
    verify_signature(&marker).expect("valid signature");
    assert_eq!(
        marker.tags,
        vec![
            tag(&["ar", "1"]),
            tag(&["d", &d]),
            tag(&["h", &source]),
            tag(&["reason", "moved"]),
            tag(&["prev", &v2.id]),
        ],
        "exactly ar/d/h/reason/prev, nothing of the destination"
    );
    assert!(marker.content.is_empty());
    assert!(!marker.to_json().contains(&dest));

    let bob_saw = live_until(&mut bob, &bob_sub, &in_dest).await;
    assert_eq!(ids(&bob_saw), vec![v3.id.clone()], "only the arrival");
    // The community-wide subscription got the arrival and nothing from the source.
    let wide = bob
        .ws
        .recv_where(|v| v[0] == "EVENT" && v[1] == bob_wide.as_str())
        .await
        .expect("arrival");
    assert_eq!(wide[2]["id"], json!(v3.id));

    // Stored: a client that missed live delivery recovers both by replaying.
    let replay = carol
        .req(vec![json!({"kinds": [45011], "#h": [source]})])
        .await
        .expect("REQ");
    assert_eq!(ids(&replay), vec![marker.id.clone()]);
    // Earlier revisions keep their channel's audience.
    assert_eq!(ids(&bob.history(&relay, &d).await), vec![v3.id.clone()]);
    assert_eq!(
        ids(&carol.history(&relay, &d).await),
        vec![v1.id.clone(), v2.id.clone()]
    );
    assert!(carol.current(&relay, json!({"#d": [d]})).await.is_empty());
    assert_eq!(
        ids(&bob.current(&relay, json!({"#assignee": ["x"]})).await),
        vec![v3.id.clone()]
    );
    assert!(bob
        .req(vec![json!({"ids": [v1.id, v2.id]})])
        .await
        .expect("REQ")
        .is_empty());
    // A move back leaves a marker in the destination now acting as source.
    let mut back = Draft::after(&v3, "move");
    back.h = source.clone();
    owner.put(&back).await;
    let markers = bob
        .req(vec![json!({"kinds": [45011], "#h": [dest]})])
        .await
        .expect("REQ");
    assert_eq!(markers.len(), 1);
    assert_eq!(markers[0].tag_value("prev"), Some(v3.id.as_str()));
    let _ = now();
    relay.stop().await;
}
