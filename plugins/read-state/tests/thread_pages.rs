//! Thread floods (attack finding, item 4): a sidebar row lists at most `max_threads`
//! followed threads with an unread reply and pages the rest through
//! `threads_next_cursor` / `threads_cursor`, in the spec's order (newest latest reply
//! first, then root id) with nothing lost or repeated; mentions make only channel
//! members follow. On SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::testkit::{now, TestBackend};
use buzz_read_state_client as client;
use common::*;
use serde_json::{json, Value};

/// Root ids of a row's threads, in order.
fn roots(row: &Value) -> Vec<String> {
    row["threads"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["root_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Follow `threads_next_cursor` from `row` to the end: every listed root in order and
/// the number of pages.
async fn every_thread(user: &User, channel: &str, row: &Value) -> (Vec<String>, usize) {
    let mut all = roots(row);
    let mut pages = 1;
    let mut cursor = row["threads_next_cursor"].as_str().map(str::to_owned);
    while let Some(c) = cursor {
        let answer = user.threads_page(channel, &c).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["next_cursor"], Value::Null);
        let next = &answer.body["channels"][0];
        assert_eq!(next["channel_id"], channel, "{}", answer.body);
        all.extend(roots(next));
        pages += 1;
        cursor = next["threads_next_cursor"].as_str().map(str::to_owned);
        assert!(pages < 100, "paging does not end");
    }
    (all, pages)
}

/// The reproduction: 60 attacker threads that mention the victim. Before the bound the
/// row listed all 60 (and at ~5,000 the answer passed 1 MiB: a permanent 400).
async fn a_flood_of_threads_is_paged(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut mallory = User::new(&relay).await;
    let ch = alice.create_channel("general", "stream").await;
    bob.join(&ch).await;
    mallory.join(&ch).await;
    bob.start(&ch).await;
    let bob_pk = bob.pubkey();
    let mut threads = Vec::new();
    for _ in 0..60 {
        let root = mallory.post_at(&ch, tick(), &[&bob_pk]).await;
        mallory.reply(&ch, &root).await;
        threads.push(root.id);
    }
    // Newest latest reply first: the reverse of posting order.
    threads.reverse();

    let row = bob.row(&ch).await;
    let first = roots(&row);
    assert_eq!(
        first.len(),
        50,
        "a row lists at most max_threads (50) threads, listed {}",
        first.len()
    );
    assert!(
        row["threads_next_cursor"].is_string(),
        "more threads: a cursor ({row})"
    );
    let (all, pages) = every_thread(&bob, &ch, &row).await;
    assert_eq!(pages, 2);
    assert_eq!(all, threads, "every thread once, in order, across pages");
    // The timeline and its fields are unchanged by paging.
    assert_eq!(row["unread"], true);
    assert_eq!(row["mentions"], 60);
}

/// Pages follow `max_threads`; the cursor is strict; a thread that changes between
/// pages is neither lost nor repeated when its order key only grows; NIP-11 advertises
/// the bound.
async fn pages_cursor_and_bounds(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_threads": 3}), |_| {}).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel("dev", "stream").await;
    let other = alice.create_channel("other", "stream").await;
    bob.join(&ch).await;
    bob.join(&other).await;
    bob.start(&ch).await;
    let bob_pk = bob.pubkey();
    let mut roots_in_order = Vec::new();
    let mut events = Vec::new();
    for _ in 0..8 {
        let root = alice.post_at(&ch, tick(), &[&bob_pk]).await;
        let reply = alice.reply(&ch, &root).await;
        roots_in_order.push(root.id.clone());
        events.push((root, reply));
    }
    roots_in_order.reverse();
    let row = bob.row(&ch).await;
    assert_eq!(roots(&row), roots_in_order[..3].to_vec(), "{row}");
    let (all, pages) = every_thread(&bob, &ch, &row).await;
    assert_eq!((all, pages), (roots_in_order.clone(), 3));

    // A thread whose only unread reply is deleted leaves the list at once.
    let (gone_root, gone_reply) = &events[7];
    alice.delete(&ch, gone_reply).await;
    let row = bob.row(&ch).await;
    assert!(
        !roots(&row).contains(&gone_root.id),
        "a thread with only a deleted unread reply is not listed: {row}"
    );
    let (all, _) = every_thread(&bob, &ch, &row).await;
    assert_eq!(all, roots_in_order[1..].to_vec());

    // Marking the whole channel read clears every thread, listed or not.
    let (_, newest) = &events[6];
    bob.apply(client::mark_channel_read(&ch, &newest.id)).await;
    let row = bob.row(&ch).await;
    assert_eq!(row["threads"], json!([]), "{row}");
    assert_eq!(row["threads_next_cursor"], Value::Null, "{row}");

    // Bad asks: the cursor needs exactly one channel id, and a well-formed value.
    let cursor = format!("{}:{}", now(), "a".repeat(64));
    let enc = client::encode(&cursor);
    for bad in [
        format!("/buzz/v1/me/sidebar?threads_cursor={enc}"),
        format!("/buzz/v1/me/sidebar?limit=2&threads_cursor={enc}"),
        format!("/buzz/v1/me/sidebar?channel_ids={ch},{other}&threads_cursor={enc}"),
        format!("/buzz/v1/me/sidebar?channel_ids={ch}&threads_cursor="),
        format!("/buzz/v1/me/sidebar?channel_ids={ch}&threads_cursor=12"),
        format!(
            "/buzz/v1/me/sidebar?channel_ids={ch}&threads_cursor={}",
            client::encode(&format!("x:{}", "a".repeat(64)))
        ),
        format!(
            "/buzz/v1/me/sidebar?channel_ids={ch}&threads_cursor={}",
            client::encode(&format!("12:{}", "A".repeat(64)))
        ),
    ] {
        let answer = bob.api.get(&bad).await.expect("bad");
        assert_api_error(&answer, 400, "invalid_request");
    }

    // NIP-11 advertises the bound (the capability to page threads).
    let info = bob.api.get_with("/info", None).await.expect("NIP-11");
    assert_eq!(info.body["buzz_v1"]["max_threads"], 3, "{}", info.body);
}

/// Mentions make only channel members follow (private and open channels alike), and
/// leave no mention rows for anyone else.
async fn mentions_follow_only_members(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut mallory = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let carol = User::new(&relay).await;
    let private = alice.create_private_channel("secret").await;
    alice.add_member(&private, &mallory.pubkey()).await;
    let open = alice.create_channel("open", "stream").await;
    mallory.join(&open).await;
    bob.join(&open).await;
    bob.start(&open).await;
    let (bob_pk, carol_pk) = (bob.pubkey(), carol.pubkey());

    // Bob is not in the private channel; Carol is in neither.
    for ch in [&private, &open] {
        let root = mallory.post_at(ch, tick(), &[&bob_pk, &carol_pk]).await;
        mallory
            .reply_full(ch, &root, &root, tick(), &[&bob_pk, &carol_pk], false)
            .await;
    }
    let bob_rows = frontiers_of(&relay, &bob_pk).await;
    let followed: Vec<&str> = bob_rows
        .threads
        .iter()
        .map(|t| t.channel_id.as_str())
        .collect();
    assert_eq!(
        followed,
        vec![open.as_str()],
        "Bob follows only in the channel he is a member of: {:?}",
        bob_rows.threads
    );
    assert!(
        frontiers_of(&relay, &carol_pk).await.threads.is_empty(),
        "a non-member follows nothing"
    );
    let cid = community_id(&relay);
    let mentions = |pk: &str, ch: &str| {
        format!(
            "SELECT COUNT(*) AS v FROM read_state_mentions WHERE community_id = {cid} \
             AND pubkey = '{pk}' AND channel_id = '{ch}'"
        )
    };
    assert_eq!(count(&relay, &mentions(&bob_pk, &private)).await, 0);
    assert_eq!(count(&relay, &mentions(&carol_pk, &private)).await, 0);
    assert_eq!(count(&relay, &mentions(&carol_pk, &open)).await, 0);
    assert_eq!(count(&relay, &mentions(&bob_pk, &open)).await, 2);
    let row = bob.row(&open).await;
    assert_eq!(row["mentions"], 1, "{row}");
    assert_eq!(row["threads"].as_array().map(Vec::len), Some(1), "{row}");
}

both_backends!(
    a_flood_of_threads_is_paged,
    pages_cursor_and_bounds,
    mentions_follow_only_members,
);
