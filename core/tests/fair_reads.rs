//! Clients' reads take turns on the read threads, and each client has a bound on its
//! reads in flight, over the wire. One read thread, held by reads the test makes for
//! itself (the background lane), so what waits where is known without timing: a
//! client whose reads queue behind another's is answered after at most one of them,
//! and the read past a client's bound is refused `rate-limited:` naming the bound —
//! WebSocket `CLOSED` and HTTP 429 alike. Both backends.

use buzz_core::both_backends;
use buzz_core::store::Store;
use buzz_core::testkit::{authed, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::sync::mpsc;
use std::time::{Duration, Instant};

both_backends!(
    a_second_client_is_answered_while_the_first_ones_reads_wait,
    the_read_past_a_clients_bound_is_refused_over_the_wire,
);

const BOUND: usize = 3;

async fn relay(backend: TestBackend, name: &str) -> Option<TestRelay> {
    TestRelay::start_with(
        backend,
        name,
        |s| {
            s.storage.pool_size = 1;
            s.limits.max_reads_per_client = BOUND;
        },
        Vec::new(),
    )
    .await
}

/// A read the relay makes for itself (the background lane) that holds the read thread,
/// once it has it, until the returned sender is dropped; the receiver says it started.
fn hold(store: &Store) -> (mpsc::Sender<()>, tokio::sync::oneshot::Receiver<()>) {
    let (release, held) = mpsc::channel::<()>();
    let (started, running) = tokio::sync::oneshot::channel();
    let store = store.clone();
    tokio::spawn(async move {
        store
            .read(move |_| {
                let _ = started.send(());
                Ok(held.recv().is_ok())
            })
            .await
    });
    (release, running)
}

/// Wait until `n` reads are queued for the read thread.
async fn queued(store: &Store, n: usize) {
    let started = Instant::now();
    while store.reads_waiting() < n {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} reads queued, not {n}",
            store.reads_waiting()
        );
        tokio::task::yield_now().await;
    }
}

async fn send_req(ws: &mut WsClient, sub: &str, keys: &Keys) {
    let filter = json!({"kinds": [1], "authors": [keys.pubkey()]});
    ws.send(&json!(["REQ", sub, filter])).await.expect("REQ");
}

/// The subscription's end: `EOSE`, or the `CLOSED` message as `Err`.
async fn ended(ws: &mut WsClient, sub: &str) -> Result<(), String> {
    let end = ws
        .recv_where(|v: &Value| v[1] == sub && (v[0] == "EOSE" || v[0] == "CLOSED"))
        .await
        .expect("EOSE or CLOSED in time");
    match end[0].as_str() {
        Some("EOSE") => Ok(()),
        _ => Err(end[2].as_str().unwrap_or_default().to_owned()),
    }
}

async fn a_second_client_is_answered_while_the_first_ones_reads_wait(
    backend: TestBackend,
    name: &str,
) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let store = relay.running().services.store.clone();
    let (hog, bystander) = (Keys::generate(), Keys::generate());
    let mut hogs = Vec::new();
    for _ in 0..BOUND {
        hogs.push(authed(&relay, &hog).await);
    }
    let mut by = authed(&relay, &bystander).await;

    let (first, running) = hold(&store);
    running.await.expect("the hold runs");
    for (i, ws) in hogs.iter_mut().enumerate() {
        send_req(ws, &format!("hog{i}"), &hog).await;
    }
    queued(&store, BOUND).await;
    // Queued behind the hog's reads: with one queue for everyone the bystander would
    // wait behind this too.
    let (second, _) = hold(&store);
    queued(&store, BOUND + 1).await;
    send_req(&mut by, "by", &bystander).await;
    queued(&store, BOUND + 2).await;

    drop(first);
    // One hog read, then the bystander's; the second hold now has the thread.
    assert_eq!(ended(&mut by, "by").await, Ok(()));
    assert_eq!(
        store.reads_waiting(),
        BOUND - 1,
        "the hog's other reads still wait"
    );
    drop(second);
    for (i, ws) in hogs.iter_mut().enumerate() {
        assert_eq!(ended(ws, &format!("hog{i}")).await, Ok(()));
    }
    relay.stop().await;
}

async fn the_read_past_a_clients_bound_is_refused_over_the_wire(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let store = relay.running().services.store.clone();
    let (hog, other) = (Keys::generate(), Keys::generate());
    let mut hogs = Vec::new();
    for _ in 0..BOUND {
        hogs.push(authed(&relay, &hog).await);
    }
    let mut last = authed(&relay, &hog).await;
    let mut calm = authed(&relay, &other).await;

    let (held, running) = hold(&store);
    running.await.expect("the hold runs");
    for (i, ws) in hogs.iter_mut().enumerate() {
        send_req(ws, &format!("hog{i}"), &hog).await;
    }
    queued(&store, BOUND).await;
    let refusal = format!(
        "rate-limited: {BOUND} reads already in flight for this client \
         (limits.max_reads_per_client); wait for an answer"
    );
    // The next read of the same pubkey, on another connection or over HTTP, is refused
    // at once (the thread is still held).
    send_req(&mut last, "over", &hog).await;
    assert_eq!(ended(&mut last, "over").await, Err(refusal.clone()));
    let query = serde_json::to_vec(&json!([{"authors": [hog.pubkey()]}])).expect("json");
    let (status, answer) = relay.http().post_signed(&hog, "/query", &query).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (429, Some(refusal.as_str()))
    );
    // Another client is not held to the hog's count.
    send_req(&mut calm, "calm", &other).await;
    queued(&store, BOUND + 1).await;

    drop(held);
    for (i, ws) in hogs.iter_mut().enumerate() {
        assert_eq!(ended(ws, &format!("hog{i}")).await, Ok(()));
    }
    assert_eq!(ended(&mut calm, "calm").await, Ok(()));
    // Answered, the hog may read again.
    send_req(&mut last, "again", &hog).await;
    assert_eq!(ended(&mut last, "again").await, Ok(()));
    relay.stop().await;
}
