//! Intents (`POST /buzz/v1/me/read-state`) and the spec's "Order" examples: positions are
//! arrival times, marks read everything displayed at or before the anchor, positions only
//! move forward — on SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, TestBackend};
use buzz_read_state_client as client;
use common::*;
use serde_json::{json, Value};

/// Alice writes, Bob reads; both started, Bob caught up.
async fn pair(relay: &buzz_core::testkit::TestRelay) -> (User, User, String) {
    let mut alice = User::new(relay).await;
    let mut bob = User::new(relay).await;
    let ch = alice.create_channel("order", "stream").await;
    bob.join(&ch).await;
    alice.start(&ch).await;
    bob.start(&ch).await;
    (alice, bob, ch)
}

/// Late arrival above the newest message: marking the newest reads it.
async fn late_arrival_above_newest_is_read(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, bob, ch) = pair(&relay).await;
    let t = now();
    let newest = alice.post_at(&ch, t, &[]).await;
    let late = alice.post_at(&ch, t - 30, &[]).await; // arrives after, shown above
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], true);
    bob.apply(client::mark_through(&ch, None, &newest.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(
        row["unread"], false,
        "marking the bottom clears the badge: {row}"
    );
    assert_eq!(row["read_through_id"], newest.id.as_str());
    let _ = late;
}

/// With no late arrival, a mark reads exactly what arrived by the anchor.
async fn later_message_stays_unread(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, bob, ch) = pair(&relay).await;
    let m1 = alice.post(&ch).await;
    let m2 = alice.post(&ch).await;
    bob.apply(client::mark_through(&ch, None, &m1.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], true, "{row}");
    assert_eq!(row["read_through_id"], m1.id.as_str());
    // Positions only move forward: marking an older message again changes nothing.
    bob.apply(client::mark_through(&ch, None, &m2.id)).await;
    bob.apply(client::mark_through(&ch, None, &m1.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    assert_eq!(row["read_through_id"], m2.id.as_str());
}

/// A future-dated anchor cannot read what arrives after it.
async fn future_dated_anchor_reads_nothing_later(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, bob, ch) = pair(&relay).await;
    let future = alice.post_at(&ch, now() + 600, &[]).await;
    bob.apply(client::mark_through(&ch, None, &future.id)).await;
    assert_eq!(bob.row(&ch).await["unread"], false);
    let later = alice.post_at(&ch, now(), &[]).await; // shown above, arrived after
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], true, "{row}");
    // The divider is the last message displayed at or before the position.
    assert_eq!(row["read_through_id"], future.id.as_str());
    let _ = later;
}

