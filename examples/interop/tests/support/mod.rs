//! Running the node suites of `examples/node-clients` (installed from the committed
//! lockfile with `npm ci --prefix examples/node-clients`) against a relay of the test's.

use std::path::PathBuf;
use std::time::Duration;

/// The node-clients directory, or `None` (one `skipped:` line) when its `node_modules`
/// is missing — a failure instead when `CI` is set.
pub(crate) fn node_clients_or_skip(test: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../node-clients");
    if !dir.join("node_modules").is_dir() {
        let why =
            "examples/node-clients/node_modules is missing (npm ci --prefix examples/node-clients)";
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        println!("skipped: {test}: {why}");
        return None;
    }
    Some(dir)
}

/// Run `suites` with `node --test` in one process against `relay_url`, print what they
/// said, and fail the test when they fail.
pub(crate) async fn run_suites(dir: &std::path::Path, suites: &[&str], relay_url: String) {
    let run = tokio::process::Command::new("node")
        .arg("--test")
        // A check that hangs fails on its own instead of holding the run; open client
        // sockets do not keep the process alive once every check has finished.
        .arg("--test-timeout=20000")
        .arg("--test-force-exit")
        .args(suites)
        .current_dir(dir)
        .env("BUZZ_RELAY_URL", relay_url)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the node suites finish within 120 s")
        .expect("node runs (is Node.js 20+ installed?)");
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "node suites failed: {}",
        output.status
    );
}
