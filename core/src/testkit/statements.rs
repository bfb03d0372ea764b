//! Which statements one thread's diesel connections prepared and ran: a recorder
//! installed as diesel's default instrumentation, so every connection the process opens
//! afterwards reports to it. Process-wide, so one per test binary; the tests that use it
//! run their backends one after the other.
//!
//! A pooled SQLite connection's own instrumentation (`store/conn_state.rs`) passes every
//! event on to the default one, so pooled connections are recorded too.

use diesel::connection::{set_default_instrumentation, Instrumentation, InstrumentationEvent};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// The thread whose connections are recorded.
static THREAD: OnceLock<&'static str> = OnceLock::new();
/// Statements the cache took in, per connection.
static CACHED: Mutex<Option<HashMap<usize, HashSet<String>>>> = Mutex::new(None);
/// Statements run while recording: (connection, SQL text).
static RAN: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
/// The same statements as diesel displays them, binds included (`SQL -- binds: [...]`).
static RAN_WITH_BINDS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static RECORDING: AtomicBool = AtomicBool::new(false);
static NEXT_CONNECTION: AtomicUsize = AtomicUsize::new(0);

struct Recorder {
    connection: usize,
}

impl Instrumentation for Recorder {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if std::thread::current().name() != THREAD.get().copied() {
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
                RAN_WITH_BINDS
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(text.clone());
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

/// Record the statements of the threads named `thread` (the store's writer or read
/// threads), from every connection opened after this call. Once per process.
pub fn record_statements_of(thread: &'static str) {
    THREAD.set(thread).expect("one recorded thread per process");
    set_default_instrumentation(recorder).expect("instrumentation installed");
}

/// Start recording what runs (anything recorded before is forgotten).
pub fn start_recording() {
    RAN.lock().unwrap_or_else(|e| e.into_inner()).clear();
    RAN_WITH_BINDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    RECORDING.store(true, Ordering::SeqCst);
}

/// Stop recording; what ran since [`start_recording`].
pub fn stop_recording() -> Recorded {
    RECORDING.store(false, Ordering::SeqCst);
    Recorded {
        ran: RAN.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        with_binds: RAN_WITH_BINDS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
    }
}

/// Transaction control, run as plain SQL by diesel's transaction manager: nothing to
/// prepare.
pub fn is_transaction_control(sql: &str) -> bool {
    let upper = sql.trim_start().to_ascii_uppercase();
    ["BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"]
        .iter()
        .any(|word| upper.starts_with(word))
}

/// The statements a recording saw run.
pub struct Recorded {
    ran: Vec<(usize, String)>,
    with_binds: Vec<String>,
}

impl Recorded {
    /// How many statements ran, plain ones included.
    pub fn len(&self) -> usize {
        self.ran.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ran.is_empty()
    }

    /// What ran, in order, as diesel displays it: `SQL -- binds: [...]` (the values
    /// bound, as `Debug` writes them), for a test that explains a statement with them.
    pub fn with_binds(&self) -> &[String] {
        &self.with_binds
    }

    /// The texts that ran, but those `plain` names.
    pub fn texts(&self, plain: impl Fn(&str) -> bool) -> BTreeSet<String> {
        self.ran
            .iter()
            .map(|(_, sql)| sql.clone())
            .filter(|sql| !plain(sql))
            .collect()
    }

    /// The texts that ran but their connection's statement cache never took in, but
    /// those `plain` names: what was parsed and planned anew.
    pub fn uncached(&self, plain: impl Fn(&str) -> bool) -> Vec<String> {
        let cached = CACHED.lock().unwrap_or_else(|e| e.into_inner());
        let empty = HashMap::new();
        let cached = cached.as_ref().unwrap_or(&empty);
        let mut out: Vec<String> = self
            .ran
            .iter()
            .filter(|(_, sql)| !plain(sql))
            .filter(|(connection, sql)| {
                !cached.get(connection).is_some_and(|set| set.contains(sql))
            })
            .map(|(_, sql)| sql.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
