//! Group commit under bursts, on both backends: every event of a burst is stored once
//! with its whole tag index, storage order is submission order, and a failing event
//! rolls back alone. On PostgreSQL the writer inserts runs of independent events with
//! one statement per table, so these are the cases where that could go wrong.

use buzz_core::both_backends;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, PluginEntry, PluginManifest, Services, Tx};
use buzz_core::store::InsertOutcome;
use buzz_core::stored::StoredEvent;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Context;

both_backends!(
    a_burst_stores_every_event_once_with_its_tags,
    a_failing_event_in_a_burst_rolls_back_alone,
    submission_order_is_storage_order,
    a_hook_that_reads_events_sees_them_one_at_a_time,
    events_sent_before_a_close_are_all_stored,
);

/// Send every event without waiting, then collect one OK per event:
/// id → (accepted, message).
async fn burst(ws: &mut WsClient, events: &[Event]) -> HashMap<String, (bool, String)> {
    let oks = ws.burst(events).await;
    assert_eq!(oks.len(), events.len(), "an OK for every EVENT");
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

/// A client that sends a burst and closes at once, without reading a single OK: every
/// EVENT before its Close frame is read and stored once (the relay answers into a
/// connection that is going away; nothing it took is dropped with it).
async fn events_sent_before_a_close_are_all_stored(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let t = now();
    let events: Vec<Event> = (0..40)
        .map(|i| keys.sign(1, vec![tag(&["t", "leaving"])], &format!("note {i}"), t))
        .collect();
    let mut ws = relay.ws().await;
    for event in &events {
        ws.send(&json!(["EVENT", event])).await.expect("send EVENT");
    }
    ws.leave().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let stored = relay.stored_in_order(keys.pubkey()).await;
        if stored.len() == events.len() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {} stored",
            stored.len(),
            events.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for event in &events {
        assert_eq!(relay.stored_rows(&event.id).await, 1);
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
            Box::pin(store.write_event(stored, true, |_, outcome, _| Ok(outcome)))
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

/// What the observing plugin's hook saw: per author, for each of their kind-1 events,
/// how many of their events were stored when the hook ran.
static SEEN: Mutex<Option<HashMap<String, Vec<i64>>>> = Mutex::new(None);

/// A plugin whose in-transaction hook reads the events table (as one that looks for a
/// current version would), and says so with `event_is_independent` (false for kind 1).
struct Observer;

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct NoOptions {}

impl PluginManifest for Observer {
    const NAME: &'static str = "group_commit_observer";
    const ENABLED_BY_DEFAULT: bool = true;
    type Config = NoOptions;

    fn build(_config: NoOptions, _services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(Observer))
    }
}

#[async_trait::async_trait]
impl Plugin for Observer {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn event_is_independent(&self, event: &Event) -> bool {
        event.kind != 1
    }

    fn on_event_stored(&self, tx: &mut Tx<'_, '_>, stored: &StoredEvent) -> Result<(), Reason> {
        use buzz_core::store::schema::events;
        use diesel::prelude::*;
        if stored.event.kind != 1 {
            return Ok(());
        }
        let author = stored.event.pubkey.clone();
        let count: i64 = buzz_core::with_conn!(&mut *tx.conn, |c| events::table
            .filter(events::pubkey.eq(&author))
            .count()
            .get_result(c))?;
        let mut seen = SEEN.lock().map_err(|_| Reason::invalid("poisoned"))?;
        seen.get_or_insert_with(HashMap::new)
            .entry(author)
            .or_default()
            .push(count);
        Ok(())
    }
}

/// An event whose plugin hook reads other events is never grouped: each hook sees its
/// own row and those before it, not the rows of events queued behind it (on SQLite
/// that is simply how the writer works).
async fn a_hook_that_reads_events_sees_them_one_at_a_time(backend: TestBackend, name: &str) {
    let Some(relay) =
        TestRelay::start_with(backend, name, |_| {}, vec![PluginEntry::of::<Observer>()]).await
    else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let t = now();
    let events: Vec<Event> = (0..150)
        .map(|i| keys.sign(1, vec![tag(&["t", "seen"])], &format!("n{i}"), t))
        .collect();
    let oks = burst(&mut ws, &events).await;
    assert!(oks.values().all(|(accepted, _)| *accepted), "{oks:?}");
    let mut seen = SEEN
        .lock()
        .expect("lock")
        .as_mut()
        .and_then(|m| m.remove(keys.pubkey()))
        .expect("the hook ran");
    seen.sort_unstable();
    assert_eq!(seen, (1..=150).collect::<Vec<i64>>());
    relay.stop().await;
}
