use super::{pg_admin_url, PgDatabase};
use crate::config::Settings;
use crate::plugin::{PluginCatalog, PluginEntry};
use crate::relay::{RelayBuilder, RunningRelay};
use std::collections::HashMap;
use std::net::SocketAddr;

/// Which database a test relay runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestBackend {
    Sqlite,
    Postgres,
}

/// A relay started on 127.0.0.1:0 with its own data directory and database.
pub struct TestRelay {
    relay: Option<RunningRelay>,
    pub addr: SocketAddr,
    pub settings: Settings,
    catalog: PluginCatalog,
    _dir: tempfile::TempDir,
    _pg: Option<PgDatabase>,
}

impl TestRelay {
    /// Start with default settings. `None` means the backend is unavailable and the
    /// test was skipped (see [`super::pg_admin_url`]).
    pub async fn start(backend: TestBackend, test: &str) -> Option<TestRelay> {
        Self::start_with(backend, test, |_| {}, Vec::new()).await
    }

    /// Start with settings adjusted by `tweak` and these plugins built (each enabled or
    /// not by its own default, unless `tweak` says otherwise).
    pub async fn start_with(
        backend: TestBackend,
        test: &str,
        tweak: impl FnOnce(&mut Settings),
        plugins: Vec<PluginEntry>,
    ) -> Option<TestRelay> {
        let catalog = plugins
            .into_iter()
            .fold(PluginCatalog::new(), PluginCatalog::with);
        let dir = tempfile::tempdir().expect("temp dir");
        let (url, pg) = match backend {
            TestBackend::Sqlite => (
                format!("sqlite://{}", dir.path().join("buzz.db").display()),
                None,
            ),
            TestBackend::Postgres => {
                let admin = pg_admin_url(test)?;
                let db = PgDatabase::create(&admin).expect("create test database");
                (db.url.clone(), Some(db))
            }
        };
        let mut settings = catalog
            .load_settings_from(None, &HashMap::new())
            .expect("default settings");
        settings.server.bind = "127.0.0.1:0".into();
        // Parallel test relays must not share the default metrics port.
        settings.metrics.bind = "127.0.0.1:0".into();
        settings.server.workers = 2;
        settings.server.shutdown_timeout_secs = 1;
        settings.storage.database_url = url;
        settings.relay.data_dir = dir.path().to_path_buf();
        let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
        settings.policies.access = policies.join("access.lua");
        settings.policies.moderation = policies.join("moderation.lua");
        settings.policies.reload_poll_ms = 100;
        // Unoptimized test builds run Lua many times slower than a release build; keep the
        // wall-clock bound for the tests that are about it (they set their own).
        settings.policies.call_timeout_ms = 5_000;
        tweak(&mut settings);
        let mut relay = TestRelay {
            relay: None,
            addr: "127.0.0.1:0".parse().expect("addr"),
            settings,
            catalog,
            _dir: dir,
            _pg: pg,
        };
        relay.boot().await;
        Some(relay)
    }

    async fn boot(&mut self) {
        let running = RelayBuilder::new(self.settings.clone())
            .catalog(self.catalog.clone())
            .without_signal_handlers()
            .start()
            .await
            .expect("relay starts");
        self.addr = running.addr;
        self.relay = Some(running);
    }

