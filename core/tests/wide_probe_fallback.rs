//! A community-wide REQ (no `#h`) by a reader of many channels, where the newest matches
//! are all in channels the reader may not read and the readable ones are older. On
//! PostgreSQL the first read, a short prefix of the matches without the channel
//! condition, then holds no readable row, so the store falls back to binding the reader's
//! channel set: the answer must still be exactly the readable events, newest first (SQLite
//! binds the set at once; the answer is the same). Both backends.

use buzz_core::both_backends;
use buzz_core::store::channel_state::{insert_rows, ChannelRow};
use buzz_core::store::insert_independent;
use buzz_core::stored::StoredEvent;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(older_readable_matches_behind_unreadable_ones);

/// Open channels: more than the store names inline, so a wide read is probed first.
const OPEN: usize = 300;
/// Private channels without members: no reader below may read them.
const HIDDEN: usize = 20;
/// The REQ's limit; the probe reads `4 × limit + 64` rows, fewer than the hidden events.
const LIMIT: usize = 20;
const HIDDEN_EVENTS: usize = 400;
const OPEN_EVENTS: usize = 50;

fn uuid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

async fn older_readable_matches_behind_unreadable_ones(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let community = relay.running().services.communities[0].id;
    let at = now() - 10_000;
    let rows: Vec<ChannelRow> = (0..OPEN + HIDDEN)
        .map(|n| ChannelRow {
            community_id: community,
            id: uuid(n),
            name: format!("channel {n}"),
            about: String::new(),
            private: n >= OPEN,
            channel_type: "stream".into(),
            archived: false,
            ttl_seconds: None,
            created_by: "ab".repeat(32),
            created_at: at,
            expires_at: None,
            deleted_at: None,
        })
        .collect();
    let store = relay.running().services.store.clone();
    store
        .write(move |conn| insert_rows(conn, &rows))
        .await
        .expect("seed channels");

    // Readable messages first (older), then the unreadable ones (newer), two events per
    // second so the order's tie-break on id is exercised too.
    let author = Keys::generate();
    let message = |channel: usize, i: usize| {
        let created_at = at + 1 + (i / 2) as i64;
        author.sign(
            9,
            vec![tag(&["h", &uuid(channel)])],
            &format!("{i}"),
            created_at,
        )
    };
    let readable: Vec<Event> = (0..OPEN_EVENTS).map(|i| message(i % OPEN, i)).collect();
    let hidden: Vec<Event> = (OPEN_EVENTS..OPEN_EVENTS + HIDDEN_EVENTS)
        .map(|i| message(OPEN + i % HIDDEN, i))
        .collect();
    let stored: Vec<StoredEvent> = readable
        .iter()
        .chain(&hidden)
        .map(|event| StoredEvent {
            channel: event.channel_id().map(str::to_owned),
            event: event.clone(),
            community_id: community,
            received_at: 0,
        })
        .collect();
    store
        .write(move |conn| insert_independent(conn, &stored).map(|_| ()))
        .await
        .expect("seed messages");

    let reader = Keys::generate();
    let mut ws = relay.ws().await;
    let (ok, msg) = ws.auth(&reader).await;
    assert!(ok, "auth: {msg}");

    let mut expected = readable.clone();
    expected.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    for limit in [LIMIT, OPEN_EVENTS, OPEN_EVENTS + 10] {
        let got: Vec<String> = ws
            .req(
                &format!("wide{limit}"),
                vec![json!({"kinds": [9], "limit": limit})],
            )
            .await
            .expect("REQ")
            .into_iter()
            .map(|e| e.id)
            .collect();
        let want: Vec<String> = expected.iter().take(limit).map(|e| e.id.clone()).collect();
        assert_eq!(got, want, "limit {limit}");
    }
    ws.close().await;
    relay.stop().await;
}
