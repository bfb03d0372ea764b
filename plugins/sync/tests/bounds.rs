//! Every bound of `[plugins.sync]` over the wire: records per reconciliation, sessions
//! per connection, the idle timeout, the process's record budget (which also shows a
//! closed connection's sessions are dropped). Both backends.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::TestBackend;
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

both_backends!(
    a_set_over_max_sync_records_is_blocked,
    a_connection_holds_at_most_its_sessions,
    an_idle_session_is_dropped,
    the_process_budget_bounds_records_and_a_closed_connection_frees_them,
);

/// The initial message of a client holding nothing.
fn empty_first() -> String {
    initiator(&[], 0).1
}

async fn a_set_over_max_sync_records_is_blocked(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| set(s, "max_sync_records", json!(10))).await else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let big = create_channel(&mut ws, &alice, false).await;
    post(&mut ws, &alice, &big, 11).await;
    let small = create_channel(&mut ws, &alice, false).await;
    let ten = post(&mut ws, &alice, &small, 10).await;

    let refused = reconcile(&mut ws, "s1", json!({"#h": [big], "kinds": [9]}), &[])
        .await
        .expect_err("11 records");
    assert!(refused.starts_with("blocked: "), "{refused}");
    assert!(refused.contains("max_sync_records"), "{refused}");
    // Exactly the bound passes; so does the big channel narrowed by `limit`.
    let got = reconcile(&mut ws, "s2", json!({"#h": [small], "kinds": [9]}), &[])
        .await
        .expect("10 records");
    assert_eq!(got.need.len(), ten.len());
    let narrowed = reconcile(
        &mut ws,
        "s3",
        json!({"#h": [big], "kinds": [9], "limit": 10}),
        &[],
    )
    .await
    .expect("limit 10");
    assert_eq!(narrowed.need.len(), 10);
    // The refused session is not open.
    let answer = ask(&mut ws, "s1", json!(["NEG-MSG", "s1", "61"])).await;
    assert!(answer.is_err(), "{answer:?}");
    still_serves(&mut ws).await;
    relay.stop().await;
}

async fn a_connection_holds_at_most_its_sessions(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_sessions_per_connection", json!(2))
    })
    .await
    else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let open = |sub: &str| json!(["NEG-OPEN", sub, {"kinds": [1]}, empty_first()]);
    assert!(ask(&mut ws, "a", open("a")).await.is_ok());
    assert!(ask(&mut ws, "b", open("b")).await.is_ok());
    let third = ask(&mut ws, "c", open("c"))
        .await
        .expect_err("a third session");
    assert!(third.starts_with("blocked: "), "{third}");
    assert!(third.contains("max_sessions_per_connection"), "{third}");
    // Reopening an open id replaces it (NIP-77) and needs no room.
    assert!(ask(&mut ws, "b", open("b")).await.is_ok());
    // Another connection has its own room.
    let mut other = authed(&relay, &alice).await;
    assert!(ask(&mut other, "c", open("c")).await.is_ok());
    // A NEG-CLOSE makes room.
    ws.send(&json!(["NEG-CLOSE", "a"])).await.expect("send");
    assert!(ask(&mut ws, "c", open("c")).await.is_ok());
    still_serves(&mut ws).await;
    relay.stop().await;
}

async fn an_idle_session_is_dropped(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "idle_timeout_secs", json!(1));
        set(s, "max_sessions_per_connection", json!(1));
    })
    .await
    else {
        return;
    };
    let alice = Keys::generate();
    let mut ws = authed(&relay, &alice).await;
    let open = json!(["NEG-OPEN", "s", {"kinds": [1]}, empty_first()]);
    assert!(ask(&mut ws, "s", open.clone()).await.is_ok());
    // Within the timeout the session answers (and its clock restarts).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(ask(&mut ws, "s", json!(["NEG-MSG", "s", "61"]))
        .await
        .is_ok());
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let late = ask(&mut ws, "s", json!(["NEG-MSG", "s", "61"]))
        .await
        .expect_err("timed out");
    assert!(
        late.starts_with("closed: ") && late.contains("idle_timeout_secs"),
        "{late}"
    );
    // Its slot is free again.
    assert!(ask(
        &mut ws,
        "t",
        json!(["NEG-OPEN", "t", {"kinds": [1]}, empty_first()])
    )
    .await
    .is_ok());
    relay.stop().await;
}

async fn the_process_budget_bounds_records_and_a_closed_connection_frees_them(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_sync_records", json!(20));
        set(s, "max_records_in_memory", json!(20));
    })
    .await
    else {
        return;
    };
    let alice = Keys::generate();
    let mut first = authed(&relay, &alice).await;
    let channel = create_channel(&mut first, &alice, false).await;
    post(&mut first, &alice, &channel, 15).await;
    let open = |sub: &str| json!(["NEG-OPEN", sub, {"#h": [channel], "kinds": [9]}, empty_first()]);
    assert!(
        ask(&mut first, "s", open("s")).await.is_ok(),
        "15 of 20 records"
    );

    // Another reader: alice's own share would bind first (`tests/shares.rs`).
    let mut second = authed(&relay, &Keys::generate()).await;
    let busy = ask(&mut second, "s", open("s")).await.expect_err("no room");
    assert!(
        busy.starts_with("error: ") && busy.contains("max_records_in_memory"),
        "{busy}"
    );
    // Sessions of a connection that ends are dropped with it.
    first.close().await;
    let started = Instant::now();
    loop {
        match ask(&mut second, "s", open("s")).await {
            Ok(_) => break,
            Err(reason) if started.elapsed() < Duration::from_secs(3) => {
                assert!(reason.starts_with("error: "), "{reason}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(reason) => panic!("the closed connection's records were not freed: {reason}"),
        }
    }
    relay.stop().await;
}
