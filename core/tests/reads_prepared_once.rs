//! A REQ's (and a COUNT's) statements are kept prepared by the read connection that runs them, on both
//! backends: their text depends on the filter's shape, not on how many ids, authors,
//! kinds, tag values or channels its lists hold (`store/one_of.rs`). diesel's `eq_any`
//! wrote one placeholder per value on SQLite and never cached the statement, so every
//! REQ was parsed and planned again (issue 23).
//!
//! How: `testkit::statements` records, for the read threads' connections, which
//! statements the cache took in and which ran.

use buzz_core::testkit::statements::{
    is_transaction_control, record_statements_of, start_recording, stop_recording,
};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The read threads' name (`store/read_workers.rs`).
const READ_THREAD: &str = "buzz-store-read";

/// Statements run as plain SQL, with nothing to prepare: transaction control, pragmas,
/// and on PostgreSQL r2d2's `SELECT 1` check of each connection it hands out (a
/// connection to a server can go stale; SQLite's pool does not check).
fn is_plain(sql: &str, backend: TestBackend) -> bool {
    if matches!(backend, TestBackend::Postgres) && sql.trim() == "SELECT 1" {
        return true;
    }
    let upper = sql.trim_start().to_ascii_uppercase();
    is_transaction_control(sql)
        || ["PRAGMA", "ANALYZE", "SET"]
            .iter()
            .any(|word| upper.starts_with(word))
}

/// Run `round` while recording; the texts the read threads ran, and those of them their
/// connection's cache never took in.
async fn recorded(
    backend: TestBackend,
    round: impl std::future::Future<Output = ()>,
) -> (BTreeSet<String>, Vec<String>) {
    start_recording();
    round.await;
    let recorded = stop_recording();
    let plain = |sql: &str| is_plain(sql, backend);
    (recorded.texts(plain), recorded.uncached(plain))
}

/// The filters of one round: every list holds `n` values (n ≥ 2), plus one-value lists.
fn filters(
    notes: &[Event],
    authors: &[String],
    channels: &[String],
    n: usize,
) -> Vec<(Value, usize)> {
    let ids: Vec<&str> = notes.iter().take(n).map(|e| e.id.as_str()).collect();
    let topics: Vec<String> = (0..n).map(|i| format!("topic{i}")).collect();
    let kinds = [1u32, 7, 30023, 9041, 1111];
    vec![
        (json!({"kinds": [1], "limit": 50}), notes.len()),
        (json!({"kinds": kinds[..n], "limit": 50}), notes.len()),
        (
            json!({"authors": [authors[0]], "limit": 20}),
            notes.len() / authors.len(),
        ),
        (
            json!({"authors": authors[..n].to_vec(), "limit": 20}),
            notes.len() / authors.len() * n,
        ),
        (json!({"#t": [topics[0]], "limit": 20}), 1),
        (json!({"#t": topics, "limit": 20}), n),
        (json!({"ids": ids}), n),
        (json!({"kinds": [9], "#h": channels[..n].to_vec()}), n),
    ]
}

/// One test for both backends, one after the other: the recording is process-wide.
#[tokio::test]
async fn reqs_of_one_shape_share_prepared_statements_whatever_their_lists_hold() {
    record_statements_of(READ_THREAD);
    for backend in [TestBackend::Sqlite, TestBackend::Postgres] {
        let Some(relay) = TestRelay::start(backend, "reads_prepared_once").await else {
            continue;
        };
        let keys: Vec<Keys> = (0..5).map(|_| Keys::generate()).collect();
        let authors: Vec<String> = keys.iter().map(|k| k.pubkey().to_owned()).collect();
        // Channels are the admin's, so each author's count is their notes alone.
        let admin = Keys::generate();
        let mut ws = relay.ws().await;
        assert!(ws.auth(&admin).await.0);
        let mut notes = Vec::new();
        for i in 0..10 {
            let note =
                keys[i % keys.len()].sign(1, vec![tag(&["t", &format!("topic{i}")])], "n", now());
            assert!(ws.publish(&note).await.0);
            notes.push(note);
        }
        let mut channels = Vec::new();
        for _ in 0..5 {
            let channel = uuid::Uuid::new_v4().to_string();
            let create = admin.sign(
                9007,
                vec![tag(&["h", &channel]), tag(&["name", "c"])],
                "",
                now(),
            );
            assert!(ws.publish(&create).await.0);
            let message = admin.sign(9, vec![tag(&["h", &channel])], "m", now());
            assert!(ws.publish(&message).await.0);
            channels.push(channel);
        }
        // Warm: the access facts, the first prepare of every shape.
        for (i, (filter, _)) in filters(&notes, &authors, &channels, 2)
            .into_iter()
            .enumerate()
        {
            ws.req(&format!("w{i}"), vec![filter])
                .await
                .expect("warm REQ");
        }
        let mut rounds = Vec::new();
        for n in [3, 5] {
            let mut ws = relay.ws().await;
            assert!(ws.auth(&admin).await.0);
            let cases = filters(&notes, &authors, &channels, n);
            let (texts, uncached) = recorded(backend, async {
                for (i, (filter, expected)) in cases.iter().enumerate() {
                    let got = ws.req(&format!("r{n}-{i}"), vec![filter.clone()]).await;
                    let got = got.unwrap_or_else(|e| panic!("{backend:?} {filter}: {e}"));
                    assert_eq!(got.len(), *expected, "{backend:?}: {filter}");
                    // COUNT writes the same lists (no limit here cuts an answer).
                    let counted = ws.count(&format!("c{n}-{i}"), vec![filter.clone()]).await;
                    let counted =
                        counted.unwrap_or_else(|e| panic!("{backend:?} COUNT {filter}: {e}"));
                    assert_eq!(
                        counted["count"],
                        json!(expected),
                        "{backend:?}: COUNT {filter}"
                    );
                }
            })
            .await;
            assert!(
                !texts.is_empty(),
                "{backend:?}: the read threads' statements were recorded"
            );
            assert!(
                uncached.is_empty(),
                "{backend:?}: lists of {n} were prepared anew:\n{}",
                uncached.join("\n")
            );
            rounds.push(texts);
        }
        let [three, five] = [&rounds[0], &rounds[1]];
        let new: Vec<&String> = five.difference(three).collect();
        assert!(
            new.is_empty(),
            "{backend:?}: longer lists made other statements:\n{new:#?}"
        );
        relay.stop().await;
    }
}
