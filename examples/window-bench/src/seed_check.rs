//! The seeder stores what ingest stores: the same signed events published over the wire
//! to one relay and bulk-loaded into another leave the same rows (events, tag index,
//! thread metadata), and their arrival columns point at the same events.

use crate::seed::Seeder;
use buzz_core::testkit::{channel_rows, now, ChannelRows, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use std::collections::HashMap;

buzz_core::both_backends!(bulk_seed_matches_ingest);

/// Threads of 1 root + 9 replies; the newest get reactions.
const THREADS: usize = 3;

/// Stored rows with arrival times replaced by what they point at: ingest stamps the
/// clock at arrival, the seeder the second each event is dated, so the times differ by
/// design while the events they name must not.
#[derive(Debug, PartialEq, Eq)]
struct Normalized {
    rows: ChannelRows,
    /// Per thread row: the event whose arrival `last_reply_received_at` is.
    reply_arrivals: Vec<(String, Option<String>)>,
    /// The event whose arrival `channels.last_timeline_received_at` is.
    timeline_arrival: Option<String>,
}

fn normalize(mut rows: ChannelRows) -> Normalized {
    // Conversation events (those with thread rows) arrive in distinct seconds here.
    let by_arrival: HashMap<i64, String> = rows
        .events
        .iter()
        .filter(|e| rows.threads.iter().any(|t| t.event_id == e.id))
        .map(|e| (e.received_at, e.id.clone()))
        .collect();
    let name = |at: Option<i64>| at.map(|at| by_arrival.get(&at).cloned().unwrap_or_default());
    let reply_arrivals = rows
        .threads
        .iter()
        .map(|t| (t.event_id.clone(), name(t.last_reply_received_at)))
        .collect();
    let timeline_arrival = name(rows.last_timeline_received_at);
    for event in &mut rows.events {
        event.received_at = 0;
    }
    for thread in &mut rows.threads {
        thread.last_reply_received_at = None;
    }
    rows.last_timeline_received_at = None;
    Normalized {
        rows,
        reply_arrivals,
        timeline_arrival,
    }
}

async fn community(relay: &TestRelay) -> i64 {
    relay
        .running()
        .services
        .store
        .ensure_community("localhost", "Local")
        .await
        .expect("community")
}

/// Create the open channel `channel` on `relay` over the wire.
async fn create_channel(relay: &TestRelay, owner: &Keys, channel: &str) {
    let mut ws = relay.ws().await;
    assert!(ws.auth(owner).await.0, "owner AUTH");
    let create = owner.sign(
        9007,
        vec![
            vec!["h".into(), channel.into()],
            vec!["name".into(), "seeded".into()],
        ],
        "",
        now(),
    );
    let (ok, msg) = ws.publish(&create).await;
    assert!(ok, "create channel: {msg}");
}

async fn bulk_seed_matches_ingest(backend: TestBackend, test: &str) {
    let Some(ingested) = TestRelay::start(backend, test).await else {
        return;
    };
    let Some(seeded) = TestRelay::start(backend, test).await else {
        return;
    };
    let owner = Keys::generate();
    let channel = uuid::Uuid::new_v4().to_string();
    create_channel(&ingested, &owner, &channel).await;
    create_channel(&seeded, &owner, &channel).await;

    let authors: Vec<Keys> = (0..3).map(|_| Keys::generate()).collect();
    let seeder = Seeder {
        store: seeded.running().services.store.clone(),
        community_id: community(&seeded).await,
        authors: authors.clone(),
    };
    // Recent enough for ingest's clock-skew bound.
    let planned = seeder.plan(&channel, 0, THREADS, now() - 120, true);
    let all: Vec<Event> = planned
        .events
        .iter()
        .chain(&planned.reactions)
        .cloned()
        .collect();
    let ids: Vec<String> = all.iter().map(|e| e.id.clone()).collect();

    // Over the wire, one event at a time, each by its authenticated author.
    let mut clients = HashMap::new();
    for keys in &authors {
        let mut ws = ingested.ws().await;
        assert!(ws.auth(keys).await.0, "author AUTH");
        clients.insert(keys.pubkey().to_owned(), ws);
    }
    for event in &all {
        let ws = clients
            .get_mut(&event.pubkey)
            .expect("an author's connection");
        let (ok, msg) = ws.publish(event).await;
        assert!(ok, "ingest {} (kind {}): {msg}", event.id, event.kind);
    }
    seeder
        .store_planned(&channel, planned)
        .await
        .expect("bulk seed");

    let through_ingest = channel_rows(
        &ingested.running().services.store,
        community(&ingested).await,
        &channel,
        ids.clone(),
    )
    .await
    .expect("ingested rows");
    let through_seed = channel_rows(&seeder.store, seeder.community_id, &channel, ids)
        .await
        .expect("seeded rows");
    assert_eq!(through_ingest.events.len(), all.len());
    assert_eq!(through_ingest.threads.len(), THREADS * 10);
    let (ingest, seed) = (normalize(through_ingest), normalize(through_seed));
    assert!(
        ingest.timeline_arrival.is_some() && ingest.reply_arrivals.iter().any(|(_, a)| a.is_some()),
        "ingest kept arrival columns: {ingest:?}"
    );
    assert_eq!(ingest, seed);
    ingested.stop().await;
    seeded.stop().await;
}
