//! Core's per-message follow-ups under bursts, on both backends: on PostgreSQL a group
//! of channel messages has its channel read once, its top-level thread rows written by
//! one insert and its channels' arrival columns by one update (`store/group_writes.rs`);
//! what that leaves must be exactly what one message at a time leaves. The bursts put a
//! reply and a reaction right behind their target (a group must end before them) across
//! two channels and several publishers at once.

use buzz_core::both_backends;
use buzz_core::store::schema::{channels, events, thread_metadata};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use diesel::prelude::*;
use std::collections::HashMap;

both_backends!(a_burst_leaves_what_one_at_a_time_leaves);

/// Thread row of each event id: (depth, parent, reply_count).
type Rows = HashMap<String, (i32, Option<String>, i64)>;

async fn thread_rows(relay: &TestRelay) -> Rows {
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            let rows: Vec<(String, i32, Option<String>, i64)> =
                buzz_core::with_conn!(&mut conn, |c| thread_metadata::table
                    .select((
                        thread_metadata::event_id,
                        thread_metadata::depth,
                        thread_metadata::parent_id,
                        thread_metadata::reply_count,
                    ))
                    .load(c))?;
            Ok(rows
                .into_iter()
                .map(|(id, depth, parent, replies)| (id, (depth, parent, replies)))
                .collect())
        })
        .await
        .expect("thread rows")
}

/// `channels.last_timeline_received_at`, and the newest arrival of the channel's
/// top-level messages as the events table has it.
async fn timeline_arrivals(relay: &TestRelay, channel: &str, top: Vec<String>) -> (i64, i64) {
    let channel = channel.to_owned();
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            let column = buzz_core::with_conn!(&mut conn, |c| channels::table
                .filter(channels::id.eq(&channel))
                .select(channels::last_timeline_received_at)
                .first::<Option<i64>>(c))?;
            let newest = buzz_core::with_conn!(&mut conn, |c| events::table
                .filter(events::id.eq_any(&top))
                .select(diesel::dsl::max(events::received_at))
                .first::<Option<i64>>(c))?;
            Ok((column.unwrap_or(0), newest.unwrap_or(-1)))
        })
        .await
        .expect("arrivals")
}

/// PostgreSQL: whether the writer's session ran the grouped thread-row insert (so the
/// burst really went through the group path). SQLite never groups.
async fn grouped_insert_ran(relay: &TestRelay) -> bool {
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    relay
        .running()
        .services
        .store
        .write(|conn| {
            let rows: Vec<Count> = buzz_core::with_conn!(conn, |c| diesel::sql_query(
                "SELECT count(*) AS n FROM pg_prepared_statements \
                 WHERE statement LIKE 'INSERT INTO thread_metadata%UNNEST%'"
            )
            .load(c))?;
            Ok(rows.first().map(|r| r.n).unwrap_or(0) > 0)
        })
        .await
        .expect("prepared statements")
}

async fn a_burst_leaves_what_one_at_a_time_leaves(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let owner = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&owner).await.0);
    let channels: Vec<String> = (0..2).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    for channel in &channels {
        let create = owner.sign(9007, vec![tag(&["h", channel])], "", now());
        assert_eq!(ws.publish(&create).await, (true, String::new()));
    }

    let t = now();
    let mut tasks = Vec::new();
    let mut sent: Vec<Event> = Vec::new();
    for publisher in 0..4 {
        let keys = Keys::generate();
        let mut ws = relay.ws().await;
        assert!(ws.auth(&keys).await.0);
        let mut burst = Vec::new();
        for i in 0..60 {
            let channel = &channels[i % 2];
            let text = format!("p{publisher} m{i}");
            let message = keys.sign(9, vec![tag(&["h", channel])], &text, t);
            burst.push(message.clone());
            if i % 6 == 0 {
                let parent = vec![
                    tag(&["h", channel]),
                    tag(&["e", &message.id, "", "root"]),
                    tag(&["e", &message.id, "", "reply"]),
                ];
                burst.push(keys.sign(9, parent, &format!("re {text}"), t));
                let target = vec![tag(&["h", channel]), tag(&["e", &message.id])];
                burst.push(keys.sign(7, target, "+", t));
            }
        }
        sent.extend(burst.iter().cloned());
        tasks.push(tokio::spawn(async move { ws.burst(&burst).await }));
    }
    for task in tasks {
        let oks = task.await.expect("publisher");
        assert_eq!(oks.len(), 80);
        assert!(oks.values().all(|(ok, _)| *ok), "{oks:?}");
    }

    let rows = thread_rows(&relay).await;
    let messages: Vec<&Event> = sent.iter().filter(|e| e.kind == 9).collect();
    assert_eq!(messages.len(), 4 * 70);
    for message in &messages {
        let (depth, parent, replies) = rows
            .get(&message.id)
            .unwrap_or_else(|| panic!("no thread row for {}", message.content))
            .clone();
        match message.tag_values("e").next() {
            // A reply: under its parent, which counts it.
            Some(parent_id) => {
                assert_eq!((depth, parent.as_deref()), (1, Some(parent_id)));
                assert_eq!(rows[parent_id].2, 1, "reply count of {parent_id}");
            }
            None => {
                assert_eq!((depth, &parent), (0, &None), "{}", message.content);
                let replied = sent
                    .iter()
                    .any(|e| e.kind == 9 && e.tag_values("e").next() == Some(message.id.as_str()));
                let expected = i64::from(replied);
                assert_eq!(replies, expected, "{}", message.content);
            }
        }
    }
    // Reactions are no conversation messages: no thread rows.
    assert!(sent
        .iter()
        .filter(|e| e.kind == 7)
        .all(|e| !rows.contains_key(&e.id)));

    for channel in &channels {
        let top: Vec<String> = messages
            .iter()
            .filter(|e| e.channel_id() == Some(channel) && e.tag_values("e").next().is_none())
            .map(|e| e.id.clone())
            .collect();
        let (column, newest) = timeline_arrivals(&relay, channel, top).await;
        assert_eq!(
            column, newest,
            "channel {channel}: the newest timeline arrival"
        );
    }
    if backend == TestBackend::Postgres {
        assert!(grouped_insert_ran(&relay).await, "no burst was grouped");
    }
    relay.stop().await;
}
