//! A disabled plugin leaves no trace: kind 45010 is an ordinary stored event (as on a
//! relay without the plugin), artifact queries are not answered, NIP-11 says nothing —
//! but the relay-authored 45011 stays refused.

use buzz_core::both_backends;
mod common;

use buzz_artifacts::{ArtifactsPlugin, NAME};
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::disabled::{assert_kinds_refused, disable};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use common::*;
use serde_json::json;

both_backends!(disabled_plugin_treats_45010_as_before);

async fn disabled_plugin_treats_45010_as_before(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        disable(NAME),
        vec![PluginEntry::of::<ArtifactsPlugin>()],
    )
    .await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    // Not an envelope at all, and a "conflicting" pair: both stored as plain events.
    let plain = alice
        .publish(
            alice
                .keys
                .sign(45_010, vec![tag(&["h", &ch])], "anything", now()),
        )
        .await;
    let v1 = alice
        .put(&Draft::create(&ch, "x").with("assignee", "me"))
        .await;
    let mut twin = Draft::create(&ch, "y");
    twin.d = v1.tag_value("d").unwrap_or_default().to_owned();
    let twin = alice.put(&twin).await;
    // Kind 5 deletes a 45010 as it deletes anything of its author's.
    alice
        .publish(
            alice
                .keys
                .sign(5, vec![tag(&["h", &ch]), tag(&["e", &plain.id])], "", now()),
        )
        .await;
    // Plain filters serve them, multi-character tags included.
    let got = alice
        .req(vec![json!({"kinds": [45010], "#assignee": ["me"]})])
        .await
        .expect("REQ");
    assert_eq!(ids(&got), vec![v1.id.clone()]);
    // An artifact query is served by core as the plain filter it also is: the
    // `artifact` key is unknown to it, so every 45010 in reach matches.
    let got = alice
        .query(
            &relay,
            vec![json!({"artifact": "current", "#d": [twin.tag_value("d")]})],
        )
        .await;
    assert_eq!(
        sorted(ids(&got)),
        sorted(vec![v1.id.clone(), twin.id.clone()])
    );
    // The relay-authored kind stays refused.
    assert_kinds_refused(
        &mut alice.ws,
        &alice.keys,
        &[45_011],
        vec![tag(&["h", &ch])],
    )
    .await;
    // NIP-11 says nothing of artifacts.
    let (_, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert!(info.get(NAME).is_none(), "{info}");
    assert!(!info["plugins"]
        .as_array()
        .is_some_and(|p| p.contains(&json!(NAME))));
    relay.stop().await;
}
