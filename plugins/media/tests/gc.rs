//! Garbage collection on both backends, through `buzz-relay media gc`'s own path (the
//! catalog entry's command on one connection, beside the running relay): a blob a live
//! event names (an `imeta` tag, a URL in content) stays; one nobody names, or only a
//! deleted event named, goes once `orphan_grace_secs` have passed, file and all.

mod common;

use buzz_core::both_backends;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::store::Store;
use buzz_core::testkit::{tag, Member, TestBackend};
use buzz_media::MediaPlugin;
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;

both_backends!(blobs_no_live_event_names_are_collected_after_the_grace);

/// `buzz-relay media gc` with these settings: its summary, or its error.
async fn gc(settings: &Settings, command: &str) -> Result<String, String> {
    let (settings, command) = (settings.clone(), command.to_owned());
    tokio::task::spawn_blocking(move || {
        let entry = PluginEntry::of::<MediaPlugin>();
        let section = settings.plugin("media");
        Store::with_database(&settings.storage.database_url, |mut conn| {
            Ok(entry.run_command(&command, &section, &settings, &mut conn))
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{e:#}"))
    })
    .await
    .expect("gc thread")
}

async fn blobs_no_live_event_names_are_collected_after_the_grace(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = relay(backend, name, &owner, json!({})).await else {
        return;
    };
    let mut alice = Member::new(&relay).await;
    let blossom = Blossom::new(&relay);
    let channel = alice.create_channel(false).await;
    let blob = |text: &str| text.as_bytes().to_vec();
    let (kept, linked, orphan, unlinked) = (
        blob("named by an imeta tag"),
        blob("named by a URL in content"),
        blob("named by nothing"),
        blob("named by a message that was deleted"),
    );
    for bytes in [&kept, &linked, &orphan, &unlinked] {
        assert_eq!(blossom.upload(&alice.keys, bytes, &[]).await.status, 201);
    }
    let imeta = tag(&["imeta", &format!("x {}", sha256(&kept)), "m text/plain"]);
    alice
        .publish_kind(9, vec![tag(&["h", &channel]), imeta])
        .await;
    let url = blossom.url(&format!("/{}.txt", sha256(&linked)));
    alice.post(&channel, &format!("the notes: {url}")).await;
    let gone_url = blossom.url(&format!("/{}", sha256(&unlinked)));
    let message = alice.post(&channel, &format!("oops {gone_url}")).await;
    alice.publish_kind(5, vec![tag(&["e", &message.id])]).await;

    // The console's Plugins pane: usage per community.
    let settings = relay.settings.clone();
    let panel = tokio::task::spawn_blocking(move || {
        let section = settings.plugin("media");
        Store::with_database(&settings.storage.database_url, |mut conn| {
            PluginEntry::of::<MediaPlugin>().admin_panel(&section, &mut conn)
        })
    })
    .await
    .expect("panel thread")
    .expect("panel");
    let size: usize = [&kept, &linked, &orphan, &unlinked]
        .iter()
        .map(|b| b.len())
        .sum();
    let row = vec!["localhost".to_owned(), "4".to_owned(), size.to_string()];
    assert_eq!(panel.tables[0].rows, vec![row]);

    // Within the grace (a day by default) nothing goes.
    let summary = gc(&relay.settings, "gc").await.expect("gc runs");
    assert!(summary.starts_with("media gc: 0 blobs"), "{summary}");
    assert_eq!(stored_files(&relay), 4);

    let mut now_settings = relay.settings.clone();
    if let Some(section) = now_settings.plugins.get_mut("media") {
        section.options.insert("orphan_grace_secs".into(), json!(0));
    }
    let summary = gc(&now_settings, "gc").await.expect("gc runs");
    assert!(summary.starts_with("media gc: 2 blobs"), "{summary}");
    assert_eq!(stored_files(&relay), 2);
    for bytes in [&kept, &linked] {
        assert_eq!(blossom.get(&alice.keys, &sha256(bytes)).await.status, 200);
    }
    for bytes in [&orphan, &unlinked] {
        blossom.get(&alice.keys, &sha256(bytes)).await.refused(404);
    }
    // Listing no longer shows them, and uploading one again starts it afresh.
    let listed = blossom
        .list(&alice.keys, alice.keys.pubkey(), "")
        .await
        .json();
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    assert_eq!(blossom.upload(&alice.keys, &orphan, &[]).await.status, 201);

    let unknown = gc(&relay.settings, "compact")
        .await
        .expect_err("no such command");
    assert!(unknown.contains("it has: gc"), "{unknown}");
    relay.stop().await;
}
