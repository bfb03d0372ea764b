//! `GET /metrics`: parsed by an independent Prometheus text-format parser, its figures
//! move under load, and no label ever carries a pubkey, channel, event id or payload.

use buzz_core::both_backends;
use buzz_core::testkit::{authed, now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use prometheus_parse::{Sample, Scrape, Value};
use serde_json::json;
use std::collections::BTreeSet;

both_backends!(figures_move_under_load, labels_carry_no_request_data);

/// Label names the relay may use: each names a small closed set.
const LABEL_NAMES: [&str; 8] = [
    "outcome",
    "path",
    "prefix",
    "entry_point",
    "verdict",
    "plugin",
    "hook",
    "method",
];

fn parse(text: &str) -> Scrape {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    Scrape::parse(lines).expect("the scrape parses as Prometheus text")
}

/// The value of the sample `name` whose labels include all of `labels` (0 when absent).
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(sample_value)
        .sum()
}

fn sample_value(sample: &Sample) -> f64 {
    match &sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
        Value::Summary(_) => 0.0,
    }
}

/// Observations of histogram `name` (its `_count`).
fn count(scrape: &Scrape, name: &str) -> f64 {
    let plain = value(scrape, &format!("{name}_count"), &[]);
    if plain > 0.0 {
        return plain;
    }
    value(scrape, name, &[])
}

async fn figures_move_under_load(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let before = parse(&relay.scrape().await);
    for family in [
        "buzz_connections",
        "buzz_writer_queue_depth",
        "buzz_writer_batch_size",
        "buzz_ingest_seconds",
        "buzz_query_seconds",
    ] {
        assert!(
            before.docs.contains_key(family),
            "{family} is documented in the scrape"
        );
    }
    assert_eq!(value(&before, "buzz_connections", &[]), 0.0);
    // One community, its scripts loaded once at start.
    assert_eq!(value(&before, "buzz_policy_generation", &[]), 1.0);

    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let channel = uuid::Uuid::new_v4().to_string();
    let create = alice.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "load"])],
        "",
        now(),
    );
    assert_eq!(ws.publish(&create).await, (true, String::new()));
    const N: usize = 20;
    for i in 0..N {
        let msg = alice.sign(9, vec![tag(&["h", &channel])], &format!("m{i}"), now());
        assert_eq!(ws.publish(&msg).await, (true, String::new()));
    }
    // One refusal (no h tag on a channel kind) and one duplicate.
    let bad = alice.sign(9, vec![], "no channel", now());
    let (ok, message) = ws.publish(&bad).await;
    assert!(!ok && message.starts_with("invalid:"), "{message}");
    let (ok, message) = ws.publish(&create).await;
    assert!(ok && message.starts_with("duplicate:"), "{message}");
    for i in 0..5 {
        ws.req(&format!("q{i}"), vec![json!({"#h": [channel], "limit": 5})])
            .await
            .expect("query answered");
    }
    let bounds = ws
        .req("bad", vec![json!({"limit": 5, "kinds": ["nine"]})])
        .await;
    assert!(bounds.is_err(), "a malformed filter is refused");

    let after = parse(&relay.scrape().await);
    assert_eq!(value(&after, "buzz_connections", &[]), 1.0, "one open");
    let accepted = value(
        &after,
        "buzz_ingest_events_total",
        &[("outcome", "accepted")],
    ) - value(
        &before,
        "buzz_ingest_events_total",
        &[("outcome", "accepted")],
    );
    assert_eq!(accepted, (N + 1) as f64, "every stored event counted");
    assert_eq!(
        value(
            &after,
            "buzz_ingest_events_total",
            &[("outcome", "duplicate")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &after,
            "buzz_errors_total",
            &[("path", "ingest"), ("prefix", "invalid")]
        ),
        1.0
    );
    assert!(value(&after, "buzz_queries_total", &[("outcome", "ok")]) >= 5.0);
    assert!(count(&after, "buzz_ingest_seconds") >= (N + 3) as f64);
    assert!(count(&after, "buzz_query_seconds") >= 5.0);
    // Every stored event went through the writer: batches were committed.
    assert!(
        value(
            &after,
            "buzz_writer_batches_total",
            &[("outcome", "committed")]
        ) >= 1.0
    );
    assert!(count(&after, "buzz_writer_batch_size") >= 1.0);
    // Policies decided each write and read.
    assert!(
        value(
            &after,
            "buzz_policy_decisions_total",
            &[("entry_point", "can_write"), ("verdict", "allow")]
        ) >= (N + 1) as f64
    );
    assert!(
        value(
            &after,
            "buzz_policy_decisions_total",
            &[("entry_point", "can_read"), ("verdict", "allow")]
        ) >= 1.0
    );
    // Nothing is left queued once every write was answered.
    assert_eq!(value(&after, "buzz_writer_queue_depth", &[]), 0.0);

    ws.close().await;
    // The connection count drops when the socket closes (asynchronously).
    let mut open = 1.0;
    for _ in 0..50 {
        open = value(&parse(&relay.scrape().await), "buzz_connections", &[]);
        if open == 0.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(open, 0.0, "closed connections are not counted as open");
    relay.stop().await;
}

async fn labels_carry_no_request_data(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let channel = uuid::Uuid::new_v4().to_string();
    let create = alice.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "secret-name"])],
        "",
        now(),
    );
    assert_eq!(ws.publish(&create).await, (true, String::new()));
    let msg = alice.sign(9, vec![tag(&["h", &channel])], "payload-text", now());
    assert_eq!(ws.publish(&msg).await, (true, String::new()));
    ws.req(
        "s",
        vec![json!({"#h": [channel], "authors": [alice.pubkey()]})],
    )
    .await
    .expect("answered");
    let text = relay.scrape().await;
    for secret in [
        alice.pubkey(),
        channel.as_str(),
        msg.id.as_str(),
        "payload-text",
        "secret-name",
    ] {
        assert!(!text.contains(secret), "{secret} appears in the scrape");
    }
    let names: BTreeSet<String> = parse(&text)
        .samples
        .iter()
        .flat_map(|s| s.labels.keys().cloned().collect::<Vec<_>>())
        .filter(|k| k != "le" && k != "quantile")
        .collect();
    for label in &names {
        assert!(
            LABEL_NAMES.contains(&label.as_str()),
            "unexpected label {label}"
        );
    }
    relay.stop().await;
}

