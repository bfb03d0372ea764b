//! nostr-tools 2 `NegentropySync` (NIP-77, `examples/node-clients/test/nip77-sync.test.mjs`,
//! installed from the committed lockfile with `npm ci --prefix examples/node-clients`)
//! against a real relay with the sync plugin, over SQLite. Without `node_modules` the test
//! prints one `skipped:` line — and fails when `CI` is set.

use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{TestBackend, TestRelay};
use std::path::PathBuf;
use std::time::Duration;

const SUITE: &str = "test/nip77-sync.test.mjs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_negentropy_sync_against_the_relay() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../node-clients");
    if !dir.join("node_modules").is_dir() {
        let why =
            "examples/node-clients/node_modules is missing (npm ci --prefix examples/node-clients)";
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        println!("skipped: node_negentropy_sync_against_the_relay: {why}");
        return;
    }
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "node_sync",
        |_| {},
        vec![PluginEntry::of::<buzz_sync::SyncPlugin>()],
    )
    .await
    .expect("sqlite relay");
    let run = tokio::process::Command::new("node")
        .arg("--test")
        .arg("--test-timeout=20000")
        .arg("--test-force-exit")
        .arg(SUITE)
        .current_dir(&dir)
        .env("BUZZ_RELAY_URL", format!("ws://{}", relay.addr))
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the node suite finishes within 120 s")
        .expect("node runs (is Node.js 20+ installed?)");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "node suite failed: {}",
        output.status
    );
    relay.stop().await;
}
