//! Explicit contexts (`GET /buzz/v1/me/read-state?targets=`): context and message
//! statuses in the spec's decision order, bounds — on SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend};
use buzz_read_state_client as client;
use common::*;
use serde_json::{json, Value};

fn statuses(answer: &Value, context: usize) -> Vec<(String, String)> {
    answer["contexts"][context]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["status"].as_str().unwrap_or_default().to_owned(),
                m["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn s(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

async fn statuses_in_decision_order(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("ctx", "stream").await;
    bob.join(&ch).await;
    let before = alice.post(&ch).await;
    let own = bob.start(&ch).await;
    let root = alice.post(&ch).await;
    bob.apply(client::mark_through(&ch, None, &root.id)).await;
    let unread = alice.post(&ch).await;
    let deleted = alice.post(&ch).await;
    alice.delete(&ch, &deleted).await;
    let bob_pk = bob.pubkey();
    let reply = alice.reply(&ch, &root).await; // Bob does not follow
    let mention = alice
        .reply_full(&ch, &root, &reply, tick(), &[&bob_pk], false)
        .await;
    let broadcast = alice.reply_full(&ch, &root, &root, tick(), &[], true).await;
    let root2 = alice.post(&ch).await;
    let stranger_reply = alice.reply(&ch, &root2).await; // Bob neither follows nor is named
    let missing = "d".repeat(64);
    let other = alice.create_channel("other", "stream").await;
    let elsewhere = alice.post(&other).await;
    let secret = {
        let id = uuid::Uuid::new_v4().to_string();
        let tags = vec![tag(&["h", &id]), tag(&["name", "s"]), tag(&["private"])];
        alice.publish(alice.keys.sign(9007, tags, "", now())).await;
        id
    };

    let targets = json!([
        {"target": {"channel_id": ch}, "message_ids": [
            before.id, own.id, root.id, unread.id, deleted.id, broadcast.id, reply.id,
            missing, elsewhere.id]},
        {"target": {"channel_id": ch, "root_id": root.id}, "message_ids": [
            reply.id, mention.id, root.id]},
        {"target": {"channel_id": secret}, "message_ids": []},
        {"target": {"channel_id": ch, "root_id": unread.id}},
        {"target": {"channel_id": ch, "root_id": reply.id}},
        {"target": {"channel_id": ch, "root_id": root2.id}, "message_ids": [stranger_reply.id]},
    ]);
    let answer = bob.api.contexts(&targets).await.expect("contexts");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.header("cache-control"), Some("private, no-store"));
    let body = &answer.body;
    assert_eq!(body["account"]["started"], true);
    assert_eq!(body["contexts"].as_array().map(Vec::len), Some(6));
    assert_eq!(body["contexts"][0]["status"], "available");
    assert_eq!(
        statuses(body, 0),
        vec![
            s("not_counted", ""), // before the account started
            s("not_counted", ""), // own
            s("read", ""),        // at the frontier
            s("unread", "timeline"),
            s("not_counted", ""), // deleted
            s("unread", "broadcast"),
            s("unavailable", ""), // a thread reply: wrong context
            s("unavailable", ""), // missing
            s("unavailable", ""), // another channel
        ],
        "{body}"
    );
    assert_eq!(
        statuses(body, 1),
        vec![
            s("read", ""), // the mention's follow starts just before it
            s("unread", "mention"),
            s("unavailable", ""), // the root is in the timeline, not the thread
        ],
        "{body}"
    );
    assert_eq!(
        body["contexts"][2],
        json!({"status": "unavailable"}),
        "forbidden"
    );
    // A thread context rooted at a message with no replies is still a context; one
    // rooted at a reply is not.
    assert_eq!(body["contexts"][3]["status"], "available");
    assert_eq!(body["contexts"][4], json!({"status": "unavailable"}));
    // Not followed, not mentioned: outside Bob's conversations.
    assert_eq!(statuses(body, 5), vec![s("not_counted", "")], "{body}");

    // After the mention, Bob follows: the reply past the frontier is his conversation.
    let later = alice.reply(&ch, &root).await;
    let answer = bob
        .api
        .contexts(&json!([{"target": {"channel_id": ch, "root_id": root.id},
                             "message_ids": [later.id]}]))
        .await
        .expect("contexts");
    assert_eq!(statuses(&answer.body, 0), vec![s("unread", "conversation")]);

    // The whole-channel cut is part of a thread's frontier.
    bob.apply(client::mark_channel_read(&ch, &later.id)).await;
    let answer = bob
        .api
        .contexts(&json!([{"target": {"channel_id": ch, "root_id": root.id},
                             "message_ids": [later.id, mention.id]}]))
        .await
        .expect("contexts");
    assert_eq!(
        statuses(&answer.body, 0),
        vec![s("read", ""), s("read", "")]
    );
}

async fn context_bounds(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut user = User::new(&relay).await;
    let ch = user.create_channel("b", "stream").await;
    let m = user.post(&ch).await;
    let one = json!({"target": {"channel_id": ch}, "message_ids": [m.id]});
    let ok = user
        .api
        .contexts(&Value::Array(vec![one.clone(); 20]))
        .await
        .expect("20");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.body["account"]["started"], false);
    for bad in [
        Value::Array(vec![one.clone(); 21]),
        Value::Array(vec![
            json!({"target": {"channel_id": ch}, "message_ids": vec![m.id.clone(); 51]});
            2
        ]),
        json!([]),
        json!([{"target": {"channel_id": ch}, "extra": 1}]),
        json!([{"target": {"channel_id": "nope"}}]),
        json!({"target": {"channel_id": ch}}),
    ] {
        let answer = user.api.contexts(&bad).await.expect("bad");
        assert_api_error(&answer, 400, "invalid_request");
    }
    let answer = user
        .api
        .get("/buzz/v1/me/read-state")
        .await
        .expect("no targets");
    assert_api_error(&answer, 400, "invalid_request");
    // 100 selectors is the bound, not over it.
    let hundred = Value::Array(vec![
        json!({"target": {"channel_id": ch}, "message_ids": vec![m.id.clone(); 50]});
        2
    ]);
    let answer = user.api.contexts(&hundred).await.expect("100");
    assert_eq!(answer.status, 200, "{}", answer.body);
}

both_backends!(statuses_in_decision_order, context_bounds);
