//! The storage writer prepares each statement of an ordinary message once per
//! connection, on both backends: every statement it runs for a top-level message, a
//! reply and a nested reply is one diesel's statement cache keeps. diesel prepares an
//! `UPDATE`, a `sql_query` and an insert that writes `DEFAULT` for a `None` anew on
//! every call, which costs a parse and plan on the writer (SQLite) or an extra round
//! trip (PostgreSQL) per message; `store::prepared` and `treat_none_as_default_value = false` avoid it.
//!
//! How: a diesel instrumentation on every connection of this process records, for the
//! writer thread's connections, which statements the cache took in and which ran.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use diesel::connection::{set_default_instrumentation, Instrumentation, InstrumentationEvent};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Statements the cache took in, per connection.
static CACHED: Mutex<Option<HashMap<usize, HashSet<String>>>> = Mutex::new(None);
/// Statements run while recording: (connection, SQL text).
static RAN: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
static RECORDING: AtomicBool = AtomicBool::new(false);
static NEXT_CONNECTION: AtomicUsize = AtomicUsize::new(0);

/// The storage writer thread's name (`store/writer.rs`).
const WRITER_THREAD: &str = "buzz-store-writer";

struct Recorder {
    connection: usize,
}

impl Instrumentation for Recorder {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if std::thread::current().name() != Some(WRITER_THREAD) {
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

/// Transaction control, run as plain SQL by diesel's transaction manager: nothing to
/// prepare.
fn is_transaction_control(sql: &str) -> bool {
    let upper = sql.trim_start().to_ascii_uppercase();
    ["BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"]
        .iter()
        .any(|word| upper.starts_with(word))
}

/// Statements the writer ran while recording that its connection's cache never took in.
fn uncached() -> Vec<String> {
    let cached = CACHED.lock().unwrap_or_else(|e| e.into_inner());
    let empty = HashMap::new();
    let cached = cached.as_ref().unwrap_or(&empty);
    let ran = RAN.lock().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<String> = ran
        .iter()
        .filter(|(_, sql)| !is_transaction_control(sql))
        .filter(|(connection, sql)| !cached.get(connection).is_some_and(|set| set.contains(sql)))
        .map(|(_, sql)| sql.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// One test for both backends, one after the other: the recording is process-wide.
#[tokio::test]
async fn ordinary_messages_run_only_cached_statements() {
    set_default_instrumentation(recorder).expect("instrumentation installed");
    for backend in [TestBackend::Sqlite, TestBackend::Postgres] {
        let Some(relay) = TestRelay::start(backend, "prepared_once").await else {
            continue;
        };
        let keys = Keys::generate();
        let mut ws = relay.ws().await;
        assert!(ws.auth(&keys).await.0);
        let channel = uuid::Uuid::new_v4().to_string();
        let create = keys.sign(
            9007,
            vec![tag(&["h", &channel]), tag(&["name", "c"])],
            "",
            now(),
        );
        assert!(ws.publish(&create).await.0);

        RAN.lock().unwrap_or_else(|e| e.into_inner()).clear();
        RECORDING.store(true, Ordering::SeqCst);
        for round in 0..2 {
            let root = keys.sign(
                9,
                vec![tag(&["h", &channel])],
                &format!("root {round}"),
                now(),
            );
            let (ok, msg) = ws.publish(&root).await;
            assert!(ok, "{msg}");
            let reply = keys.sign(
                9,
                vec![tag(&["h", &channel]), tag(&["e", &root.id, "", "reply"])],
                &format!("reply {round}"),
                now(),
            );
            let (ok, msg) = ws.publish(&reply).await;
            assert!(ok, "{msg}");
            let nested = keys.sign(
                9,
                vec![
                    tag(&["h", &channel]),
                    tag(&["e", &root.id, "", "root"]),
                    tag(&["e", &reply.id, "", "reply"]),
                ],
                &format!("nested {round}"),
                now(),
            );
            let (ok, msg) = ws.publish(&nested).await;
            assert!(ok, "{msg}");
        }
        RECORDING.store(false, Ordering::SeqCst);

        let ran = RAN.lock().unwrap_or_else(|e| e.into_inner()).len();
        assert!(
            ran > 6,
            "{backend:?}: the writer's statements were recorded ({ran})"
        );
        let uncached = uncached();
        assert!(
            uncached.is_empty(),
            "{backend:?}: the writer prepared these anew for an ordinary message:\n{}",
            uncached.join("\n")
        );
        relay.stop().await;
    }
}