    /// Stop the relay process but keep its storage (a stopped relay, for tools that
    /// read the database alone); [`TestRelay::restart`] starts it again.
    pub async fn halt(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.stop().await.expect("relay stops");
        }
    }

    /// Stop gracefully and start again on the same storage (a new port).
    pub async fn restart(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.stop().await.expect("relay stops");
        }
        self.boot().await;
    }

    /// The running relay (services, pubkey).
    pub fn running(&self) -> &RunningRelay {
        self.relay.as_ref().expect("relay is running")
    }

    /// `Host` value for the default community: `localhost:<port>`.
    pub fn host(&self) -> String {
        format!("localhost:{}", self.addr.port())
    }

    pub async fn ws(&self) -> super::WsClient {
        super::WsClient::connect(self.addr, &self.host())
            .await
            .expect("websocket connects")
    }

    /// The text of `GET /metrics` on the relay's metrics listener.
    pub async fn scrape(&self) -> String {
        let addr = self
            .running()
            .metrics_addr
            .expect("metrics are enabled for this relay");
        let resp = reqwest::get(format!("http://{addr}/metrics"))
            .await
            .expect("metrics answer");
        assert_eq!(resp.status().as_u16(), 200, "GET /metrics");
        resp.text().await.expect("metrics text")
    }

    pub fn http(&self) -> super::HttpClient {
        super::HttpClient::new(self.addr, &self.host())
    }

    /// The NIP-11 document (`GET /` as `application/nostr+json`), which must be a 200.
    pub async fn nip11(&self) -> serde_json::Value {
        let (status, doc) = self
            .http()
            .get("/", &[("accept", "application/nostr+json")])
            .await;
        assert_eq!(status, 200, "{doc}");
        doc
    }

    /// Store `event` in the default community exactly as a relay that predates thread
    /// metadata would have: the event row only, no `thread_metadata` row.
    pub async fn insert_legacy(&self, event: &buzz_nostr::event::Event) {
        let services = &self.running().services;
        let community = services
            .store
            .ensure_community("localhost", "Local")
            .await
            .expect("community");
        let event = event.clone();
        let received = crate::clock::Clock::now_micros(services.clock.as_ref());
        services
            .store
            .write(move |conn| {
                crate::store::insert_event(conn, community, &event, event.channel_id(), received)
            })
            .await
            .expect("legacy insert");
    }

    /// Rows in the `events` table (any community, deleted or not) whose author or id is
    /// `needle`: the proof that a refused event left nothing behind.
    pub async fn stored_rows(&self, needle: &str) -> i64 {
        use crate::store::schema::events;
        use diesel::prelude::*;
        let needle = needle.to_owned();
        self.running()
            .services
            .store
            .read(move |mut conn| {
                let n: i64 = crate::with_conn!(&mut conn, |c| events::table
                    .filter(events::pubkey.eq(&needle).or(events::id.eq(&needle)))
                    .count()
                    .get_result(c))?;
                Ok(n)
            })
            .await
            .expect("count rows")
    }

    /// `author`'s stored events in storage order (`seq`), each with its number of tag
    /// index rows: the proof of submission order and of a complete tag index.
    pub async fn stored_in_order(&self, author: &str) -> Vec<(String, i64)> {
        use crate::store::schema::{event_tags, events};
        use diesel::prelude::*;
        let author = author.to_owned();
        self.running()
            .services
            .store
            .read(move |mut conn| {
                let rows: Vec<(i64, String)> = crate::with_conn!(&mut conn, |c| events::table
                    .filter(events::pubkey.eq(&author))
                    .order(events::seq)
                    .select((events::seq, events::id))
                    .load(c))?;
                let mut out = Vec::with_capacity(rows.len());
                for (seq, id) in rows {
                    let tags: i64 = crate::with_conn!(&mut conn, |c| event_tags::table
                        .filter(event_tags::event_seq.eq(seq))
                        .count()
                        .get_result(c))?;
                    out.push((id, tags));
                }
                Ok(out)
            })
            .await
            .expect("stored rows in order")
    }

    /// The `thread_metadata` row of `event_id` in the default community.
    pub async fn thread_row(&self, event_id: &str) -> Option<crate::store::threads::ThreadRow> {
        let services = &self.running().services;
        let community = services
            .store
            .ensure_community("localhost", "Local")
            .await
            .expect("community");
        let id = event_id.to_owned();
        services
            .store
            .read(move |mut conn| crate::store::threads::load(&mut conn, community, &id))
            .await
            .expect("thread row read")
    }

    pub async fn stop(mut self) {
        if let Some(relay) = self.relay.take() {
            relay.stop().await.expect("relay stops");
        }
    }
}
