//! Group commit under bursts, on both backends: every event of a burst is stored once
//! with its whole tag index, storage order is submission order, and a failing event
//! rolls back alone. On PostgreSQL the writer inserts runs of independent events with
//! one statement per table, so these are the cases where that could go wrong.

use buzz_core::both_backends;
use buzz_core::event::{Event, StoredEvent};
use buzz_core::keys::Keys;
use buzz_core::store::InsertOutcome;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use serde_json::json;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::Context;

both_backends!(
    a_burst_stores_every_event_once_with_its_tags,
    a_failing_event_in_a_burst_rolls_back_alone,
    submission_order_is_storage_order,
);

/// Send every event without waiting, then collect one OK per event:
/// id → (accepted, message).
async fn burst(ws: &mut WsClient, events: &[Event]) -> HashMap<String, (bool, String)> {
    for event in events {
        ws.send(&json!(["EVENT", event])).await.expect("send EVENT");
    }
    let mut oks = HashMap::new();
    while oks.len() < events.len() {
        let msg = ws.recv().await.expect("an OK for every EVENT");
        if msg[0] == "OK" {
            let id = msg[1].as_str().unwrap_or_default().to_owned();
            let answer = (
                msg[2].as_bool().unwrap_or(false),
                msg[3].as_str().unwrap_or_default().to_owned(),
            );
            oks.insert(id, answer);
        }
    }
    oks
}

async fn a_burst_stores_every_event_once_with_its_tags(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let t = now();
    let shared_author = Keys::generate();
    // One event every publisher sends in the middle of its burst: stored once, the
    // other copies answered as duplicates.
    let shared = shared_author.sign(1, vec![tag(&["t", "shared"])], "everyone", t);
    let publishers: Vec<Keys> = (0..6).map(|_| Keys::generate()).collect();
    let mut tasks = Vec::new();
    for keys in publishers.clone() {
        let mut ws = relay.ws().await;
        let mut events: Vec<Event> = (0..80)
            .map(|i| {
                let tags = vec![tag(&["t", "burst"]), tag(&["x", &format!("{i}")])];
                keys.sign(1, tags, &format!("note {i}"), t)
            })
            .collect();
        events.insert(40, shared.clone());
        tasks.push(tokio::spawn(async move { burst(&mut ws, &events).await }));
    }
    let mut shared_answers = Vec::new();
    for task in tasks {
        let oks = task.await.expect("publisher");
        assert_eq!(oks.len(), 81);
        for (id, (accepted, message)) in oks {
            assert!(accepted, "{id}: {message}");
            if id == shared.id {
                shared_answers.push(message);
            }
        }
    }
    shared_answers.sort();
    assert_eq!(shared_answers[0], "", "one copy is stored");
    assert!(
        shared_answers[1..]
            .iter()
            .all(|m| m.starts_with("duplicate:")),
        "{shared_answers:?}"
    );
    assert_eq!(relay.stored_rows(&shared.id).await, 1);
    assert_eq!(
        relay.stored_in_order(shared_author.pubkey()).await,
        vec![(shared.id.clone(), 1)]
    );
    for keys in &publishers {
        let rows = relay.stored_in_order(keys.pubkey()).await;
        assert_eq!(rows.len(), 80);
        assert!(rows.iter().all(|(_, tags)| *tags == 2), "{rows:?}");
    }
    relay.stop().await;
}

async fn a_failing_event_in_a_burst_rolls_back_alone(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&keys).await.0);
    let channel = uuid::Uuid::new_v4().to_string();
    let t = now();
    let create = keys.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "burst"])],
        "",
        t,
    );
    assert!(ws.publish(&create).await.0);

    let missing = "ab".repeat(32);
    let mut events: Vec<Event> = (0..60)
        .map(|i| keys.sign(9, vec![tag(&["h", &channel])], &format!("m{i}"), t))
        .collect();
    let bad = keys.sign(
        9,
        vec![tag(&["h", &channel]), tag(&["e", &missing, "", "reply"])],
        "orphan",
        t,
    );
    events.insert(30, bad.clone());
    let oks = burst(&mut ws, &events).await;

    let (accepted, message) = &oks[&bad.id];
    assert!(!accepted);
    assert_eq!(message, "invalid: reply parent not found");
    assert_eq!(relay.stored_rows(&bad.id).await, 0);
    assert!(relay.thread_row(&bad.id).await.is_none());
    for event in events.iter().filter(|e| e.id != bad.id) {
        let (accepted, message) = &oks[&event.id];
        assert!(accepted, "{message}");
        assert_eq!(relay.stored_rows(&event.id).await, 1);
        let row = relay.thread_row(&event.id).await.expect("thread row");
        assert_eq!(row.depth, 0);
    }
    relay.stop().await;
}

/// Jobs reach the writer in submission order; grouped or not, `seq` follows it.
async fn submission_order_is_storage_order(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let store = relay.running().services.store.clone();
    let community = store
        .ensure_community("localhost", "Local")
        .await
        .expect("community");
    let keys = Keys::generate();
    let t = now();
    let events: Vec<Event> = (0..300)
        .map(|i| {
            // A replaceable profile in the middle: never grouped, it splits the run.
            let kind = if i == 150 { 0 } else { 1 };
            keys.sign(kind, vec![tag(&["n", &i.to_string()])], "", t - i)
        })
        .collect();
    let mut writes: Vec<_> = events
        .iter()
        .map(|event| {
            let stored = Arc::new(StoredEvent {
                channel: None,
                event: event.clone(),
                community_id: community,
                received_at: t * 1_000_000,
            });
            Box::pin(store.write_event(stored, true, |_, outcome| Ok(outcome)))
        })
        .collect();
    // Poll each write once, in order: that queues it (the queue has room for all), so
    // the writer receives them in exactly this order. Then wait for the answers.
    // Unconstrained: tokio's cooperative budget would otherwise refuse a send now and
    // then, which would queue that write later.
    let outcomes = tokio::task::unconstrained(async move {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        for write in &mut writes {
            assert!(
                write.as_mut().poll(&mut cx).is_pending(),
                "answered before commit"
            );
        }
        futures_util::future::join_all(writes).await
    })
    .await;
    let mut seqs = Vec::new();
    for outcome in outcomes {
        match outcome.expect("stored") {
            InsertOutcome::Stored { seq } => seqs.push(seq),
            other => panic!("expected Stored, got {other:?}"),
        }
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let stored: Vec<String> = relay
        .stored_in_order(keys.pubkey())
        .await
        .into_iter()
        .map(|(id, tags)| {
            assert_eq!(tags, 1);
            id
        })
        .collect();
    let sent: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    assert_eq!(stored, sent);
    relay.stop().await;
}
