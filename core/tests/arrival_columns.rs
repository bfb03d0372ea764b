//! The arrival columns kept at ingest, in the message's transaction:
//! `channels.last_timeline_received_at` (top-level messages and broadcast replies) and
//! the root's `thread_metadata.last_reply_received_at` (replies), both only moving
//! forward — on both backends.

use buzz_core::both_backends;
use buzz_core::store::schema::{channels, events, thread_metadata};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use diesel::prelude::*;

both_backends!(arrival_columns_follow_ingest);

async fn received_at(relay: &TestRelay, id: &str) -> i64 {
    let id = id.to_owned();
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            Ok(buzz_core::with_conn!(&mut conn, |c| events::table
                .filter(events::id.eq(&id))
                .select(events::received_at)
                .first::<i64>(c))?)
        })
        .await
        .expect("received_at")
}

async fn columns(relay: &TestRelay, channel: &str, root: &str) -> (Option<i64>, Option<i64>) {
    let (channel, root) = (channel.to_owned(), root.to_owned());
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            let timeline = buzz_core::with_conn!(&mut conn, |c| channels::table
                .filter(channels::id.eq(&channel))
                .select(channels::last_timeline_received_at)
                .first::<Option<i64>>(c))?;
            let thread = buzz_core::with_conn!(&mut conn, |c| thread_metadata::table
                .filter(thread_metadata::event_id.eq(&root))
                .select(thread_metadata::last_reply_received_at)
                .first::<Option<i64>>(c))?;
            Ok((timeline, thread))
        })
        .await
        .expect("columns")
}

async fn arrival_columns_follow_ingest(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    assert!(ws.auth(&keys).await.0);
    let channel = uuid::Uuid::new_v4().to_string();
    let create = keys.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "a"])],
        "",
        now(),
    );
    assert!(ws.publish(&create).await.0);
    let post = |tags: Vec<Vec<String>>, at: i64| -> Event {
        let mut all = vec![tag(&["h", &channel])];
        all.extend(tags);
        keys.sign(9, all, &uuid::Uuid::new_v4().to_string(), at)
    };

    let root = post(vec![], now());
    assert!(ws.publish(&root).await.0);
    let root_at = received_at(&relay, &root.id).await;
    assert_eq!(
        columns(&relay, &channel, &root.id).await,
        (Some(root_at), None)
    );

    // A reply moves the thread's column, not the timeline's.
    let reply = post(
        vec![
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
        ],
        now(),
    );
    assert!(ws.publish(&reply).await.0);
    let reply_at = received_at(&relay, &reply.id).await;
    assert_eq!(
        columns(&relay, &channel, &root.id).await,
        (Some(root_at), Some(reply_at))
    );

    // A backdated broadcast reply still moves both forward (arrival, not author time).
    let broadcast = post(
        vec![
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
            tag(&["broadcast", "1"]),
        ],
        now() - 600,
    );
    assert!(ws.publish(&broadcast).await.0);
    let broadcast_at = received_at(&relay, &broadcast.id).await;
    assert!(broadcast_at > reply_at);
    assert_eq!(
        columns(&relay, &channel, &root.id).await,
        (Some(broadcast_at), Some(broadcast_at))
    );

    // A reaction is no conversation message: nothing moves.
    let reaction = keys.sign(
        7,
        vec![tag(&["h", &channel]), tag(&["e", &root.id])],
        "+",
        now(),
    );
    assert!(ws.publish(&reaction).await.0);
    assert_eq!(
        columns(&relay, &channel, &root.id).await,
        (Some(broadcast_at), Some(broadcast_at))
    );
}
