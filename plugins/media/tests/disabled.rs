//! `[plugins.media] enabled = false`: no route is mounted (Blossom paths answer like any
//! unknown path), nothing in NIP-11, and core's routes are untouched.

mod common;

use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{Member, TestBackend, TestRelay};
use buzz_media::MediaPlugin;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_media_plugin_mounts_nothing() {
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "media_disabled",
        |s| {
            if let Some(section) = s.plugins.get_mut("media") {
                section.enabled = Some(false);
            }
        },
        vec![PluginEntry::of::<MediaPlugin>()],
    )
    .await
    .expect("sqlite relay");
    let alice = Member::new(&relay).await;
    let blossom = Blossom::new(&relay);
    let bytes = b"nowhere to go".to_vec();
    let sha = sha256(&bytes);
    assert_eq!(blossom.upload(&alice.keys, &bytes, &[]).await.status, 404);
    assert_eq!(blossom.get(&alice.keys, &sha).await.status, 404);
    assert!(relay.nip11().await.get("media").is_none());
    assert_eq!(
        blossom.send("GET", "/info", None, &[], None).await.status,
        200
    );
    assert_eq!(stored_files(&relay), 0);
    relay.stop().await;
}
