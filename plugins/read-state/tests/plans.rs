//! PostgreSQL plans (attack finding, item 10): the plugin's prepared statements are
//! planned for their values on every run, never with a generic plan fixed while the
//! tables were empty. With autovacuum off no statistics ever change, so a generic plan
//! chosen on empty tables stays: `events_by_author` walked for an id lookup made ingest
//! fall from ~1,200 to ~180 messages/s over 10k messages (`benches/floods.rs`,
//! `--case plans`).
//!
//! What is checked: `pg_prepared_statements` of the writer's session (ingest hooks and
//! intents run there) and of read sessions (sidebars) — every plugin statement has run
//! with custom plans only. Needs `BUZZ_TEST_DATABASE_URL` (skipped otherwise; a failure
//! under `CI`).

mod common;

use buzz_core::testkit::TestBackend;
use buzz_read_state_client as client;
use common::*;
use diesel::{QueryableByName, RunQueryDsl};

#[derive(QueryableByName, Debug)]
struct Prepared {
    #[diesel(sql_type = diesel::sql_types::Text)]
    statement: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    generic_plans: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    custom_plans: i64,
}

/// The plugin's statements prepared on one session: its own tables, or the joins of
/// core's tables it writes as plain SQL (core's own statements are diesel's, quoted).
const PLUGIN_STATEMENTS: &str = "SELECT statement, generic_plans, custom_plans \
    FROM pg_prepared_statements WHERE statement LIKE '%read_state_%' \
    OR statement LIKE '%FROM events e JOIN thread_metadata t%' \
    OR statement LIKE '%FROM thread_metadata t JOIN events e%'";

fn check(session: &str, statements: &[Prepared], busy: bool) {
    assert!(
        !busy
            || statements
                .iter()
                .any(|s| s.custom_plans + s.generic_plans > 5),
        "{session}: the plugin's statements ran more than five times: {statements:#?}"
    );
    let generic: Vec<(&str, i64)> = statements
        .iter()
        .filter(|s| s.generic_plans > 0)
        .map(|s| (s.statement.as_str(), s.generic_plans))
        .collect();
    assert!(
        generic.is_empty(),
        "{session}: plugin statements ran with a generic plan (statement, runs): {generic:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_statements_never_run_generic_plans() {
    let name = "plugin_statements_never_run_generic_plans";
    let Some(relay) = relay(TestBackend::Postgres, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("general", "stream").await;
    bob.join(&ch).await;
    bob.start(&ch).await;
    let bob_pk = bob.pubkey();
    // Well past PostgreSQL's five custom plans before it considers a generic one.
    let mut last = None;
    for i in 0..20 {
        let root = alice.post_at(&ch, tick(), &[&bob_pk]).await;
        let reply = alice.reply(&ch, &root).await;
        if i % 2 == 0 {
            bob.apply(client::mark_through(&ch, Some(&root.id), &reply.id))
                .await;
        }
        bob.row(&ch).await;
        last = Some(reply);
    }
    if let Some(reply) = last {
        bob.apply(client::mark_channel_read(&ch, &reply.id)).await;
    }

    let store = relay.running().services.store.clone();
    let writer: Vec<Prepared> = store
        .write(|conn| {
            Ok(buzz_core::with_conn!(conn, |c| diesel::sql_query(
                PLUGIN_STATEMENTS
            )
            .load(c))?)
        })
        .await
        .expect("writer session");
    check("writer", &writer, true);
    // Read sessions: whichever pooled connection answers; each one must hold the rule.
    for _ in 0..4 {
        let read: Vec<Prepared> = store
            .read(|mut conn| {
                Ok(buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(
                    PLUGIN_STATEMENTS
                )
                .load(c))?)
            })
            .await
            .expect("read session");
        check("read", &read, false);
    }
    relay.stop().await;
}
