//! The sidebar and what ingest does to it: unread, exact mentions, the divider, own
//! messages, followed threads, joining, paging and refresh — on SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, TestBackend};
use buzz_read_state_client as client;
use common::*;
use serde_json::{json, Value};

async fn unread_mentions_and_divider(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("general", "stream").await;
    bob.join(&ch).await;
    let before = alice.post(&ch).await;

    // Nothing counts before the first intent.
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    assert_eq!(row["mentions"], 0);
    assert_eq!(row["read_through_id"], before.id.as_str());

    let own = bob.start(&ch).await;
    let row = bob.row(&ch).await;
    assert_eq!(
        (row["unread"].clone(), row["read_through_id"].clone()),
        (json!(false), json!(own.id))
    );
    assert_eq!(row["name"], "general");
    assert_eq!(row["channel_type"], "stream");
    assert_eq!(row["archived"], false);
    assert_eq!(row["hidden"], false);
    assert_eq!(row["threads"], json!([]));

    let bob_pk = bob.pubkey();
    alice.post(&ch).await;
    alice.post_at(&ch, tick(), &[&bob_pk]).await;
    let third = alice.post_at(&ch, tick(), &[&bob_pk]).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], true, "{row}");
    assert_eq!(row["mentions"], 2, "exact mention count: {row}");
    assert_eq!(
        row["read_through_id"],
        own.id.as_str(),
        "divider below the last read"
    );

    // Deleted mentions no longer count; an edit or reaction never makes it unread.
    alice.delete(&ch, &third).await;
    assert_eq!(bob.row(&ch).await["mentions"], 1);

    // Posting marks the author read through their own message.
    let mine = bob.post(&ch).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    assert_eq!(row["mentions"], 0);
    assert_eq!(row["read_through_id"], mine.id.as_str());

    // A reaction (kind 7) never counts.
    let tags = vec![
        buzz_core::testkit::tag(&["h", &ch]),
        buzz_core::testkit::tag(&["e", &mine.id]),
    ];
    alice.publish(alice.keys.sign(7, tags, "+", now())).await;
    assert_eq!(bob.row(&ch).await["unread"], false);
}

async fn own_messages_never_count(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel("solo", "stream").await;
    alice.start(&ch).await;
    let pk = alice.pubkey();
    // Even mentioning yourself.
    alice.post_at(&ch, tick(), &[&pk]).await;
    let root = alice.post(&ch).await;
    alice.reply(&ch, &root).await;
    let row = alice.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    assert_eq!(row["mentions"], 0);
    assert_eq!(row["threads"], json!([]));
}

async fn threads_follow_and_show(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let ch = alice.create_channel("dev", "stream").await;
    bob.join(&ch).await;
    carol.join(&ch).await;
    alice.start(&ch).await;
    bob.start(&ch).await;
    carol.start(&ch).await;

    // Alice's top-level message; Bob replies: Alice follows (reply to her top-level),
    // Bob follows (his own reply, read through it).
    let root = alice.post(&ch).await;
    let r1 = bob.reply(&ch, &root).await;
    let row = alice.row(&ch).await;
    assert_eq!(
        row["unread"], false,
        "a reply never makes the channel unread: {row}"
    );
    let t = thread(&row, &root).expect("followed thread listed");
    assert_eq!(t["unread"], true);
    assert_eq!(t["mentions"], 0);
    assert_eq!(t["latest_id"], r1.id.as_str());
    assert_eq!(t["read_through_id"], Value::Null, "no reply read yet");
    assert!(
        thread(&bob.row(&ch).await, &root).is_none(),
        "own reply is read"
    );
    // Carol neither follows nor is mentioned.
    assert!(thread(&carol.row(&ch).await, &root).is_none());

    // A mention follows Carol, counts on the thread row, not the channel.
    let carol_pk = carol.pubkey();
    let r2 = bob
        .reply_full(&ch, &root, &r1, tick(), &[&carol_pk], false)
        .await;
    let row = carol.row(&ch).await;
    assert_eq!(row["mentions"], 0, "{row}");
    let t = thread(&row, &root).expect("mention follows");
    assert_eq!(
        (t["unread"].clone(), t["mentions"].clone()),
        (json!(true), json!(1))
    );
    assert_eq!(t["latest_id"], r2.id.as_str());
    assert_eq!(
        t["read_through_id"],
        r1.id.as_str(),
        "the follow starts just before the mention: earlier replies are read"
    );

    // Marking the thread through its latest reply clears it.
    alice
        .apply(client::mark_through(&ch, Some(&root.id), &r2.id))
        .await;
    assert!(thread(&alice.row(&ch).await, &root).is_none());

    // Sticky unfollow: later replies do not follow Alice again...
    alice.apply(client::unfollow(&ch, &root.id)).await;
    bob.reply(&ch, &root).await;
    assert!(
        thread(&alice.row(&ch).await, &root).is_none(),
        "unfollow is sticky"
    );
    // ...marking an unfollowed thread changes nothing...
    let r4 = bob.reply(&ch, &root).await;
    let out = alice
        .intents(&[client::mark_through(&ch, Some(&root.id), &r4.id)])
        .await;
    assert_eq!(out[0]["status"], "blocked", "{out:?}");
    // ...but a mention does, caught up to just before itself.
    let alice_pk = alice.pubkey();
    let r5 = bob
        .reply_full(&ch, &root, &r4, tick(), &[&alice_pk], false)
        .await;
    let row = alice.row(&ch).await;
    let t = thread(&row, &root).expect("a mention re-follows");
    assert_eq!(t["mentions"], 1);
    assert_eq!(
        t["read_through_id"],
        r4.id.as_str(),
        "replies from the unfollow stay read"
    );
    assert_eq!(t["latest_id"], r5.id.as_str());

    // Her own reply follows again too (and reads through it).
    alice.apply(client::unfollow(&ch, &root.id)).await;
    alice.reply(&ch, &root).await;
    bob.reply(&ch, &root).await;
    assert!(
        thread(&alice.row(&ch).await, &root).is_some(),
        "own reply re-follows"
    );
}