/// The cost of a late arrival above the anchor: a message shown below the anchor that
/// arrived before the late one is read too.
async fn late_arrival_above_anchor_reads_earlier_arrivals_below(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, bob, ch) = pair(&relay).await;
    let t = now();
    let anchor = alice.post_at(&ch, t - 10, &[]).await;
    let below = alice.post_at(&ch, t, &[]).await;
    let late = alice.post_at(&ch, t - 20, &[]).await;
    bob.apply(client::mark_through(&ch, None, &anchor.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    let _ = (below, late);
    // Something arriving after the late one stays unread.
    alice.post_at(&ch, t - 15, &[]).await;
    assert_eq!(bob.row(&ch).await["unread"], true);
}

/// `mark_channel_read` is the one whole-channel cut; thread marks never set it and a
/// channel `mark_through` never reads threads.
async fn channel_cut_and_scopes(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, mut bob, ch) = pair(&relay).await;
    let bob_pk = bob.pubkey();
    let root = bob.post(&ch).await;
    let reply = alice.reply(&ch, &root).await; // Bob follows: a reply to his message
    let top = alice.post(&ch).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], true);
    assert!(thread(&row, &root).is_some());

    // Channel mark_through: the timeline only.
    bob.apply(client::mark_through(&ch, None, &top.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false);
    assert!(
        thread(&row, &root).is_some(),
        "channel marks never read threads"
    );

    // Thread mark: the thread only, no cut.
    let top2 = alice.post(&ch).await;
    bob.apply(client::mark_through(&ch, Some(&root.id), &reply.id))
        .await;
    let row = bob.row(&ch).await;
    assert!(thread(&row, &root).is_none());
    assert_eq!(row["unread"], true, "thread marks never set the cut");

    // The cut reads the timeline and every thread, unlisted ones included, through
    // everything displayed at or before the anchor (here a reply).
    let reply2 = alice
        .reply_full(&ch, &root, &reply, tick(), &[&bob_pk], false)
        .await;
    let other_root = alice.post(&ch).await;
    alice.reply(&ch, &other_root).await; // Bob does not follow this one
    let anchor = alice.reply(&ch, &root).await;
    bob.apply(client::mark_channel_read(&ch, &anchor.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    assert_eq!(row["threads"], json!([]), "{row}");
    // Then following the other thread starts caught up.
    bob.apply(client::follow(&ch, &other_root.id)).await;
    assert!(thread(&bob.row(&ch).await, &other_root).is_none());
    alice.reply(&ch, &other_root).await;
    assert!(thread(&bob.row(&ch).await, &other_root).is_some());
    let _ = (top2, reply2);
}

/// Outcomes in request order, each its own; malformed operands are `invalid`, state
/// problems `blocked`.
async fn outcomes_in_order(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, bob, ch) = pair(&relay).await;
    let m = alice.post(&ch).await;
    let root = alice.post(&ch).await;
    let private = {
        let id = uuid::Uuid::new_v4().to_string();
        let tags = vec![
            buzz_core::testkit::tag(&["h", &id]),
            buzz_core::testkit::tag(&["name", "secret"]),
            buzz_core::testkit::tag(&["private"]),
        ];
        alice.publish(alice.keys.sign(9007, tags, "", now())).await;
        id
    };
    let secret = alice.post(&private).await;
    let missing = "a".repeat(64);
    let out = bob
        .intents(&[
            client::mark_through(&ch, None, &m.id),
            client::mark_through(&ch, None, &missing),
            json!({"type": "follow", "target": {"channel_id": ch}}),
            client::mark_through("not-a-uuid", None, &m.id),
            client::mark_through(&private, None, &secret.id),
            client::mark_through(&ch, Some(&root.id), &m.id),
            client::follow(&ch, &root.id),
            client::unfollow(&ch, &root.id),
            client::mark_channel_read(&ch, &root.id),
        ])
        .await;
    let status: Vec<&str> = out.iter().filter_map(|o| o["status"].as_str()).collect();
    assert_eq!(
        status,
        vec![
            "applied", "blocked", "invalid", "invalid", "blocked", "blocked", "applied", "applied",
            "applied"
        ],
        "{out:?}"
    );
    assert_eq!(
        out[4]["reason"], out[1]["reason"],
        "forbidden reads like missing"
    );

    // Whole-request refusals: structure, counts, unknown fields and types.
    let refused = |body: Value| {
        let api = bob.api.clone();
        async move {
            let answer = api
                .post("/buzz/v1/me/read-state", body.to_string().as_bytes())
                .await
                .expect("post");
            assert_api_error(&answer, 400, "invalid_request");
        }
    };
    refused(json!({"intents": []})).await;
    refused(json!({"intents": vec![client::follow(&ch, &root.id); 101]})).await;
    refused(json!({"intents": [client::follow(&ch, &root.id)], "extra": 1})).await;
    refused(json!({"intents": [{"type": "follow", "target": {"channel_id": ch, "root_id": root.id, "x": 1}}]})).await;
    refused(json!({"intents": [{"type": "mark_unread", "channel_id": ch}]})).await;
    refused(json!([1, 2])).await;
    let answer = bob
        .api
        .post("/buzz/v1/me/read-state", b"{not json")
        .await
        .expect("post");
    assert_api_error(&answer, 400, "invalid_request");
    // 100 intents is the bound, not over it.
    let full = bob.intents(&vec![client::follow(&ch, &root.id); 100]).await;
    assert_eq!(full.len(), 100);
}

/// A storage failure is `unknown` (retryable), later intents too; earlier committed
/// outcomes stand. The failure is made real: a trigger refuses writes for one channel.
async fn storage_failure_is_unknown(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (mut alice, bob, ch) = pair(&relay).await;
    let broken = alice.create_channel("broken", "stream").await;
    let m = alice.post(&ch).await;
    let b = alice.post(&broken).await;
    let statements: Vec<String> = match backend {
        TestBackend::Sqlite => vec![format!(
            "CREATE TRIGGER refuse_broken BEFORE INSERT ON read_state_frontiers \
             WHEN NEW.channel_id = '{broken}' BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )],
        TestBackend::Postgres => vec![
            "CREATE FUNCTION refuse_broken() RETURNS trigger AS $$ \
             BEGIN RAISE EXCEPTION 'disk says no'; END $$ LANGUAGE plpgsql"
                .to_owned(),
            format!(
                "CREATE TRIGGER refuse_broken BEFORE INSERT ON read_state_frontiers \
                 FOR EACH ROW WHEN (NEW.channel_id = '{broken}') EXECUTE FUNCTION refuse_broken()"
            ),
        ],
    };
    relay
        .running()
        .services
        .store
        .write(move |conn| {
            use diesel::RunQueryDsl;
            for sql in &statements {
                buzz_core::with_conn!(&mut *conn, |c| diesel::sql_query(sql).execute(c))?;
            }
            Ok(())
        })
        .await
        .expect("install the failing trigger");
    let out = bob
        .intents(&[
            client::mark_through(&ch, None, &m.id),
            client::mark_through(&broken, None, &b.id),
            client::mark_through(&ch, None, &m.id),
        ])
        .await;
    assert_eq!(
        out,
        vec![
            json!({"status": "applied"}),
            json!({"status": "unknown", "retryable": true}),
            json!({"status": "unknown", "retryable": true}),
        ]
    );
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "the earlier outcome stands: {row}");
}

both_backends!(
    storage_failure_is_unknown,
    late_arrival_above_newest_is_read,
    later_message_stays_unread,
    future_dated_anchor_reads_nothing_later,
    late_arrival_above_anchor_reads_earlier_arrivals_below,
    channel_cut_and_scopes,
    outcomes_in_order,
);
