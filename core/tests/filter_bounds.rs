//! Bounds on what subscriptions may hold (issue 10, items 2 and 3): values per filter
//! and per query, filter bytes per connection — each refused with `CLOSED invalid:` /
//! HTTP 400 naming the bound, advertised in NIP-11, and nothing changes.

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::{json, Map, Value};

both_backends!(
    values_per_filter_and_query_are_capped,
    filter_bytes_per_connection_are_capped,
);

/// A filter with `keys` tag names of `values` values each.
fn wide_filter(keys: usize, values: usize, len: usize) -> Value {
    let mut filter = Map::new();
    for k in 0..keys {
        let list: Vec<String> = (0..values).map(|v| format!("{v:0len$}")).collect();
        filter.insert(
            format!("#{}", (b'a' + (k % 26) as u8) as char).repeat(1 + k / 26),
            json!(list),
        );
    }
    Value::Object(filter)
}

async fn values_per_filter_and_query_are_capped(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let event = keys.sign(
        1,
        vec![tag(&["t", "0001"]), tag(&["p", "0002"])],
        "x",
        now(),
    );
    assert!(ws.publish(&event).await.0);

    // The request: 40 tag keys × 1,000 values in one filter.
    let err = ws
        .req("wide", vec![wide_filter(40, 1_000, 4)])
        .await
        .expect_err("CLOSED");
    assert!(
        err.starts_with("invalid:") && err.contains("max_filter_values"),
        "{err}"
    );
    // Within one filter's bound but over the query's.
    let filters = vec![
        wide_filter(2, 1_000, 4),
        wide_filter(2, 1_000, 4),
        wide_filter(1, 1_000, 4),
    ];
    let err = ws.req("many", filters).await.expect_err("CLOSED");
    assert!(
        err.starts_with("invalid:") && err.contains("max_query_values"),
        "{err}"
    );
    // At the bound it is served (no SQL variable limit on either backend).
    let list: Vec<String> = (0..1_000).map(|v| format!("{v:04}")).collect();
    let at = json!({"#t": list, "#p": list});
    let got = ws.req("at", vec![at.clone(), at]).await.expect("served");
    assert_eq!(got, vec![event.clone()]);

    // POST /query: 400 with the same text.
    let body = serde_json::to_vec(&json!([wide_filter(40, 1_000, 4)])).expect("json");
    let (status, answer) = relay.http().post_signed(&keys, "/query", &body).await;
    assert_eq!(status, 400, "{answer}");
    let text = answer["error"].as_str().unwrap_or("");
    assert!(
        text.starts_with("invalid:") && text.contains("max_filter_values"),
        "{text}"
    );

    // Advertised.
    let (_, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(info["limitation"]["max_filter_values"], 2_000);
    assert_eq!(info["limitation"]["max_query_values"], 4_000);
    assert_eq!(info["limitation"]["max_filter_bytes"], 1_048_576);
    relay.stop().await;
}

async fn filter_bytes_per_connection_are_capped(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut ws = relay.ws().await;
    // The subscriptions: ~445 KB of filter each (2,000 values of 220 bytes).
    let big = wide_filter(2, 1_000, 220);
    let size = big.to_string().len();
    assert!(size > 440_000 && size < 524_288 - 100, "{size}");
    ws.req("s1", vec![big.clone()]).await.expect("first fits");
    ws.req("s2", vec![big.clone()]).await.expect("second fits");
    for i in 3..8 {
        let err = ws
            .req(&format!("s{i}"), vec![big.clone()])
            .await
            .expect_err("over the connection's filter bytes");
        assert!(
            err.starts_with("invalid:") && err.contains("max_filter_bytes"),
            "{err}"
        );
    }
    // Replacing a subscription gives its bytes back; closing one frees room.
    ws.req("s1", vec![big.clone()])
        .await
        .expect("replacement fits");
    ws.send(&json!(["CLOSE", "s2"])).await.expect("CLOSE");
    ws.req("s9", vec![big.clone()])
        .await
        .expect("room after CLOSE");
    // Another connection has its own budget.
    let mut other = relay.ws().await;
    other.req("o1", vec![big]).await.expect("own budget");
    relay.stop().await;
}
