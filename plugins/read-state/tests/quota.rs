//! The per-reader request quota: a signer over `quota_requests` in a window gets 429
//! with the API's error body and `Retry-After`, on every `/buzz/v1` route, while another
//! reader is unaffected (SQLite and PostgreSQL, counts in the process); with Redis the
//! count is shared by two relay processes.

mod common;

use buzz_core::both_backends;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, SharedStorage, TestBackend, TestRelay};
use buzz_read_state::{ReadStatePlugin, NAME};
use buzz_read_state_client::{self as client, Answer, Client};
use common::*;
use serde_json::json;
use std::time::Duration;

both_backends!(over_the_quota_is_429_other_readers_unaffected);

const WINDOW: i64 = 3_600;

/// Windows are aligned on the epoch: never start near the end of one, where the count
/// would start over mid-test.
async fn away_from_a_window_edge() {
    let left = WINDOW - now().rem_euclid(WINDOW);
    if left < 60 {
        tokio::time::sleep(Duration::from_secs(u64::try_from(left).unwrap_or(60) + 1)).await;
    }
}

fn assert_limited(answer: &Answer) {
    assert_eq!(answer.status, 429, "{}", answer.body);
    assert_eq!(
        answer.body["error"]["code"], "rate_limited",
        "{}",
        answer.body
    );
    assert!(answer.body["error"]["request_id"].is_string());
    let retry: i64 = answer
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=WINDOW).contains(&retry), "Retry-After {retry}");
    assert_eq!(answer.header("cache-control"), Some("private, no-store"));
}

async fn over_the_quota_is_429_other_readers_unaffected(backend: TestBackend, name: &str) {
    away_from_a_window_edge().await;
    let options = json!({ "quota_requests": 3, "quota_window_secs": WINDOW });
    let Some(relay) = relay_with(backend, name, options, |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let bob = User::new(&relay).await;
    let ch = alice.create_channel("quota", "stream").await;
    let first = alice.start(&ch).await; // one POST
    for _ in 0..2 {
        let page = alice.api.sidebar(20, None).await.expect("sidebar");
        assert_eq!(page.status, 200, "{}", page.body);
    }
    // The fourth request, on any route, is over the quota and changes nothing.
    assert_limited(&alice.api.sidebar(20, None).await.expect("sidebar"));
    let mark = client::mark_through(&ch, None, &first.id);
    assert_limited(&alice.api.intents(&[mark]).await.expect("intents"));
    assert_limited(
        &alice
            .api
            .contexts(&json!([{ "target": { "channel_id": ch } }]))
            .await
            .expect("contexts"),
    );
    // Bob has a quota of his own.
    for _ in 0..3 {
        let page = bob.api.sidebar(20, None).await.expect("sidebar");
        assert_eq!(page.status, 200, "{}", page.body);
    }
    relay.stop().await;
}

async fn process(test: &str, storage: &SharedStorage) -> TestRelay {
    let quota = |s: &mut buzz_core::config::Settings| {
        if let Some(section) = s.plugins.get_mut(NAME) {
            section.enabled = Some(true);
            section.options.insert("quota_requests".into(), json!(3));
            section
                .options
                .insert("quota_window_secs".into(), json!(WINDOW));
        }
    };
    let plugins = vec![PluginEntry::of::<ReadStatePlugin>()];
    storage.process(test, quota, plugins).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_quota_through_redis() {
    let test = "quota::two_processes_share_one_quota_through_redis";
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    away_from_a_window_edge().await;
    let a = process(test, &storage).await;
    let b = process(test, &storage).await;
    let alice = User::new(&a).await;
    let on_b = Client::new(&format!("http://{}", b.addr), &a.host(), alice.keys.clone());
    for api in [&alice.api, &alice.api, &on_b] {
        let page = api.sidebar(20, None).await.expect("sidebar");
        assert_eq!(page.status, 200, "{}", page.body);
    }
    // Three requests over two processes used the quota up on both.
    assert_limited(&on_b.sidebar(20, None).await.expect("sidebar on B"));
    assert_limited(&alice.api.sidebar(20, None).await.expect("sidebar on A"));
    // Another reader on B is unaffected.
    let bob = User::new(&a).await;
    let bob_on_b = Client::new(&format!("http://{}", b.addr), &a.host(), bob.keys.clone());
    let page = bob_on_b.sidebar(20, None).await.expect("sidebar");
    assert_eq!(page.status, 200, "{}", page.body);
    a.stop().await;
    b.stop().await;
}
