//! Thread metadata at ingest (NIP-CW "Top-level Classification"), on both backends.

use buzz_core::both_backends;

use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::json;

both_backends!(
    nested_replies_update_ancestors,
    depth_beyond_one_hundred_is_rejected,
    parents_must_exist_in_the_same_channel,
    root_marker_must_agree_with_ancestry,
    deleting_a_reply_recounts_its_ancestors,
    legacy_rows_without_metadata_stay_representable,
);

struct Author {
    keys: Keys,
    ws: WsClient,
    channel: String,
}

impl Author {
    async fn new(relay: &TestRelay) -> Author {
        let keys = Keys::generate();
        let mut ws = relay.ws().await;
        assert!(ws.auth(&keys).await.0);
        let channel = uuid::Uuid::new_v4().to_string();
        let create = keys.sign(
            9007,
            vec![tag(&["h", &channel]), tag(&["name", "t"])],
            "",
            now(),
        );
        assert!(ws.publish(&create).await.0);
        Author { keys, ws, channel }
    }

    fn message(&self, parent: Option<&Event>, root: Option<&Event>, at: i64) -> Event {
        let mut tags = vec![tag(&["h", &self.channel])];
        if let Some(r) = root {
            tags.push(tag(&["e", &r.id, "", "root"]));
        }
        if let Some(p) = parent {
            tags.push(tag(&["e", &p.id, "", "reply"]));
        }
        self.keys.sign(9, tags, "msg", at)
    }

    async fn post(&mut self, parent: Option<&Event>, root: Option<&Event>, at: i64) -> Event {
        let event = self.message(parent, root, at);
        let (ok, msg) = self.ws.publish(&event).await;
        assert!(ok, "{msg}");
        event
    }

    async fn refuse(&mut self, event: &Event) -> String {
        let (ok, msg) = self.ws.publish(event).await;
        assert!(!ok, "expected a refusal");
        msg
    }
}

async fn nested_replies_update_ancestors(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut a = Author::new(&relay).await;
    let t = now();
    let root = a.post(None, None, t - 10).await;
    let r1 = a.post(Some(&root), Some(&root), t - 9).await;
    let r2 = a.post(Some(&r1), Some(&root), t - 8).await;
    let r3 = a.post(Some(&r2), None, t - 7).await;
    let sibling = a.post(Some(&root), None, t - 5).await;

    let row = relay.thread_row(&root.id).await.expect("root row");
    assert_eq!(
        (row.depth, row.reply_count, row.descendant_count),
        (0, 2, 4)
    );
    assert_eq!(row.last_reply_at, Some(t - 5));
    let row = relay.thread_row(&r1.id).await.expect("r1 row");
    assert_eq!(
        (row.depth, row.reply_count, row.descendant_count),
        (1, 1, 2)
    );
    assert_eq!(row.last_reply_at, Some(t - 7));
    assert_eq!(row.root_id.as_deref(), Some(root.id.as_str()));
    let row = relay.thread_row(&r3.id).await.expect("r3 row");
    assert_eq!(row.depth, 3);
    assert_eq!(row.parent_id.as_deref(), Some(r2.id.as_str()));
    assert_eq!(row.root_id.as_deref(), Some(root.id.as_str()));
    assert!(
        relay
            .thread_row(&sibling.id)
            .await
            .expect("row")
            .reply_count
            == 0
    );
    // Broadcast is the exact tag ["broadcast","1"].
    let mut tags = a.message(Some(&root), None, t).tags;
    tags.push(tag(&["broadcast", "1"]));
    let b = a.keys.sign(9, tags, "look", t);
    assert!(a.ws.publish(&b).await.0);
    assert!(relay.thread_row(&b.id).await.expect("row").broadcast);
    assert!(!relay.thread_row(&sibling.id).await.expect("row").broadcast);
    relay.stop().await;
}

async fn depth_beyond_one_hundred_is_rejected(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut a = Author::new(&relay).await;
    let t = now();
    let mut parent = a.post(None, None, t).await;
    for _ in 0..100 {
        parent = a.post(Some(&parent), None, t).await;
    }
    assert_eq!(relay.thread_row(&parent.id).await.expect("row").depth, 100);
    let too_deep = a.message(Some(&parent), None, t);
    assert_eq!(
        a.refuse(&too_deep).await,
        "invalid: thread depth limit exceeded"
    );
    assert!(
        relay.thread_row(&too_deep.id).await.is_none(),
        "nothing stored"
    );
    relay.stop().await;
}

