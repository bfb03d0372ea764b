//! Migrations: applied at start with auto_migrate, refused (and named) without it.

use buzz_core::both_backends;

use buzz_core::store::Store;
use buzz_core::testkit::{pg_admin_url, PgDatabase, TestBackend};

both_backends!(pending_migrations_block_start_without_auto_migrate);

async fn pending_migrations_block_start_without_auto_migrate(backend: TestBackend, name: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, _db) = match backend {
        TestBackend::Sqlite => (
            format!("sqlite://{}", dir.path().join("m.db").display()),
            None,
        ),
        TestBackend::Postgres => {
            let Some(admin) = pg_admin_url(name) else {
                return;
            };
            let db = PgDatabase::create(&admin).expect("test database");
            (db.url.clone(), Some(db))
        }
    };
    let err = match Store::open(&url, 2, false, &[]).await {
        Ok(_) => panic!("a database with pending migrations must not open without auto_migrate"),
        Err(err) => err.to_string(),
    };
    assert!(
        err.contains("pending migrations") && err.contains("20261129000001"),
        "{err}"
    );

    let status = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let m = Store::migrations(&url, &[]).expect("connect");
            let before = m.status().expect("status");
            let applied = m.run_pending().expect("migrate");
            (before, applied, m.status().expect("status"))
        }
    })
    .await
    .expect("join");
    let (before, applied, after) = status;
    assert!(before.applied.is_empty() && !before.pending.is_empty());
    assert_eq!(applied.len(), before.pending.len());
    assert!(after.pending.is_empty());

    let store = Store::open(&url, 2, false, &[])
        .await
        .expect("opens once migrated");
    store.shutdown().await;
}
