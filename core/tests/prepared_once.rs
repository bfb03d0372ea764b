//! The storage writer prepares each statement of an ordinary message once per
//! connection, on both backends: every statement it runs for a top-level message, a
//! reply and a nested reply is one diesel's statement cache keeps. diesel prepares an
//! `UPDATE`, a `sql_query` and an insert that writes `DEFAULT` for a `None` anew on
//! every call, which costs a parse and plan on the writer (SQLite) or an extra round
//! trip (PostgreSQL) per message; `store::prepared` and `treat_none_as_default_value = false` avoid it.
//!
//! How: `testkit::statements` records, for the writer thread's connections, which
//! statements the cache took in and which ran.

use buzz_core::testkit::statements::{
    is_transaction_control, record_statements_of, start_recording, stop_recording,
};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;

/// The storage writer thread's name (`store/writer/mod.rs`).
const WRITER_THREAD: &str = "buzz-store-writer";

/// One test for both backends, one after the other: the recording is process-wide.
#[tokio::test]
async fn ordinary_messages_run_only_cached_statements() {
    record_statements_of(WRITER_THREAD);
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

        start_recording();
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
        let recorded = stop_recording();

        let ran = recorded.len();
        assert!(
            ran > 6,
            "{backend:?}: the writer's statements were recorded ({ran})"
        );
        let uncached = recorded.uncached(is_transaction_control);
        assert!(
            uncached.is_empty(),
            "{backend:?}: the writer prepared these anew for an ordinary message:\n{}",
            uncached.join("\n")
        );
        relay.stop().await;
    }
}
