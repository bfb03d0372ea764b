//! Several relay processes on one PostgreSQL + Redis behave as one relay: live fan-out,
//! the NIP-98 replay guard and replaceable-event storage are shared.
//!
//! Needs `BUZZ_TEST_DATABASE_URL` and `BUZZ_TEST_REDIS_URL` (one `skipped:` line per test
//! otherwise; a failure under `CI`). Each test creates its own database and Redis prefix.

use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{
    now, pg_admin_url, redis_url, tag, HttpClient, PgDatabase, TestBackend, TestRelay, WsClient,
};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;

/// Two relays on one fresh PostgreSQL database and one Redis prefix.
struct Pair {
    a: TestRelay,
    b: TestRelay,
    db: PgDatabase,
}

impl Pair {
    /// `None` (after one `skipped:` line) when PostgreSQL or Redis is not configured.
    async fn start(test: &str) -> Option<Pair> {
        let admin = pg_admin_url(test)?;
        let redis = redis_url(test)?;
        let db = PgDatabase::create(&admin).expect("create test database");
        let prefix = format!("buzz-test-{}", uuid::Uuid::new_v4().simple());
        // One relay identity, as every process of one deployment has.
        let key = Keys::generate().secret_hex();
        let a = Self::relay(test, &db.url, &redis, &prefix, &key).await;
        let b = Self::relay(test, &db.url, &redis, &prefix, &key).await;
        Some(Pair { a, b, db })
    }

    async fn relay(
        test: &str,
        database_url: &str,
        redis: &str,
        prefix: &str,
        key: &str,
    ) -> TestRelay {
        // The SQLite backend only provides the temp data dir; storage is overridden.
        TestRelay::start_with(
            TestBackend::Sqlite,
            test,
            |s| {
                s.storage.database_url = database_url.to_owned();
                s.storage.redis_url = redis.to_owned();
                s.storage.redis_prefix = prefix.to_owned();
                s.relay.private_key = key.to_owned();
            },
            Vec::new(),
        )
        .await
        .expect("relay on shared PostgreSQL + Redis")
    }

    async fn stop(self) {
        self.a.stop().await;
        self.b.stop().await;
        drop(self.db);
    }
}

/// The events of the live `EVENT` messages `ws` receives, until `quiet` passes without
/// one.
async fn live_events(ws: &mut WsClient, quiet: Duration) -> Vec<Value> {
    let before = ws.timeout;
    ws.timeout = quiet;
    let mut got = Vec::new();
    while let Some(v) = ws.recv_where(|v| v[0] == "EVENT").await {
        got.push(v[2].clone());
    }
    ws.timeout = before;
    got
}

