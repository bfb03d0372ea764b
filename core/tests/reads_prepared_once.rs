//! A REQ's (and a COUNT's) statements are kept prepared by the read connection that runs them, on both
//! backends: their text depends on the filter's shape, not on how many ids, authors,
//! kinds, tag values or channels its lists hold (`store/one_of.rs`). diesel's `eq_any`
//! wrote one placeholder per value on SQLite and never cached the statement, so every
//! REQ was parsed and planned again (issue 23).
//!
//! How: a diesel instrumentation on every connection of this process records, for the
//! read threads' connections, which statements the cache took in and which ran.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use diesel::connection::{set_default_instrumentation, Instrumentation, InstrumentationEvent};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Statements the cache took in, per connection.
static CACHED: Mutex<Option<HashMap<usize, HashSet<String>>>> = Mutex::new(None);
/// Statements run while recording: (connection, SQL text).
static RAN: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
static RECORDING: AtomicBool = AtomicBool::new(false);
static NEXT_CONNECTION: AtomicUsize = AtomicUsize::new(0);

/// The read threads' name (`store/read_threads.rs`).
const READ_THREAD: &str = "buzz-store-read";

struct Recorder {
    connection: usize,
}

impl Instrumentation for Recorder {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if std::thread::current().name() != Some(READ_THREAD) {
            return;
        }
        match event {
            InstrumentationEvent::CacheQuery { sql, .. } => {
                let mut cached = CACHED.lock().unwrap_or_else(|e| e.into_inner());
                cached
                    .get_or_insert_with(HashMap::new)
                    .entry(self.connection)
                    .or_default()
                    .insert(sql.to_owned());
            }
            InstrumentationEvent::StartQuery { query, .. } if RECORDING.load(Ordering::SeqCst) => {
                // A prepared statement displays as `SQL -- binds: [...]`.
                let text = query.to_string();
                let sql = text.split(" -- binds: ").next().unwrap_or_default();
                RAN.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((self.connection, sql.to_owned()));
            }
            _ => {}
        }
    }
}

fn recorder() -> Option<Box<dyn Instrumentation>> {
    Some(Box::new(Recorder {
        connection: NEXT_CONNECTION.fetch_add(1, Ordering::SeqCst),
    }))
}

/// Transaction control and pragmas, run as plain SQL: nothing to prepare. On
/// PostgreSQL r2d2 also checks each connection it hands out with `SELECT 1` (a
/// connection to a server can go stale; SQLite's pool does not check).
fn is_plain(sql: &str, backend: TestBackend) -> bool {
    if matches!(backend, TestBackend::Postgres) && sql.trim() == "SELECT 1" {
        return true;
    }
    let upper = sql.trim_start().to_ascii_uppercase();
    [
        "BEGIN",
        "COMMIT",
        "SAVEPOINT",
        "RELEASE",
        "ROLLBACK",
        "PRAGMA",
        "ANALYZE",
        "SET",
    ]
    .iter()
    .any(|word| upper.starts_with(word))
}

/// Run `round` while recording; the texts the read threads ran, and those of them their
/// connection's cache never took in.
async fn recorded(
    backend: TestBackend,
    round: impl std::future::Future<Output = ()>,
) -> (BTreeSet<String>, Vec<String>) {
    RAN.lock().unwrap_or_else(|e| e.into_inner()).clear();
    RECORDING.store(true, Ordering::SeqCst);
    round.await;
    RECORDING.store(false, Ordering::SeqCst);
    let ran = RAN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cached = CACHED.lock().unwrap_or_else(|e| e.into_inner());
    let empty = HashMap::new();
    let cached = cached.as_ref().unwrap_or(&empty);
    let mut uncached: Vec<String> = ran
        .iter()
        .filter(|(_, sql)| !is_plain(sql, backend))
        .filter(|(connection, sql)| !cached.get(connection).is_some_and(|set| set.contains(sql)))
        .map(|(_, sql)| sql.clone())
        .collect();
    uncached.sort();
    uncached.dedup();
    let texts = ran
        .into_iter()
        .map(|(_, sql)| sql)
        .filter(|sql| !is_plain(sql, backend))
        .collect();
    (texts, uncached)
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
    set_default_instrumentation(recorder).expect("instrumentation installed");
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
