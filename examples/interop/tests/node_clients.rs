//! The node suites of `examples/node-clients` (NDK 3 and nostr-tools 2 `SimplePool`,
//! installed from the committed lockfile with `npm ci --prefix examples/node-clients`)
//! run against a real relay started here, over SQLite. Without `node_modules` the test
//! prints one `skipped:` line — and fails when `CI` is set.

mod support;

use buzz_core::testkit::{TestBackend, TestRelay};

/// Every node suite, run by `node --test` in one process.
const SUITES: [&str; 2] = ["test/nostr-tools.test.mjs", "test/ndk.test.mjs"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_clients_against_the_relay() {
    let Some(dir) = support::node_clients_or_skip("node_clients_against_the_relay") else {
        return;
    };
    let relay = TestRelay::start(TestBackend::Sqlite, "node_clients")
        .await
        .expect("sqlite relay");
    support::run_suites(&dir, &SUITES, format!("ws://{}", relay.addr)).await;
    relay.stop().await;
}