async fn thread_order_and_broadcast(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("order", "stream").await;
    bob.join(&ch).await;
    alice.start(&ch).await;
    let t = now();
    let old = alice.post_at(&ch, t - 100, &[]).await;
    let new = alice.post_at(&ch, t - 50, &[]).await;
    alice.apply(client::mark_through(&ch, None, &new.id)).await;
    // Replies: the thread of `old` gets the newer reply, so it is listed first.
    bob.reply_full(&ch, &new, &new, t - 10, &[], false).await;
    bob.reply_full(&ch, &old, &old, t - 5, &[], false).await;
    let row = alice.row(&ch).await;
    let roots: Vec<&str> = row["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .filter_map(|t| t["root_id"].as_str())
        .collect();
    assert_eq!(roots, vec![old.id.as_str(), new.id.as_str()], "{row}");
    assert_eq!(row["unread"], false);

    // A broadcast reply shows in the timeline: it makes the channel unread.
    bob.reply_full(&ch, &old, &old, tick(), &[], true).await;
    assert_eq!(alice.row(&ch).await["unread"], true);
}

async fn dm_members_follow(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let dm = alice.create_channel("dm", "dm").await;
    bob.join(&dm).await;
    carol.join(&dm).await;
    alice.start(&dm).await;
    bob.start(&dm).await;
    carol.start(&dm).await;
    let root = bob.post(&dm).await;
    let reply = alice.reply(&dm, &root).await;
    let t = thread(&carol.row(&dm).await, &root)
        .cloned()
        .expect("a DM reply follows every member");
    assert_eq!(t["latest_id"], reply.id.as_str());
}

async fn joining_starts_caught_up(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("join", "stream").await;
    let other = alice.create_channel("other", "stream").await;
    bob.join(&other).await;
    bob.start(&other).await;
    bob.join(&ch).await;
    let root = alice.post(&ch).await;
    let bob_pk = bob.pubkey();
    alice
        .reply_full(&ch, &root, &root, tick(), &[&bob_pk], false)
        .await;
    assert!(thread(&bob.row(&ch).await, &root).is_some());
    // Leave; activity while away; rejoin: caught up, threads included.
    bob.leave(&ch).await;
    alice.post(&ch).await;
    alice.reply(&ch, &root).await;
    bob.join(&ch).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["unread"], false, "{row}");
    assert_eq!(row["threads"], json!([]), "{row}");
}

async fn paging_and_refresh(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let ch = alice.create_channel(&format!("c{i}"), "stream").await;
        if i != 2 {
            bob.join(&ch).await;
        }
        ids.push(ch);
    }
    // A private channel Bob is not in, and one deleted after he joined.
    let deleted = ids[4].clone();
    alice
        .publish(alice.keys.sign(
            9008,
            vec![buzz_core::testkit::tag(&["h", &deleted])],
            "",
            now(),
        ))
        .await;
    let mut joined: Vec<String> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2 && *i != 4)
        .map(|(_, id)| id.clone())
        .collect();
    joined.sort();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = bob.api.sidebar(2, cursor.as_deref()).await.expect("page");
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(page.header("cache-control"), Some("private, no-store"));
        let rows = page.body["channels"].as_array().cloned().expect("rows");
        assert!(rows.len() <= 2);
        seen.extend(
            rows.iter()
                .filter_map(|r| r["channel_id"].as_str().map(str::to_owned)),
        );
        match page.body["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(Some(next), seen.last().map(String::as_str));
                cursor = Some(next.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(seen, joined, "every joined live channel once, by id");

    // Refresh: ordered by id, next_cursor null; unjoined and deleted ids are absent.
    let mut ask: Vec<&str> = vec![&joined[1], &ids[2], &deleted, &joined[0]];
    let answer = bob.api.refresh(&ask).await.expect("refresh");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["next_cursor"], Value::Null);
    let got: Vec<&str> = answer.body["channels"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["channel_id"].as_str())
        .collect();
    assert_eq!(got, vec![joined[0].as_str(), joined[1].as_str()]);

    // Bad asks.
    ask.push(&joined[0]);
    let dup = bob.api.refresh(&ask).await.expect("dup");
    assert_api_error(&dup, 400, "invalid_request");
    for bad in [
        format!("/buzz/v1/me/sidebar?channel_ids={}&limit=2", joined[0]),
        "/buzz/v1/me/sidebar?limit=21".to_owned(),
        "/buzz/v1/me/sidebar?limit=0".to_owned(),
        "/buzz/v1/me/sidebar?cursor=nope".to_owned(),
        "/buzz/v1/me/sidebar?extra=1".to_owned(),
        format!(
            "/buzz/v1/me/sidebar?channel_ids={}",
            vec![joined[0].as_str(); 21].join(",")
        ),
    ] {
        let answer = bob.api.get(&bad).await.expect("bad");
        assert_api_error(&answer, 400, "invalid_request");
    }
}

both_backends!(
    unread_mentions_and_divider,
    own_messages_never_count,
    threads_follow_and_show,
    thread_order_and_broadcast,
    dm_members_follow,
    joining_starts_caught_up,
    paging_and_refresh,
);
