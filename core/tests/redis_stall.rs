//! A Redis that stops answering (or is not there) never hangs the relay: every Redis
//! operation has a deadline (`storage.redis_timeout_ms`); within it, requests that need
//! Redis are refused with a retryable `error:` / 503 (fail closed), and the relay
//! recovers by itself once Redis answers again. A refused Redis port at start-up is
//! reported as refused.
//!
//! The stall is real: a TCP proxy between the relay and Redis stops passing bytes
//! without closing anything (`support/freeze_proxy.rs`).

mod support;

use buzz_core::both_backends;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginCatalog;
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, redis_url, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::freeze_proxy::{redis_addr, FreezeProxy};

/// The deadline the tests configure.
const DEADLINE_MS: u64 = 1_000;
/// How long a refusal may take: the deadline, once for a probe and once for the
/// operation, plus scheduling slack.
const REFUSED_WITHIN: Duration = Duration::from_millis(2 * DEADLINE_MS + 1_000);

async fn relay_behind(proxy: &FreezeProxy, backend: TestBackend, test: &str) -> Option<TestRelay> {
    let url = proxy.url();
    let prefix = format!("buzz-test-{}", uuid::Uuid::new_v4().simple());
    TestRelay::start_with(
        backend,
        test,
        |s| {
            s.storage.redis_url = url;
            s.storage.redis_prefix = prefix;
            s.storage.redis_timeout_ms = DEADLINE_MS;
        },
        Vec::new(),
    )
    .await
}

/// Publish `event` and time the answer.
async fn timed_publish(
    ws: &mut WsClient,
    content: &str,
    keys: &Keys,
) -> (bool, String, Duration, String) {
    let event = keys.sign(1, vec![], content, now());
    let started = Instant::now();
    let (accepted, message) = ws.publish(&event).await;
    (accepted, message, started.elapsed(), event.id)
}

both_backends!(stalled_redis_fails_closed_then_recovers);

