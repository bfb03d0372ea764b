//! nostr-tools 2 `NegentropySync` (NIP-77, `examples/node-clients/test/nip77-sync.test.mjs`)
//! against a real relay with the sync plugin, over SQLite. Without `node_modules` the test
//! prints one `skipped:` line — and fails when `CI` is set.

mod support;

use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{TestBackend, TestRelay};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_negentropy_sync_against_the_relay() {
    let Some(dir) = support::node_clients_or_skip("node_negentropy_sync_against_the_relay") else {
        return;
    };
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "node_sync",
        |_| {},
        vec![PluginEntry::of::<buzz_sync::SyncPlugin>()],
    )
    .await
    .expect("sqlite relay");
    support::run_suites(
        &dir,
        &["test/nip77-sync.test.mjs"],
        format!("ws://{}", relay.addr),
    )
    .await;
    relay.stop().await;
}