async fn parents_must_exist_in_the_same_channel(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut a = Author::new(&relay).await;
    let root = a.post(None, None, now()).await;
    let mut other = Author::new(&relay).await;
    let elsewhere = other.post(None, None, now()).await;

    let orphan = a.keys.sign(
        9,
        vec![
            tag(&["h", &a.channel]),
            tag(&["e", &"f".repeat(64), "", "reply"]),
        ],
        "",
        now(),
    );
    assert_eq!(a.refuse(&orphan).await, "invalid: reply parent not found");
    let cross = a.message(Some(&elsewhere), None, now());
    assert_eq!(
        a.refuse(&cross).await,
        "invalid: parent event belongs to a different channel"
    );
    let fine = a.message(Some(&root), None, now());
    assert!(a.ws.publish(&fine).await.0);
    let stored =
        a.ws.req("q", vec![json!({"ids": [orphan.id, cross.id]})])
            .await
            .expect("REQ");
    assert!(stored.is_empty(), "refused replies are not stored");
    relay.stop().await;
}

async fn root_marker_must_agree_with_ancestry(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut a = Author::new(&relay).await;
    let t = now();
    let root = a.post(None, None, t - 2).await;
    let other_root = a.post(None, None, t - 1).await;
    assert_ne!(root.id, other_root.id);
    let r1 = a.post(Some(&root), Some(&root), t).await;
    let liar = a.message(Some(&r1), Some(&other_root), now());
    assert_eq!(
        a.refuse(&liar).await,
        "invalid: root marker does not match the parent's thread"
    );
    relay.stop().await;
}

async fn deleting_a_reply_recounts_its_ancestors(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut a = Author::new(&relay).await;
    let t = now();
    let root = a.post(None, None, t - 10).await;
    let r1 = a.post(Some(&root), None, t - 8).await;
    let r2 = a.post(Some(&r1), None, t - 6).await;
    let r3 = a.post(Some(&root), None, t - 4).await;
    let row = relay.thread_row(&root.id).await.expect("row");
    assert_eq!(
        (row.reply_count, row.descendant_count, row.last_reply_at),
        (2, 3, Some(t - 4))
    );

    let deletion = a
        .keys
        .sign(5, vec![tag(&["h", &a.channel]), tag(&["e", &r3.id])], "", t);
    assert!(a.ws.publish(&deletion).await.0);
    let row = relay.thread_row(&root.id).await.expect("row");
    assert_eq!(
        (row.reply_count, row.descendant_count, row.last_reply_at),
        (1, 2, Some(t - 6))
    );

    let deletion = a
        .keys
        .sign(5, vec![tag(&["h", &a.channel]), tag(&["e", &r2.id])], "", t);
    assert!(a.ws.publish(&deletion).await.0);
    let row = relay.thread_row(&r1.id).await.expect("row");
    assert_eq!(
        (row.reply_count, row.descendant_count, row.last_reply_at),
        (0, 0, None)
    );
    let row = relay.thread_row(&root.id).await.expect("row");
    assert_eq!(
        (row.reply_count, row.descendant_count, row.last_reply_at),
        (1, 1, Some(t - 8))
    );
    assert!(relay.thread_row(&r2.id).await.expect("retained").deleted);
    relay.stop().await;
}

async fn legacy_rows_without_metadata_stay_representable(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let mut a = Author::new(&relay).await;
    let legacy = a.message(None, None, now() - 100);
    relay.insert_legacy(&legacy).await;
    assert!(
        relay.thread_row(&legacy.id).await.is_none(),
        "no metadata row"
    );
    let got =
        a.ws.req("q", vec![json!({"#h": [&a.channel], "kinds": [9]})])
            .await
            .expect("REQ");
    assert_eq!(got, vec![legacy.clone()], "legacy rows are served");
    // Replying to a legacy event treats it as a top-level root.
    let reply = a.post(Some(&legacy), None, now()).await;
    let row = relay.thread_row(&reply.id).await.expect("row");
    assert_eq!(
        (row.depth, row.root_id.as_deref()),
        (1, Some(legacy.id.as_str()))
    );
    let parent = relay
        .thread_row(&legacy.id)
        .await
        .expect("parent row now exists");
    assert_eq!((parent.depth, parent.reply_count), (0, 1));
    relay.stop().await;
}