async fn stalled_redis_fails_closed_then_recovers(backend: TestBackend, test: &str) {
    let Some(redis) = redis_url(test) else { return };
    let proxy = FreezeProxy::start(redis_addr(&redis).await).await;
    let Some(relay) = relay_behind(&proxy, backend, test).await else {
        return;
    };
    let keys = Keys::generate();
    let http = relay.http();
    let query = json!([{"kinds": [1], "limit": 1}]).to_string().into_bytes();
    let mut ws = relay.ws().await;
    let mut listener = relay.ws().await;
    let live = json!({"kinds": [1], "authors": [keys.pubkey()]});
    assert!(listener
        .req("live", vec![live])
        .await
        .expect("REQ")
        .is_empty());

    // Healthy: accepted, and a NIP-98 header is used once.
    assert!(timed_publish(&mut ws, "before", &keys).await.0);
    let used = buzz_nostr::nip98::authorization_header(
        &keys,
        "POST",
        &http.public_url("/query"),
        Some(&query),
        now(),
        Some("used-before-the-stall"),
    );
    assert_eq!(http.post("/query", &query, Some(&used)).await.0, 200);

    proxy.freeze();
    let frozen_at = Instant::now();

    // EVENT over WebSocket: refused with `error:` within the deadline, every time. The
    // first may already be stored (the stall began between its check and its fan-out),
    // but is not acknowledged; later ones are refused before they commit.
    let mut refused_ids = Vec::new();
    for i in 0..3 {
        let (accepted, message, took, id) =
            timed_publish(&mut ws, &format!("frozen {i}"), &keys).await;
        eprintln!("{test}: EVENT during the stall answered in {took:?}: {message}");
        assert!(!accepted, "EVENT {i} acknowledged while redis is stalled");
        assert!(message.starts_with("error:"), "{message}");
        assert!(took < REFUSED_WITHIN, "EVENT {i} took {took:?}");
        refused_ids.push(id);
    }
    for id in &refused_ids[1..] {
        assert_eq!(
            relay.stored_rows(id).await,
            0,
            "refused event {id} was stored"
        );
    }

    // The HTTP bridge: 503 with an `error:` body within the deadline.
    for path in ["/query", "/events"] {
        let body = if path == "/query" {
            query.clone()
        } else {
            json!(keys.sign(1, vec![], "frozen over http", now()))
                .to_string()
                .into_bytes()
        };
        let started = Instant::now();
        let (status, answer) = http.post_signed(&keys, path, &body).await;
        let took = started.elapsed();
        eprintln!("{test}: POST {path} during the stall answered {status} in {took:?}");
        assert_eq!(status, 503, "{path}: {answer}");
        let message = answer["error"].as_str().expect("error string");
        assert!(message.starts_with("error:"), "{message}");
        assert!(took < REFUSED_WITHIN, "{path} took {took:?}");
    }
    // A replayed NIP-98 header is not let through because the guard cannot answer.
    let (status, _) = http.post("/query", &query, Some(&used)).await;
    assert_eq!(status, 503, "replay during the stall must fail closed");
    eprintln!("{test}: stalled for {:?}", frozen_at.elapsed());

    // Thawed: the same relay, no restart, accepts again.
    proxy.thaw();
    let thawed_at = Instant::now();
    let recovered = loop {
        let (accepted, message, _, id) = timed_publish(&mut ws, "after", &keys).await;
        if accepted {
            break id;
        }
        assert!(message.starts_with("error:"), "{message}");
        assert!(
            thawed_at.elapsed() < Duration::from_secs(10),
            "no recovery 10 s after redis answers again: {message}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "{test}: EVENT accepted again {:?} after the thaw",
        thawed_at.elapsed()
    );
    // Live delivery works again (the subscription was replaced).
    let got = listener
        .recv_where(|v| v[0] == "EVENT" && v[2]["id"] == recovered.as_str())
        .await;
    assert!(got.is_some(), "the recovered event is delivered live");
    assert_eq!(http.post_signed(&keys, "/query", &query).await.0, 200);
    // And the replay guard remembers: the old header is still refused.
    let (status, answer) = http.post("/query", &query, Some(&used)).await;
    assert_eq!(status, 401, "{answer}");
    relay.stop().await;
}

/// Settings for a relay that is expected not to start.
fn settings_with_redis(dir: &std::path::Path, redis_url: String, timeout_ms: u64) -> Settings {
    let mut s = PluginCatalog::new()
        .load_settings_from(None, &HashMap::new())
        .expect("default settings");
    s.server.bind = "127.0.0.1:0".into();
    s.metrics.bind = "127.0.0.1:0".into();
    s.storage.database_url = format!("sqlite://{}", dir.join("buzz.db").display());
    s.relay.data_dir = dir.to_path_buf();
    s.policies.enabled = false;
    s.storage.redis_url = redis_url;
    s.storage.redis_timeout_ms = timeout_ms;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_redis_port_at_start_up_says_refused() {
    // A port nobody listens on: bind, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings_with_redis(dir.path(), format!("redis://127.0.0.1:{port}"), 5_000);
    let started = Instant::now();
    let err = match RelayBuilder::new(settings)
        .without_signal_handlers()
        .start()
        .await
    {
        Ok(_) => panic!("a relay started without its redis"),
        Err(err) => format!("{err:#}"),
    };
    let took = started.elapsed();
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert!(!err.contains("no answer"), "{err}");
    assert!(
        took < Duration::from_secs(2),
        "refusal took {took:?}: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_redis_at_start_up_says_no_answer_within_the_deadline() {
    let Some(redis) = redis_url("stalled_redis_at_start_up_says_no_answer_within_the_deadline")
    else {
        return;
    };
    let proxy = FreezeProxy::start(redis_addr(&redis).await).await;
    proxy.freeze();
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings_with_redis(dir.path(), proxy.url(), 500);
    let started = Instant::now();
    let err = match RelayBuilder::new(settings)
        .without_signal_handlers()
        .start()
        .await
    {
        Ok(_) => panic!("a relay started without an answer from redis"),
        Err(err) => format!("{err:#}"),
    };
    let took = started.elapsed();
    assert!(err.contains("no answer within 500ms"), "{err}");
    assert!(took < Duration::from_secs(2), "took {took:?}: {err}");
}