/// Send every event at once, then collect the OKs in order.
async fn publish_all(ws: &mut WsClient, events: &[Event]) -> Vec<(bool, String)> {
    for event in events {
        ws.send(&json!(["EVENT", event])).await.expect("send EVENT");
    }
    let mut answers = Vec::new();
    for event in events {
        answers.push(ws.wait_ok(&event.id).await);
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_event_crosses_processes_exactly_once() {
    let Some(pair) = Pair::start("live_event_crosses_processes_exactly_once").await else {
        return;
    };
    let keys = Keys::generate();
    let filter = json!({"kinds": [1], "authors": [keys.pubkey()]});
    let mut on_a = pair.a.ws().await;
    let mut on_b = pair.b.ws().await;
    for sub in [&mut on_a, &mut on_b] {
        assert!(sub
            .req("live", vec![filter.clone()])
            .await
            .expect("REQ")
            .is_empty());
    }

    let mut writer_b = pair.b.ws().await;
    let mut writer_a = pair.a.ws().await;
    let first = keys.sign(1, vec![], "written on B", now());
    let second = keys.sign(1, vec![], "written on A", now());
    assert_eq!(writer_b.publish(&first).await, (true, String::new()));
    assert_eq!(writer_a.publish(&second).await, (true, String::new()));

    let want = vec![json!(first), json!(second)];
    for (name, sub) in [("A", &mut on_a), ("B", &mut on_b)] {
        let got = live_events(sub, Duration::from_secs(2)).await;
        assert_eq!(got, want, "subscriber on {name}: each event exactly once");
    }
    // Both relays read the one shared store.
    for relay in [&pair.a, &pair.b] {
        let mut ws = relay.ws().await;
        let got = ws.req("q", vec![filter.clone()]).await.expect("REQ");
        assert_eq!(got.len(), 2);
    }
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip98_replay_guard_is_shared() {
    let Some(pair) = Pair::start("nip98_replay_guard_is_shared").await else {
        return;
    };
    let keys = Keys::generate();
    // Behind one public name (a load balancer), both processes see the same Host.
    let host = pair.a.host();
    let via_a = HttpClient::new(pair.a.addr, &host);
    let via_b = HttpClient::new(pair.b.addr, &host);
    let body = json!([{"kinds": [1], "limit": 1}]).to_string().into_bytes();
    let header = || {
        authorization_header(
            &keys,
            "POST",
            &via_a.public_url("/query"),
            Some(&body),
            now(),
            Some(&uuid::Uuid::new_v4().to_string()),
        )
    };

    for (first, second) in [(&via_a, &via_b), (&via_b, &via_a)] {
        let used = header();
        assert_eq!(first.post("/query", &body, Some(&used)).await.0, 200);
        let (status, answer) = second.post("/query", &body, Some(&used)).await;
        assert_eq!(status, 401, "replayed on the other process: {answer}");
        let message = answer["error"].as_str().expect("error string");
        assert!(message.starts_with("auth-required:"), "{message}");
        // A fresh header on the same process passes: only the replay was refused.
        assert_eq!(second.post("/query", &body, Some(&header())).await.0, 200);
    }
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replaceable_writes_keep_one_newest() {
    let Some(pair) = Pair::start("concurrent_replaceable_writes_keep_one_newest").await else {
        return;
    };
    let keys = Keys::generate();
    let t = now() - 120;
    let slots = [(0, vec![]), (30_023, vec![tag(&["d", "doc"])])];
    // A few rounds, each newer than the last, for more chances to collide.
    for round in 0..3 {
        for (kind, tags) in &slots {
            let versions: Vec<Event> = (0..40)
                .map(|i| {
                    keys.sign(
                        *kind,
                        tags.clone(),
                        &format!("v{round}.{i}"),
                        t + 40 * round + i,
                    )
                })
                .collect();
            let newest = versions.last().expect("versions").clone();
            // A gets the even versions, B the odd ones, both oldest-first and at once,
            // so the two processes keep replacing each other's rows.
            let to_a: Vec<Event> = versions.iter().step_by(2).cloned().collect();
            let to_b: Vec<Event> = versions.iter().skip(1).step_by(2).cloned().collect();
            let mut ws_a = pair.a.ws().await;
            let mut ws_b = pair.b.ws().await;
            let (answers_a, answers_b) =
                tokio::join!(publish_all(&mut ws_a, &to_a), publish_all(&mut ws_b, &to_b));
            for (accepted, message) in answers_a.iter().chain(&answers_b) {
                assert!(
                    *accepted || message.starts_with("duplicate:"),
                    "kind {kind}: every write is accepted or superseded, got {message:?}"
                );
            }

            let filter = json!({"kinds": [kind], "authors": [keys.pubkey()]});
            for relay in [&pair.a, &pair.b] {
                let mut ws = relay.ws().await;
                let got = ws.req("q", vec![filter.clone()]).await.expect("REQ");
                assert_eq!(got, vec![newest.clone()], "kind {kind}: only the newest");
            }
        }
    }
    assert_eq!(
        pair.a.stored_rows(keys.pubkey()).await,
        2,
        "one row per slot"
    );
    pair.stop().await;
}

/// Member changes to one channel arriving at both processes at once: the relay-signed
/// member list (39002) each change regenerates must end up listing every member. Each
/// process rebuilds it from the member rows it reads, so without serialising changes to a
/// channel, the later commit would publish a list missing the other's additions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_member_changes_keep_group_state_complete() {
    let Some(pair) = Pair::start("concurrent_member_changes_keep_group_state_complete").await
    else {
        return;
    };
    let owner = Keys::generate();
    let channel = uuid::Uuid::new_v4().to_string();
    let mut ws_a = pair.a.ws().await;
    let mut ws_b = pair.b.ws().await;
    assert!(ws_a.auth(&owner).await.0);
    assert!(ws_b.auth(&owner).await.0);
    let create = owner.sign(
        9_007,
        vec![tag(&["h", &channel]), tag(&["name", "race"])],
        "",
        now(),
    );
    assert_eq!(ws_a.publish(&create).await, (true, String::new()));

    let mut members = vec![owner.pubkey().to_owned()];
    // Single changes collide most: each commits alone, right after its read.
    for round in 0..12 {
        let adds: Vec<(String, Event)> = (0..2)
            .map(|i| {
                let member = Keys::generate().pubkey().to_owned();
                let add = owner.sign(
                    9_000,
                    vec![tag(&["h", &channel]), tag(&["p", &member, "member"])],
                    &format!("round {round} add {i}"),
                    now(),
                );
                (member, add)
            })
            .collect();
        members.extend(adds.iter().map(|(member, _)| member.clone()));
        let to_a: Vec<Event> = adds.iter().step_by(2).map(|(_, e)| e.clone()).collect();
        let to_b: Vec<Event> = adds
            .iter()
            .skip(1)
            .step_by(2)
            .map(|(_, e)| e.clone())
            .collect();
        let (answers_a, answers_b) =
            tokio::join!(publish_all(&mut ws_a, &to_a), publish_all(&mut ws_b, &to_b));
        for answer in answers_a.iter().chain(&answers_b) {
            assert_eq!(answer, &(true, String::new()));
        }

        for relay in [&pair.a, &pair.b] {
            // A fresh connection: an open subscription would also collect live versions.
            let mut ws = relay.ws().await;
            assert!(ws.auth(&owner).await.0);
            let got = ws
                .req("m", vec![json!({"kinds": [39_002], "#d": [channel]})])
                .await
                .expect("REQ");
            assert_eq!(got.len(), 1, "round {round}: one member list: {got:?}");
            let mut listed: Vec<String> = got[0]
                .tags
                .iter()
                .filter(|t| t.first().map(String::as_str) == Some("p"))
                .filter_map(|t| t.get(1).cloned())
                .collect();
            listed.sort();
            let mut expected = members.clone();
            expected.sort();
            assert_eq!(listed, expected, "round {round}: every member is listed");
        }
    }
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_redis_refuses_to_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = buzz_core::plugin::PluginCatalog::new()
        .load_settings_from(None, &HashMap::new())
        .expect("default settings");
    settings.server.bind = "127.0.0.1:0".into();
    settings.metrics.bind = "127.0.0.1:0".into();
    settings.storage.database_url = format!("sqlite://{}", dir.path().join("buzz.db").display());
    settings.relay.data_dir = dir.path().to_path_buf();
    settings.storage.redis_url = "redis://127.0.0.1:1".into();
    let started = tokio::time::timeout(
        Duration::from_secs(60),
        RelayBuilder::new(settings)
            .without_signal_handlers()
            .start(),
    )
    .await
    .expect("start gives up instead of hanging");
    let Err(err) = started else {
        panic!("a relay with an unreachable redis_url must not start single-process");
    };
    let text = format!("{err:#}").to_ascii_lowercase();
    assert!(text.contains("redis"), "the error names Redis: {text}");
}
