//! What one search may cost (issue 39): how many search filters a query holds, identical
//! ones read once, how much candidate text one query ranks, and the process's budget for
//! the text being ranked. Over the wire, on both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::TestBackend;
use common::*;
use serde_json::{json, Value};

both_backends!(
    search_filters_per_query_are_bounded,
    identical_filters_are_read_once,
    ranked_text_per_query_is_bounded,
    a_page_over_the_process_budget_is_ranked_alone,
    nip11_advertises_the_bounds,
    counts_past_the_cap_are_approximate,
);

/// A message of about `bytes` bytes holding `word` once (each a different event).
fn big(word: &str, bytes: usize) -> String {
    let filler = "lorem ipsum dolor sit amet ";
    let mut text = format!("{word} {} ", uuid());
    while text.len() < bytes {
        text.push_str(filler);
    }
    text
}

async fn search_filters_per_query_are_bounded(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_search_filters": 4}), |_| {}).await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let found = alice.post(&ch, "quokka sighting").await;
    // Four distinct search filters are served; a fifth is refused before anything is read,
    // on REQ, COUNT and POST /query alike.
    let filters = |n: i64| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"search": "quokka", "#h": [ch], "since": i}))
            .collect()
    };
    assert_eq!(
        ids(&alice.req(filters(4)).await.expect("four")),
        vec![found.id]
    );
    let refused = alice.req(filters(5)).await.expect_err("five");
    assert!(
        refused.starts_with("invalid: ") && refused.contains("max_search_filters"),
        "{refused}"
    );
    let counted = alice.ws.count(&sub(), filters(5)).await.expect_err("COUNT");
    assert!(counted.contains("max_search_filters"), "{counted}");
    let (status, body) = alice.http(&relay, filters(5)).await;
    assert_eq!(status, 400, "{body}");
    relay.stop().await;
}

async fn identical_filters_are_read_once(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_search_filters": 2}), |_| {}).await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let a = alice.post(&ch, "wombat one").await;
    let b = alice.post(&ch, "wombat wombat two").await;
    // Sixteen copies of one filter are one filter: within the bound, each event once.
    let same = json!({"search": "wombat", "#h": [ch], "limit": 500});
    let answer = alice.req(vec![same; 16]).await.expect("identical filters");
    assert_eq!(ids(&answer), [b.id.clone(), a.id.clone()]);
    relay.stop().await;
}

/// The newest candidates are ranked until `max_ranked_bytes` of their text: older ones
/// past it are not read at all.
async fn ranked_text_per_query_is_bounded(backend: TestBackend, name: &str) {
    let options = json!({"max_ranked_bytes": 70_000});
    let Some(relay) = relay_with(backend, name, options, |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let oldest = alice.post(&ch, &big("numbat", 30_000)).await;
    let older = alice.post(&ch, &big("numbat", 30_000)).await;
    let newer = alice.post(&ch, &big("numbat", 30_000)).await;
    let q = json!({"search": "numbat", "#h": [ch]});
    // Two of 30 KB fit in 70,000 bytes; the oldest after them would not.
    let two = sorted(vec![newer.id.clone(), older.id.clone()]);
    assert_eq!(sorted(alice.search(q.clone()).await), two);
    assert_eq!(sorted(alice.search_http(&relay, q).await), two);
    // Named by id, the oldest is a candidate again.
    let named = json!({"search": "numbat", "#h": [ch], "ids": [oldest.id]});
    assert_eq!(alice.search(named).await, vec![oldest.id]);
    relay.stop().await;
}

/// A process budget smaller than one page still ranks it (alone), and the bytes come
/// back: searches one after another all succeed.
async fn a_page_over_the_process_budget_is_ranked_alone(backend: TestBackend, name: &str) {
    let options = json!({"rank_memory_bytes": 1_048_576});
    let Some(relay) = relay_with(backend, name, options, |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let mut posted = Vec::new();
    for _ in 0..6 {
        posted.push(alice.post(&ch, &big("dugong", 200_000)).await.id);
    }
    posted.reverse();
    for _ in 0..3 {
        let found = alice.search(json!({"search": "dugong", "#h": [ch]})).await;
        assert_eq!(sorted(found), sorted(posted.clone()));
    }
    relay.stop().await;
}

async fn nip11_advertises_the_bounds(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (status, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    let search = &info["search"];
    assert_eq!(search["max_search_filters"], 4, "{search}");
    assert_eq!(search["max_ranked_bytes"], 8_388_608, "{search}");
    assert_eq!(search["rank_memory_bytes"], 67_108_864, "{search}");
    relay.stop().await;
}

/// COUNT examines at most `max_count_rows` matches per filter: past them it says so
/// instead of walking on or answering a smaller number.
/// COUNT stops examining a filter's matches one past `max_count_rows`: exact below it,
/// NIP-45 `approximate` (never an exact-looking smaller number) past it.
async fn counts_past_the_cap_are_approximate(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_count_rows": 3}), |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    for i in 0..3 {
        alice.post(&ch, &format!("axolotl {i}")).await;
    }
    let q = json!({"search": "axolotl", "#h": [ch]});
    let exact = alice
        .ws
        .count(&sub(), vec![q.clone()])
        .await
        .expect("COUNT");
    assert_eq!(exact, json!({"count": 3}), "at the cap: exact");
    alice.post(&ch, "axolotl 3").await;
    let past = alice
        .ws
        .count(&sub(), vec![q])
        .await
        .expect("COUNT past the cap");
    assert_eq!(past["approximate"], json!(true), "{past}");
    assert!(past["count"].as_u64().is_some_and(|n| n >= 3), "{past}");
    relay.stop().await;
}
