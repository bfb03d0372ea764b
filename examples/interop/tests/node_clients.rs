//! The node suites of `examples/node-clients` (NDK 3 and nostr-tools 2 `SimplePool`,
//! installed from the committed lockfile with `npm ci --prefix examples/node-clients`)
//! run against a real relay started here, over SQLite. Without `node_modules` the test
//! prints one `skipped:` line — and fails when `CI` is set.

use buzz_core::testkit::{TestBackend, TestRelay};
use std::path::PathBuf;
use std::time::Duration;

/// Every node suite, run by `node --test` in one process.
const SUITES: [&str; 2] = ["test/nostr-tools.test.mjs", "test/ndk.test.mjs"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_clients_against_the_relay() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../node-clients");
    if !dir.join("node_modules").is_dir() {
        let why =
            "examples/node-clients/node_modules is missing (npm ci --prefix examples/node-clients)";
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        println!("skipped: node_clients_against_the_relay: {why}");
        return;
    }
    let relay = TestRelay::start(TestBackend::Sqlite, "node_clients")
        .await
        .expect("sqlite relay");
    let run = tokio::process::Command::new("node")
        .arg("--test")
        // A check that hangs fails on its own instead of holding the run; open client
        // sockets do not keep the process alive once every check has finished.
        .arg("--test-timeout=20000")
        .arg("--test-force-exit")
        .args(SUITES)
        .current_dir(&dir)
        .env("BUZZ_RELAY_URL", format!("ws://{}", relay.addr))
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the node suites finish within 120 s")
        .expect("node runs (is Node.js 20+ installed?)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "node suites failed: {}",
        output.status
    );
    relay.stop().await;
}
