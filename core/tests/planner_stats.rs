//! SQLite plans with statistics as the tables grow: without them the planner takes
//! `community_id = ?` for a selective condition and walks a whole community's time index
//! for an `authors` REQ (issue 23). `events` and `event_tags` have pinned statistics from
//! the moment the store opens (issue 45: a statement keeps its first plan), the checkpoint
//! thread takes the other tables' as the events table doubles and pins those two again,
//! and every pooled connection — including ones opened before — plans with them from its
//! next checkout.

use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use diesel::RunQueryDsl;
use std::time::{Duration, Instant};

#[derive(diesel::QueryableByName)]
struct PlanRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    detail: String,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

fn plan(conn: &mut Conn<'_>, sql: &str) -> Result<String, Reason> {
    let rows: Vec<PlanRow> = buzz_core::with_conn!(conn, |c| diesel::sql_query(format!(
        "EXPLAIN QUERY PLAN {sql}"
    ))
    .load(c))?;
    Ok(rows
        .into_iter()
        .map(|r| r.detail)
        .collect::<Vec<_>>()
        .join("; "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authors_req_uses_the_author_index_once_the_table_has_grown() {
    let name = "an_authors_req_uses_the_author_index_once_the_table_has_grown";
    let Some(relay) = TestRelay::start(TestBackend::Sqlite, name).await else {
        return;
    };
    let store = relay.running().services.store.clone();
    let authors: Vec<Keys> = (0..50).map(|_| Keys::generate()).collect();
    let author = authors[7].pubkey().to_owned();
    let shape = format!(
        "SELECT seq FROM events WHERE community_id = 1 AND deleted_at IS NULL \
         AND pubkey IN ('{author}') ORDER BY created_at DESC, id ASC LIMIT 20"
    );
    // Connections opened while the table is empty, before any statistics were taken:
    // the pinned ones already describe a large community.
    let early = store.read({
        let shape = shape.clone();
        move |mut conn| plan(&mut conn, &shape)
    });
    let early = early.await.expect("plan");
    assert!(
        early.contains("events_by_author"),
        "pinned at open: {early}"
    );

    let mut ws = relay.ws().await;
    let at = now();
    for i in 0..1_000 {
        let keys = &authors[i % authors.len()];
        let event = keys.sign(
            1,
            vec![tag(&["t", "x"])],
            &format!("note {i}"),
            at - (i % 600) as i64,
        );
        let (accepted, message) = ws.publish(&event).await;
        assert!(accepted, "{message}");
    }
    // The checkpoint thread takes statistics after the commits; wait for them.
    let started = Instant::now();
    loop {
        let taken = store
            .read(|mut conn| {
                let rows: Vec<Count> = buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(
                    "SELECT COUNT(*) AS n FROM sqlite_stat1 \
                     WHERE tbl NOT IN ('events', 'event_tags')"
                )
                .load(c))?;
                Ok(rows.first().map_or(0, |r| r.n))
            })
            .await
            .expect("count");
        if taken > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "statistics were never taken"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every pooled connection (several reads at once reach different ones) plans with
    // them now.
    let plans = futures_util::future::join_all((0..8).map(|_| {
        let shape = shape.clone();
        store.read(move |mut conn| plan(&mut conn, &shape))
    }))
    .await;
    for plan in plans {
        let plan = plan.expect("plan");
        assert!(plan.contains("events_by_author"), "{plan}");
    }
    // The sampled `ANALYZE` left the pinned numbers of `events` in place.
    let pinned = store
        .read(|mut conn| {
            let rows: Vec<Count> = buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(
                "SELECT COUNT(*) AS n FROM sqlite_stat1 \
                 WHERE idx = 'events_by_time' AND stat = '1000000 1000000 2 1'"
            )
            .load(c))?;
            Ok(rows.first().map_or(0, |r| r.n))
        })
        .await
        .expect("pinned");
    assert_eq!(pinned, 1, "events keep their pinned statistics");
    relay.stop().await;
}
