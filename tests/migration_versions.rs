//! diesel records an applied migration by its version alone, so two components (core and
//! a plugin, or two plugins) must never share one: the second set's tables would be
//! skipped without a word. The relay refuses such a build before migrating.

use buzz_core::store::{MigrationSet, Store};

fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}/buzz.db", dir.path().display())
}

#[test]
fn every_built_component_has_versions_of_its_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sets = buzz_relay::catalog().migration_sets();
    let migrations = Store::migrations(&sqlite_url(&dir), &sets).expect("migrations");
    migrations
        .check_unique_versions()
        .expect("every migration version is used once");
}

#[test]
fn a_version_two_components_share_is_refused_before_anything_is_applied() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Core's set a second time, as a plugin would if it copied core's dates.
    let sets = [MigrationSet::CORE];
    let migrations = Store::migrations(&sqlite_url(&dir), &sets).expect("migrations");
    let refused = migrations.run_pending().expect_err("refused");
    assert!(
        refused
            .to_string()
            .contains("is used by both core and core"),
        "{refused}"
    );
    let status = migrations.status().expect("status");
    assert!(
        status.applied.is_empty(),
        "nothing applied: {:?}",
        status.applied.len()
    );
}