/// A broken edit of a policy script is counted as a failed reload and keeps the last
/// load's time; the fixed edit loads and moves both the generation and the time.
#[tokio::test]
async fn policy_reloads_are_counted() {
    let scripts = tempfile::tempdir().expect("temp dir");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let access = scripts.path().join("access.lua");
    let moderation = scripts.path().join("moderation.lua");
    std::fs::copy(shipped.join("access.lua"), &access).expect("copy access.lua");
    std::fs::copy(shipped.join("moderation.lua"), &moderation).expect("copy moderation.lua");
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "policy_reloads_are_counted",
        |s| {
            s.policies.access = access.clone();
            s.policies.moderation = moderation.clone();
        },
        Vec::new(),
    )
    .await
    .expect("sqlite relay");
    let before = parse(&relay.scrape().await);
    assert_eq!(value(&before, "buzz_policy_generation", &[]), 1.0);
    assert_eq!(value(&before, "buzz_policy_failed_reloads_total", &[]), 0.0);
    let loaded = value(&before, "buzz_policy_last_load_timestamp_seconds", &[]);
    assert!((now() as f64 - loaded).abs() < 120.0, "loaded at {loaded}");

    let good = std::fs::read_to_string(&access).expect("read access.lua");
    std::fs::write(&access, "this is not lua (").expect("break access.lua");
    let failed = wait_for(&relay, |s| {
        value(s, "buzz_policy_failed_reloads_total", &[]) >= 1.0
    })
    .await;
    assert_eq!(value(&failed, "buzz_policy_generation", &[]), 1.0, "kept");
    assert_eq!(
        value(&failed, "buzz_policy_last_load_timestamp_seconds", &[]),
        loaded,
        "a failed reload is not a load"
    );

    std::fs::write(&access, format!("{good}\n-- edited\n")).expect("fix access.lua");
    let fixed = wait_for(&relay, |s| value(s, "buzz_policy_generation", &[]) == 2.0).await;
    assert!(value(&fixed, "buzz_policy_last_load_timestamp_seconds", &[]) >= loaded);
    assert_eq!(value(&fixed, "buzz_policy_failed_reloads_total", &[]), 1.0);
    relay.stop().await;
}

/// Scrapes until `ready` holds (the watcher polls every 100 ms in tests); 20 s at most.
async fn wait_for(relay: &TestRelay, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let scrape = parse(&relay.scrape().await);
        if ready(&scrape) {
            return scrape;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the scrape never got there"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
