//! blossom-client-sdk (`examples/node-clients/test/blossom.test.mjs`) against a real
//! relay with the media plugin, over SQLite: upload, list, download and delete with the
//! SDK's own authorization. Without `node_modules` the test prints one `skipped:` line —
//! and fails when `CI` is set.

mod support;

use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{TestBackend, TestRelay};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blossom_client_sdk_against_the_relay() {
    let Some(dir) = support::node_clients_or_skip("blossom_client_sdk_against_the_relay") else {
        return;
    };
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "node_media",
        |_| {},
        vec![PluginEntry::of::<buzz_media::MediaPlugin>()],
    )
    .await
    .expect("sqlite relay");
    support::run_suites(
        &dir,
        &["test/blossom.test.mjs"],
        format!("ws://{}", relay.addr),
    )
    .await;
    relay.stop().await;
}
