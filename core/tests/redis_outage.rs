//! Redis goes away while the relay runs (the process is killed, connections reset and
//! then refused) and comes back on the same port: meanwhile live fan-out and the NIP-98
//! replay guard fail closed (`error:` / 503, nothing acknowledged), and the relay
//! recovers by itself once Redis answers again — no restart.
//!
//! The test runs its own `redis-server` on a port of its own, never the shared one. It
//! needs `BUZZ_TEST_REDIS_URL` only as the sign that Redis tests are wanted (and
//! `redis-server` on the PATH); without it, one `skipped:` line (a failure under `CI`).

use buzz_core::testkit::{now, redis_url, OwnRedis, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::net::TcpListener;

use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_fails_closed_then_recovers() {
    let test = "redis_outage_fails_closed_then_recovers";
    if redis_url(test).is_none() {
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut redis = OwnRedis::start(port).await;
    let Some(relay) = TestRelay::start_with(
        TestBackend::Sqlite,
        test,
        |s| {
            s.storage.redis_url = format!("redis://127.0.0.1:{}", redis.port);
            s.storage.redis_timeout_ms = 1_000;
        },
        Vec::new(),
    )
    .await
    else {
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
    let before = keys.sign(1, vec![], "before", now());
    assert_eq!(ws.publish(&before).await, (true, String::new()));
    assert!(listener
        .recv_where(|v| v[0] == "EVENT" && v[2]["id"] == before.id.as_str())
        .await
        .is_some());

    redis.kill();

    // Fail closed: the first EVENT may already be stored but is not acknowledged;
    // later ones are refused before their commit.
    let mut refused = Vec::new();
    for i in 0..3 {
        let event = keys.sign(1, vec![], &format!("during the outage {i}"), now());
        let started = Instant::now();
        let (accepted, message) = ws.publish(&event).await;
        assert!(!accepted, "EVENT {i} acknowledged without Redis");
        assert!(message.starts_with("error:"), "{message}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        refused.push(event.id);
    }
    for id in &refused[1..] {
        assert_eq!(relay.stored_rows(id).await, 0, "refused event {id} stored");
    }
    for path in ["/query", "/events"] {
        let body = match path {
            "/query" => query.clone(),
            _ => json!(keys.sign(1, vec![], "over http", now()))
                .to_string()
                .into_bytes(),
        };
        let (status, answer) = http.post_signed(&keys, path, &body).await;
        assert_eq!(status, 503, "{path}: {answer}");
        let message = answer["error"].as_str().expect("error string");
        assert!(message.starts_with("error:"), "{message}");
    }

    // Back on the same port (empty: an outage may lose what Redis held).
    let _redis = OwnRedis::start(port).await;
    let back = Instant::now();
    let recovered = loop {
        let event = keys.sign(1, vec![], "after", now());
        let (accepted, message) = ws.publish(&event).await;
        if accepted {
            break event.id;
        }
        assert!(message.starts_with("error:"), "{message}");
        assert!(
            back.elapsed() < Duration::from_secs(15),
            "no recovery 15 s after Redis came back: {message}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Live delivery works again (the subscription was re-established by itself).
    assert!(listener
        .recv_where(|v| v[0] == "EVENT" && v[2]["id"] == recovered.as_str())
        .await
        .is_some());
    // The replay guard answers again: a header passes once, then is refused.
    let header = buzz_nostr::nip98::authorization_header(
        &keys,
        "POST",
        &http.public_url("/query"),
        Some(&query),
        now(),
        Some("after-the-outage"),
    );
    assert_eq!(http.post("/query", &query, Some(&header)).await.0, 200);
    assert_eq!(http.post("/query", &query, Some(&header)).await.0, 401);
    relay.stop().await;
}
