//! What several relay processes share to act as one relay: one PostgreSQL database,
//! one Redis key prefix and one relay key. Each process gets its own data directory.

use super::{pg_admin_url, redis_url, PgDatabase, TestBackend, TestRelay};
use crate::config::Settings;
use crate::plugin::PluginEntry;
use buzz_nostr::keys::Keys;

pub struct SharedStorage {
    pub db: PgDatabase,
    pub redis_url: String,
    pub redis_prefix: String,
    relay_key: String,
}

impl SharedStorage {
    /// A fresh database on the test PostgreSQL and a fresh prefix on the test Redis;
    /// `None` (the test is skipped, or fails under `CI`) when either is not configured.
    pub fn create(test: &str) -> Option<SharedStorage> {
        let (admin, redis) = (pg_admin_url(test)?, redis_url(test)?);
        Some(SharedStorage {
            db: PgDatabase::create(&admin).expect("create test database"),
            redis_url: redis,
            redis_prefix: format!("buzz-test-{}", uuid::Uuid::new_v4().simple()),
            relay_key: Keys::generate().secret_hex(),
        })
    }

    /// The same, with captures and fan-out on another Redis (one the test owns).
    pub fn with_redis(mut self, url: &str) -> SharedStorage {
        self.redis_url = url.to_owned();
        self
    }

    /// Start one relay process on this storage, settings further adjusted by `tweak`.
    pub async fn process(
        &self,
        test: &str,
        tweak: impl FnOnce(&mut Settings),
        plugins: Vec<PluginEntry>,
    ) -> TestRelay {
        let (db, redis, prefix, key) = (
            self.db.url.clone(),
            self.redis_url.clone(),
            self.redis_prefix.clone(),
            self.relay_key.clone(),
        );
        // The SQLite backend only provides the data directory; storage is set here.
        TestRelay::start_with(
            TestBackend::Sqlite,
            test,
            move |s| {
                s.storage.database_url = db;
                s.storage.redis_url = redis;
                s.storage.redis_prefix = prefix;
                s.relay.private_key = key;
                tweak(s);
            },
            plugins,
        )
        .await
        .expect("relay on shared PostgreSQL + Redis")
    }
}
