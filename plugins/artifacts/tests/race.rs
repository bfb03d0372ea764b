//! The compare-and-swap under contention: 16 writers submit edits naming the same prev
//! at once, 50 rounds — exactly one `OK true` per round, 15 `conflict:` (HTTP 409), never
//! two winners. Then the same across two relay processes sharing one PostgreSQL.

use buzz_core::both_backends;
mod common;

use buzz_core::config::Settings;
use buzz_core::testkit::{HttpClient, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use common::*;
use futures_util::future::join_all;
use serde_json::json;

both_backends!(sixteen_writers_one_winner_per_round);

const WRITERS: usize = 16;

/// One round: every writer posts its own edit of `current` at once; returns the winner.
async fn round(clients: &[(HttpClient, Keys)], current: &Event, round: usize) -> Event {
    let edits: Vec<Event> = clients
        .iter()
        .enumerate()
        .map(|(i, (_, keys))| {
            Draft::after(current, "update")
                .content(&format!("{{\"round\":{round},\"writer\":{i}}}"))
                .sign(keys)
        })
        .collect();
    let answers = join_all(clients.iter().zip(&edits).map(|((http, keys), event)| {
        let body = serde_json::to_vec(event).expect("event JSON");
        async move { http.post_signed(keys, "/events", &body).await }
    }))
    .await;
    let mut winners = Vec::new();
    for ((status, body), event) in answers.into_iter().zip(edits) {
        match status {
            200 => {
                assert_eq!(body["accepted"], json!(true), "{body}");
                winners.push(event);
            }
            409 => assert!(
                body["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("conflict:")),
                "{body}"
            ),
            other => panic!("round {round}: status {other}: {body}"),
        }
    }
    assert_eq!(winners.len(), 1, "round {round}: exactly one winner");
    winners.remove(0)
}

async fn race(relays: &[&TestRelay], writers: &mut [User], rounds: usize) -> (Event, Vec<String>) {
    let ch = writers[0].create_channel(false).await;
    let mut current = writers[0].put(&Draft::create(&ch, "contended")).await;
    let d = current.tag_value("d").unwrap_or_default().to_owned();
    let clients: Vec<(HttpClient, Keys)> = writers
        .iter()
        .enumerate()
        .map(|(i, w)| (relays[i % relays.len()].http(), w.keys.clone()))
        .collect();
    let mut chain = vec![current.id.clone()];
    for r in 0..rounds {
        current = round(&clients, &current, r).await;
        chain.push(current.id.clone());
    }
    // History is exactly the chain of winners, in order, on every relay.
    for relay in relays {
        assert_eq!(ids(&writers[0].history(relay, &d).await), chain);
        assert_eq!(
            ids(&writers[0].current(relay, json!({"#d": [d]})).await),
            vec![current.id.clone()]
        );
    }
    (current, chain)
}

async fn sixteen_writers_one_winner_per_round(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        writers.push(User::new(&relay).await);
    }
    race(&[&relay], &mut writers, 50).await;
    relay.stop().await;
}

/// Two relays (two writer connections, two processes' worth of state) on one PostgreSQL
/// database: racing edits from both still have one winner per round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_relays_one_postgres_one_winner() {
    let name = "two_relays_one_postgres_one_winner";
    let Some(first) = relay(TestBackend::Postgres, name).await else {
        return;
    };
    let url = first.settings.storage.database_url.clone();
    let key = first.running().services.relay_keys.secret_hex();
    let same_database = move |s: &mut Settings| {
        s.storage.database_url = url;
        s.relay.private_key = key;
    };
    let second = TestRelay::start_with(
        TestBackend::Postgres,
        name,
        same_database,
        vec![buzz_core::plugin::PluginEntry::of::<
            buzz_artifacts::ArtifactsPlugin,
        >()],
    )
    .await
    .expect("second relay");
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        writers.push(User::new(&first).await);
    }
    race(&[&first, &second], &mut writers, 20).await;
    second.stop().await;
    first.stop().await;
}
