//! The legacy oldest-first thread path (`#e` + `depth_limit`), on both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use buzz_nostr::event::Event;
use common::*;
use serde_json::{json, Value};

both_backends!(
    oldest_first_paging_cursors_aliases_and_sentinels,
    aux_and_access,
);

fn legacy(channel: &str, root: &str, limit: u64) -> Value {
    json!({"#h": [channel], "#e": [root], "kinds": [9], "depth_limit": 2147483647,
        "limit": limit})
}

async fn oldest_first_paging_cursors_aliases_and_sentinels(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let root = alice.post_at(&ch, "root", t).await;
    let mut replies: Vec<Event> = Vec::new();
    for i in 0..9 {
        // Three replies per second; every third nests under the previous one.
        let parent = match (i % 3, replies.last()) {
            (2, Some(previous)) => previous.clone(),
            _ => root.clone(),
        };
        let reply = alice.reply_event(&ch, &parent, None, &format!("r{i}"), t + 1 + i / 3, false);
        replies.push(alice.publish(reply).await);
    }
    // Rows are not restricted by kind on this path; deleted replies are gone.
    let other_kind = alice
        .publish(alice.sign_at(
            40_002,
            vec![tag(&["h", &ch]), tag(&["e", &root.id, "", "reply"])],
            "k",
            t + 2,
        ))
        .await;
    replies.push(other_kind);
    let deleted = alice.post_reply(&ch, &root, t + 2).await;
    alice.delete(&ch, &deleted, now()).await;
    let mut expected = replies.clone();
    oldest_first(&mut expected);

    // Composite cursor from the last loaded reply, snake case and camel case.
    for (at_key, id_key) in [
        ("thread_cursor", "thread_cursor_id"),
        ("threadCursor", "threadCursorId"),
    ] {
        let mut got = Vec::new();
        let mut filter = legacy(&ch, &root.id, 4);
        loop {
            let page = alice.query(&relay, vec![filter.clone()]).await;
            assert!(
                page.iter().all(|e| e.kind == 9 || e.kind == 40_002),
                "no bounds"
            );
            let Some(last) = page.last() else { break };
            filter[at_key] = json!(last.created_at);
            filter[id_key] = json!(last.id);
            got.extend(page);
        }
        assert_eq!(
            ids(&got),
            ids(&expected),
            "{at_key}: every reply once, oldest first"
        );
    }
    // The -1 start sentinel, with or without an id.
    let mut start = legacy(&ch, &root.id, 4);
    start["thread_cursor"] = json!(-1);
    assert_eq!(
        ids(&alice.query(&relay, vec![start.clone()]).await),
        ids(&expected[..4])
    );
    start["thread_cursor_id"] = json!("0".repeat(64));
    assert_eq!(
        ids(&alice.query(&relay, vec![start]).await),
        ids(&expected[..4])
    );
    // Timestamp-only continuation skips the rest of that second.
    let mut ts_only = legacy(&ch, &root.id, 100);
    ts_only["thread_cursor"] = json!(t + 1);
    let after: Vec<Event> = expected
        .iter()
        .filter(|e| e.created_at > t + 1)
        .cloned()
        .collect();
    assert_eq!(ids(&alice.query(&relay, vec![ts_only]).await), ids(&after));
    // depth_limit is an explicit maximum depth.
    let mut shallow = legacy(&ch, &root.id, 100);
    shallow["depth_limit"] = json!(1);
    let depth_one: Vec<Event> = expected
        .iter()
        .filter(|e| e.tags.iter().any(|t| t[0] == "e" && t[1] == root.id))
        .cloned()
        .collect();
    assert_eq!(
        ids(&alice.query(&relay, vec![shallow]).await),
        ids(&depth_one)
    );
    // Without a limit: the default (100) covers them all. WebSocket REQ serves it too.
    let mut unlimited = legacy(&ch, &root.id, 0);
    unlimited.as_object_mut().expect("object").remove("limit");
    assert_eq!(
        ids(&alice.query(&relay, vec![unlimited.clone()]).await),
        ids(&expected)
    );
    assert_eq!(
        alice.req(vec![unlimited]).await.map(|e| ids(&e)),
        Ok(ids(&expected))
    );
    relay.stop().await;
}

async fn aux_and_access(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let other = alice.create_channel(false).await;
    let private = alice.create_channel(true).await;
    let t = now() - 100;
    let root = alice.post_at(&ch, "root", t).await;
    let reply = alice.post_reply(&ch, &root, t + 1).await;
    let on_root = bob.react(&ch, &root, t + 2).await;
    let on_reply = bob.react(&ch, &reply, t + 3).await;
    let withdrawn = bob.react(&ch, &reply, t + 4).await;
    let undo = bob.delete(&ch, &withdrawn, t + 5).await;

    let mut filter = legacy(&ch, &root.id, 10);
    filter["include_aux"] = json!(true);
    let got = bob.query(&relay, vec![filter.clone()]).await;
    assert_eq!(ids(&got), ids(&[reply, on_root, on_reply, undo]));

    // Another #h, an unreadable channel, a missing root: nothing.
    let secret = alice.post_at(&private, "secret", t).await;
    alice.post_reply(&private, &secret, t + 1).await;
    for f in [
        legacy(&other, &root.id, 10),
        legacy(&private, &secret.id, 10),
        legacy(&ch, &"f".repeat(64), 10),
    ] {
        assert_eq!(bob.query(&relay, vec![f]).await, vec![]);
    }
    // Malformed legacy fields are refused.
    for (key, value) in [
        ("thread_cursor", json!("soon")),
        ("thread_cursor", json!(-5)),
        ("depth_limit", json!(-1)),
        ("thread_cursor_id", json!("abc")),
    ] {
        let mut f = legacy(&ch, &root.id, 10);
        f[key] = value;
        if key == "thread_cursor_id" {
            f["thread_cursor"] = json!(t);
        }
        assert_eq!(bob.http(&relay, vec![f]).await.0, 400, "{key}");
    }
    relay.stop().await;
}
