//! `buzz-admin` reports what the relay's database and config hold.

use std::process::Command;

#[test]
fn reports_migrations_communities_plugins_and_policies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("buzz.db");
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\ndatabase_url = \"sqlite://{}\"\n[policies]\naccess = \"{}\"\nmoderation = \"{}\"\n",
            db.display(),
            policies.join("access.lua").display(),
            dir.path().join("missing.lua").display(),
        ),
    )
    .expect("config");
    let admin = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_buzz-admin"))
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .expect("run buzz-admin");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = admin(&[]);
    // Core's migrations and every built plugin's.
    let pending: usize = before
        .split("0 applied, ")
        .nth(1)
        .and_then(|rest| rest.split(" pending").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(pending >= 3, "{before}");
    assert!(before.contains("(none stored yet)"), "{before}");
    assert!(before.contains("relay key   (not recorded yet"), "{before}");

    // A relay's first start: migrations, the community row, the recorded key.
    let url = format!("sqlite://{}", db.display());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let store = runtime.block_on(async {
        let sets = buzz_relay::catalog().migration_sets();
        let store = buzz_core::store::Store::open(&url, 1, true, &sets)
            .await
            .expect("open and migrate");
        store
            .ensure_community("localhost", "Local")
            .await
            .expect("community row");
        store
    });
    let after = admin(&[]);
    assert!(
        after.contains(&format!("{pending} applied, 0 pending")),
        "{after}"
    );
    assert!(after.contains("relay key   (not recorded yet"), "{after}");
    assert!(
        after.contains("localhost") && after.contains("0 events"),
        "{after}"
    );
    assert!(
        after.contains("channel_windows          enabled") && after.contains("thread deadline"),
        "{after}"
    );
    assert!(
        after.contains("access.lua") && after.contains("ok (can_read, can_write)"),
        "{after}"
    );
    assert!(
        after.contains("missing.lua") && after.contains("BROKEN"),
        "{after}"
    );

    // Once a relay has claimed the database, its key is shown.
    let pubkey = "ab".repeat(32);
    runtime.block_on(async {
        store.claim_identity(&pubkey).await.expect("identity row");
        store.shutdown().await;
    });
    let recorded = admin(&[]);
    assert!(
        recorded.contains(&format!("relay key   {pubkey}")),
        "{recorded}"
    );
    // `--report` asks for the same text explicitly (a terminal would get the console).
    assert_eq!(admin(&["--report"]), recorded);
}
