//! Channel mode (`top_level: true`) over the wire, on both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use buzz_nostr::event::Event;
use common::*;
use serde_json::json;
use std::collections::HashSet;

both_backends!(
    same_second_burst_pages_every_row_exactly_once,
    exact_multiple_final_page_is_exhausted,
    ineligible_rows_do_not_fake_exhaustion,
    unreconstructable_row_still_advances_the_cursor,
    broadcast_and_legacy_rows,
    aux_closure_two_hops_exact_position_and_access,
    summaries_are_exact,
    bounds_bind_the_request_cursor,
    half_and_malformed_cursors_are_rejected,
    inaccessible_channel_answers_nothing,
    other_top_level_values_are_plain_filters,
    overlays_are_rejected_at_ingest,
    window_rows_are_a_subset_of_the_plain_h_stream,
    expired_rows_and_aux_are_not_served,
);

async fn same_second_burst_pages_every_row_exactly_once(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 60;
    let burst: Vec<Event> = (0..1000)
        .map(|i| alice.message(&ch, &format!("burst {i}"), t))
        .collect();
    alice.publish_all(&burst).await;
    let mut expected = burst.clone();
    newest_first(&mut expected);

    for via in [Via::Http, Via::Ws] {
        let rows = page_channel(&relay, &mut alice, via, &ch, 7).await;
        let unique: HashSet<&str> = rows.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(unique.len(), rows.len(), "{via:?}: no duplicates");
        assert_eq!(rows.len(), 1000, "{via:?}: every row");
        assert_eq!(ids(&rows), ids(&expected), "{via:?}: keyset order");
    }
    relay.stop().await;
}

async fn exact_multiple_final_page_is_exhausted(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let rows: Vec<Event> = (0..10).map(|i| alice.message(&ch, "m", t + i)).collect();
    alice.publish_all(&rows).await;

    let first = alice.query(&relay, vec![window(&ch, 5, None)]).await;
    let (has_more, next) = channel_bounds(&relay, &first, &ch, None);
    assert!(has_more);
    let next = next.expect("cursor");
    assert_eq!(of_kind(&first, 9).len(), 5);
    let last = &of_kind(&first, 9)[4];
    assert_eq!(
        next,
        (last.created_at, last.id.clone()),
        "cursor = last retained row"
    );

    let second = alice.query(&relay, vec![window(&ch, 5, Some(&next))]).await;
    let (has_more, none) = channel_bounds(&relay, &second, &ch, Some((next.0, &next.1)));
    assert_eq!(of_kind(&second, 9).len(), 5, "a full final page");
    assert!(
        !has_more && none.is_none(),
        "an exact multiple is still exhausted"
    );

    // An empty channel is a served window too: one bounds, has_more false.
    let empty = alice.create_channel(false).await;
    let got = alice.query(&relay, vec![window(&empty, 5, None)]).await;
    assert_eq!(got.len(), 1);
    assert_eq!(channel_bounds(&relay, &got, &empty, None), (false, None));
    relay.stop().await;
}

async fn ineligible_rows_do_not_fake_exhaustion(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let other = alice.create_channel(false).await;
    let t = now() - 800;
    let eligible: Vec<Event> = (0..10).map(|i| alice.message(&ch, "keep", t + i)).collect();
    alice.publish_all(&eligible).await;
    // 600 newer ineligible rows: 150 deleted, 150 of another kind, 150 replies, 150 in
    // another channel.
    let later = t + 100;
    let doomed: Vec<Event> = (0..150)
        .map(|i| alice.message(&ch, "gone", later + i))
        .collect();
    alice.publish_all(&doomed).await;
    let mut tags = vec![tag(&["h", &ch])];
    tags.extend(doomed.iter().map(|e| tag(&["e", &e.id])));
    alice.publish(alice.sign_at(5, tags, "", now())).await;
    let other_kind: Vec<Event> = (0..150)
        .map(|i| alice.sign_at(40_002, vec![tag(&["h", &ch])], "x", later + i))
        .collect();
    let replies: Vec<Event> = (0..150)
        .map(|i| alice.reply_event(&ch, &eligible[0], None, "r", later + i, false))
        .collect();
    let elsewhere: Vec<Event> = (0..150)
        .map(|i| alice.message(&other, "o", later + i))
        .collect();
    for batch in [&other_kind, &replies, &elsewhere] {
        alice.publish_all(batch).await;
    }

    let mut expected = eligible.clone();
    newest_first(&mut expected);
    let first = alice.query(&relay, vec![window(&ch, 7, None)]).await;
    assert_eq!(ids(&of_kind(&first, 9)), ids(&expected[..7]));
    let (has_more, next) = channel_bounds(&relay, &first, &ch, None);
    assert!(has_more);
    let next = next.expect("cursor");
    let second = alice.query(&relay, vec![window(&ch, 7, Some(&next))]).await;
    assert_eq!(ids(&of_kind(&second, 9)), ids(&expected[7..]));
    assert_eq!(
        channel_bounds(&relay, &second, &ch, Some((next.0, &next.1))),
        (false, None)
    );
    let all = alice.query(&relay, vec![window(&ch, 10, None)]).await;
    assert_eq!(ids(&of_kind(&all, 9)), ids(&expected));
    assert_eq!(channel_bounds(&relay, &all, &ch, None), (false, None));
    relay.stop().await;
}

async fn unreconstructable_row_still_advances_the_cursor(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let rows: Vec<Event> = (0..5).map(|i| alice.message(&ch, "m", t + i)).collect();
    alice.publish_all(&rows).await;
    // Newest first: rows[4], rows[3], rows[2] | rows[1], rows[0]. Break the page edge.
    corrupt_tags(&relay, &rows[2].id).await;

    let first = alice.query(&relay, vec![window(&ch, 3, None)]).await;
    assert_eq!(
        ids(&of_kind(&first, 9)),
        ids(&[rows[4].clone(), rows[3].clone()])
    );
    let (has_more, next) = channel_bounds(&relay, &first, &ch, None);
    let next = next.expect("cursor");
    assert!(has_more);
    assert_eq!(
        next,
        (rows[2].created_at, rows[2].id.clone()),
        "the skipped row is the scan position"
    );
    let second = alice.query(&relay, vec![window(&ch, 3, Some(&next))]).await;
    assert_eq!(
        ids(&of_kind(&second, 9)),
        ids(&[rows[1].clone(), rows[0].clone()])
    );
    assert_eq!(
        channel_bounds(&relay, &second, &ch, Some((next.0, &next.1))),
        (false, None)
    );
    relay.stop().await;
}

async fn broadcast_and_legacy_rows(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let root = alice.post_at(&ch, "root", t).await;
    let broadcast = alice.reply_event(&ch, &root, Some(&root), "b1", t + 1, true);
    let broadcast = alice.publish(broadcast).await;
    let deep = alice.reply_event(&ch, &broadcast, Some(&root), "b2", t + 2, true);
    let deep = alice.publish(deep).await;
    let quiet = alice.reply_event(&ch, &root, None, "q", t + 3, false);
    alice.publish(quiet).await;
    // Stored before thread metadata existed: top-level whatever their tags say.
    let legacy = alice.message(&ch, "legacy", t + 4);
    relay.insert_legacy(&legacy).await;
    let legacy_reply = alice.reply_event(&ch, &root, None, "legacy reply", t + 5, false);
    relay.insert_legacy(&legacy_reply).await;
    assert!(relay.thread_row(&legacy.id).await.is_none());
    assert_eq!(relay.thread_row(&deep.id).await.expect("row").depth, 2);

    let got = alice.query(&relay, vec![window(&ch, 50, None)]).await;
    assert_eq!(
        ids(&of_kind(&got, 9)),
        ids(&[legacy_reply, legacy, broadcast.clone(), root.clone()]),
        "depth 0, broadcast depth 1 and legacy rows; not depth 2 nor quiet replies"
    );
    // Summaries: a thread root and a broadcast reply with a reply of its own.
    let mut filter = window(&ch, 50, None);
    filter["include_summaries"] = json!(true);
    let got = alice.query(&relay, vec![filter]).await;
    let summaries = of_kind(&got, 39005);
    let summarized: Vec<&str> = summaries.iter().map(|s| s.tags[0][1].as_str()).collect();
    assert_eq!(summarized, vec![broadcast.id.as_str(), root.id.as_str()]);
    let content = |e: &Event| serde_json::from_str::<serde_json::Value>(&e.content).expect("JSON");
    assert_eq!(
        content(&summaries[0]),
        json!({"reply_count": 1, "descendant_count": 1, "last_reply_at": t + 2,
            "participants": [alice.pubkey()]})
    );
    assert_eq!(
        content(&summaries[1]),
        json!({"reply_count": 2, "descendant_count": 3, "last_reply_at": t + 3,
            "participants": [alice.pubkey()]})
    );
    relay.stop().await;
}

async fn aux_closure_two_hops_exact_position_and_access(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let mut dave = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let private = alice.create_channel(true).await;
    let t = now() - 200;
    let older = alice.post_at(&ch, "older", t).await;
    let row = alice.post_at(&ch, "row", t + 1).await;

    // Hop 1: live reactions and edits of the row.
    let edit = alice
        .publish(alice.sign_at(
            40_003,
            vec![tag(&["h", &ch]), tag(&["e", &row.id])],
            "row!",
            t + 2,
        ))
        .await;
    let kept = carol.react(&ch, &row, t + 3).await;
    // Hop 2: a reaction deleted by its author (tombstoned, so only its deletion shows),
    // an ineffective deletion by someone else, and a moderator removal.
    let withdrawn = bob.react(&ch, &row, t + 4).await;
    let undo = bob.delete(&ch, &withdrawn, t + 5).await;
    let not_yours = dave.delete(&ch, &kept, t + 6).await;
    let rude = dave.react(&ch, &row, t + 7).await;
    let removal = alice
        .publish(alice.sign_at(
            9005,
            vec![tag(&["h", &ch]), tag(&["e", &rude.id])],
            "",
            t + 8,
        ))
        .await;
    // Not references to the row: its id only in a tag's third position or in content.
    bob.publish(bob.sign_at(
        7,
        vec![tag(&["h", &ch]), tag(&["e", &older.id, &row.id])],
        "+",
        t + 9,
    ))
    .await;
    bob.publish(bob.sign_at(
        7,
        vec![tag(&["h", &ch]), tag(&["e", &older.id])],
        &row.id,
        t + 10,
    ))
    .await;
    // Not readable by bob: a reaction scoped to a private channel (legacy data: ingest
    // would refuse a cross-channel target).
    let hidden = alice.sign_at(
        7,
        vec![tag(&["h", &private]), tag(&["e", &row.id])],
        "+",
        t + 11,
    );
    relay.insert_legacy(&hidden).await;

    let mut filter = window(&ch, 1, None);
    filter["include_aux"] = json!(true);
    for via in [Via::Http, Via::Ws] {
        let got = ask(&relay, &mut bob, via, vec![filter.clone()])
            .await
            .expect("window");
        let expected: Vec<String> = [&row, &edit, &kept, &undo, &not_yours, &removal]
            .iter()
            .map(|e| e.id.clone())
            .collect();
        let mut got_ids = ids(&got);
        let bounds = got_ids.pop().expect("bounds last");
        assert_eq!(got.last().map(|e| e.kind), Some(39006), "{bounds}");
        assert_eq!(got_ids, expected, "{via:?}: rows, hop 1, hop 2; each once");
        assert!(channel_bounds(&relay, &got, &ch, None).0);
    }
    // Without include_aux: rows and bounds only.
    let plain = bob.query(&relay, vec![window(&ch, 1, None)]).await;
    assert_eq!(plain.len(), 2);
    relay.stop().await;
}

async fn summaries_are_exact(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let mut carol = User::new(&relay).await;
    let mut dave = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 300;
    let root = alice.post_at(&ch, "root", t).await;
    let lonely = alice.post_at(&ch, "no replies", t + 1).await;
    let r1 = bob.post_reply(&ch, &root, t + 2).await;
    carol.post_reply(&ch, &r1, t + 3).await;
    dave.post_reply(&ch, &root, t + 4).await;
    let r4 = bob.post_reply(&ch, &root, t + 5).await;
    // A crowded thread: twelve participants, only the ten most recent are listed.
    let crowded = alice.post_at(&ch, "crowded", t + 6).await;
    let mut crowd = Vec::new();
    for i in 0..12 {
        let mut u = User::new(&relay).await;
        u.post_reply(&ch, &crowded, t + 10 + i).await;
        crowd.push(u.pubkey());
    }

    let mut filter = window(&ch, 10, None);
    filter["include_summaries"] = json!(true);
    let got = alice.query(&relay, vec![filter.clone()]).await;
    assert_eq!(
        ids(&of_kind(&got, 9)),
        ids(&[crowded.clone(), lonely.clone(), root.clone()])
    );
    let summaries = of_kind(&got, 39005);
    assert_eq!(
        summaries.len(),
        2,
        "one per row with replies, none for {}",
        lonely.id
    );
    let kinds: Vec<u32> = got.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![9, 9, 9, 39005, 39005, 39006],
        "rows, summaries, bounds"
    );

    let check = |summary: &Event, row: &Event| {
        let content = overlay(&relay, summary, &["e", "d", "h"]);
        assert_eq!(summary.tags[0][1], row.id);
        assert_eq!(summary.tags[1][1], row.id);
        assert_eq!(summary.tags[2][1], ch);
        content
    };
    let crowded_summary = check(&summaries[0], &crowded);
    let expected_crowd: Vec<String> = crowd.iter().rev().take(10).cloned().collect();
    assert_eq!(
        crowded_summary,
        json!({"reply_count": 12, "descendant_count": 12, "last_reply_at": t + 21,
            "participants": expected_crowd})
    );
    let root_summary = check(&summaries[1], &root);
    assert_eq!(
        root_summary,
        json!({"reply_count": 3, "descendant_count": 4, "last_reply_at": t + 5,
            "participants": [bob.pubkey(), dave.pubkey(), carol.pubkey()]})
    );

    // Deletion takes a reply out of the counts and the participants' recency.
    bob.delete(&ch, &r4, now()).await;
    let got = alice.query(&relay, vec![filter]).await;
    let root_summary = check(&of_kind(&got, 39005)[1], &root);
    assert_eq!(
        root_summary,
        json!({"reply_count": 2, "descendant_count": 3, "last_reply_at": t + 4,
            "participants": [dave.pubkey(), carol.pubkey(), bob.pubkey()]})
    );
    relay.stop().await;
}

async fn bounds_bind_the_request_cursor(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let rows: Vec<Event> = (0..4).map(|i| alice.message(&ch, "m", t + i)).collect();
    alice.publish_all(&rows).await;
    for via in [Via::Http, Via::Ws] {
        let head = ask(&relay, &mut alice, via, vec![window(&ch, 2, None)])
            .await
            .expect("head");
        assert_eq!(of_kind(&head, 39006)[0].tags[0][1], format!("{ch}:head"));
        let (_, next) = channel_bounds(&relay, &head, &ch, None);
        let next = next.expect("more");
        let page = ask(&relay, &mut alice, via, vec![window(&ch, 2, Some(&next))])
            .await
            .expect("continuation");
        assert_eq!(
            of_kind(&page, 39006)[0].tags[0][1],
            format!("{ch}:{}:{}", next.0, next.1)
        );
        channel_bounds(&relay, &page, &ch, Some((next.0, &next.1)));
        // An uppercase cursor id is accepted; the binding echoes the canonical form.
        let upper = (next.0, next.1.to_uppercase());
        let page = ask(&relay, &mut alice, via, vec![window(&ch, 2, Some(&upper))])
            .await
            .expect("uppercase id");
        channel_bounds(&relay, &page, &ch, Some((next.0, &next.1)));
    }
    // NIP-11 `self` is the signer of every overlay.
    let (status, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    assert_eq!(info["self"], relay.running().pubkey());
    assert_eq!(
        info["channel_windows"]["channel_mode"],
        json!(["http", "websocket"])
    );
    relay.stop().await;
}

async fn half_and_malformed_cursors_are_rejected(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    alice.post_at(&ch, "m", now()).await;
    let id = "a".repeat(64);
    let base = window(&ch, 5, None);
    let with = |pairs: &[(&str, serde_json::Value)]| {
        let mut f = base.clone();
        for (k, v) in pairs {
            f[*k] = v.clone();
        }
        f
    };
    let bad = [
        with(&[("until", json!(now()))]),
        with(&[("before_id", json!(id))]),
        with(&[("until", json!(now())), ("before_id", json!("abc"))]),
        with(&[
            ("until", json!(now())),
            ("before_id", json!(format!("{}g", &id[1..]))),
        ]),
        with(&[("until", json!(now())), ("before_id", json!(12))]),
        with(&[("until", json!(-1)), ("before_id", json!(id))]),
        with(&[("until", json!("1")), ("before_id", json!(id))]),
        with(&[("#h", json!([]))]),
        with(&[("#h", json!([ch, ch]))]),
    ];
    for filter in bad {
        let (status, body) = alice.http(&relay, vec![filter.clone()]).await;
        assert_eq!(status, 400, "{filter}: {body}");
        assert!(
            body["error"].as_str().unwrap_or("").starts_with("invalid:"),
            "{body}"
        );
        let closed = alice.req(vec![filter.clone()]).await.expect_err("CLOSED");
        assert!(closed.starts_with("invalid:"), "{filter}: {closed}");
    }
    relay.stop().await;
}

async fn inaccessible_channel_answers_nothing(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    alice.post_at(&private, "secret", now()).await;
    let missing = uuid::Uuid::new_v4().to_string();
    for ch in [&private, &missing] {
        let mut filter = window(ch, 5, None);
        filter["include_aux"] = json!(true);
        filter["include_summaries"] = json!(true);
        assert_eq!(
            bob.http(&relay, vec![filter.clone()]).await,
            (200, json!([]))
        );
        assert_eq!(bob.req(vec![filter]).await, Ok(vec![]));
    }
    // Membership makes it a served window.
    alice.add_member(&private, &bob.pubkey()).await;
    let got = bob.query(&relay, vec![window(&private, 5, None)]).await;
    assert_eq!((of_kind(&got, 9).len(), of_kind(&got, 39006).len()), (1, 1));
    // Unauthenticated WebSocket readers are told to authenticate.
    let mut anonymous = relay.ws().await;
    let closed = anonymous
        .req("anon", vec![window(&private, 5, None)])
        .await
        .expect_err("auth required");
    assert!(closed.starts_with("auth-required:"), "{closed}");
    relay.stop().await;
}

async fn other_top_level_values_are_plain_filters(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 10;
    let root = alice.post_at(&ch, "root", t).await;
    let reply = alice.post_reply(&ch, &root, t + 1).await;
    for value in [json!(false), json!("true"), json!(1)] {
        let filter = json!({"top_level": value, "#h": [ch], "kinds": [9]});
        let got = alice.query(&relay, vec![filter]).await;
        assert_eq!(
            ids(&got),
            ids(&[reply.clone(), root.clone()]),
            "plain NIP-01"
        );
    }
    relay.stop().await;
}

async fn overlays_are_rejected_at_ingest(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let root = alice.post_at(&ch, "root", now()).await;
    for kind in [39005, 39006, 39007] {
        let forged = alice.sign_at(
            kind,
            vec![
                tag(&["d", &root.id]),
                tag(&["h", &ch]),
                tag(&["e", &root.id]),
            ],
            r#"{"has_more":false,"next_cursor":null}"#,
            now(),
        );
        let (ok, msg) = alice.ws.publish(&forged).await;
        assert!(!ok && msg.starts_with("invalid:"), "WS kind {kind}: {msg}");
        let (status, body) = relay
            .http()
            .post_signed(&alice.keys, "/events", forged.to_json().as_bytes())
            .await;
        assert_eq!(status, 400, "POST /events kind {kind}: {body}");
        assert_eq!(body["accepted"], json!(false));
        let stored = alice.req(vec![json!({"ids": [forged.id]})]).await;
        assert_eq!(stored, Ok(vec![]), "kind {kind} is not stored");
    }
    relay.stop().await;
}

/// NIP-CW "Degradation": a window's rows are a subset of what the plain `#h` filter
/// returns. Relay-signed group state (39000–39002) is stored with the channel but
/// carries `d`, not `h`; without `kinds` it must not appear as a timeline row (where,
/// being regenerated at every change, it would also jump to the head of the timeline).
async fn window_rows_are_a_subset_of_the_plain_h_stream(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 60;
    let root = alice.post_at(&ch, "root", t).await;
    alice.post_at(&ch, "second", t + 1).await;
    alice.react(&ch, &root, t + 2).await;
    // Regenerates 39000–39002 now: newer than every message.
    alice.add_member(&ch, &bob.pubkey()).await;

    let plain = alice.query(&relay, vec![json!({"#h": [ch]})]).await;
    let plain: HashSet<String> = ids(&plain).into_iter().collect();
    for via in [Via::Http, Via::Ws] {
        let filter = json!({"#h": [ch], "top_level": true});
        let got = ask(&relay, &mut alice, via, vec![filter])
            .await
            .unwrap_or_else(|e| panic!("{via:?}: {e:?}"));
        let rows: Vec<&Event> = got
            .iter()
            .filter(|e| !matches!(e.kind, 39005 | 39006))
            .collect();
        assert!(!rows.is_empty(), "{via:?}: the window has rows");
        for row in &rows {
            assert!(
                !matches!(row.kind, 39000..=39002),
                "{via:?}: relay group state {} served as a timeline row",
                row.kind
            );
            assert!(
                plain.contains(&row.id),
                "{via:?}: kind {} row is not in the plain #h stream",
                row.kind
            );
        }
    }
    relay.stop().await;
}

/// NIP-40: once a message or a reaction expires, no window serves it — the same rule
/// as core's REQ.
async fn expired_rows_and_aux_are_not_served(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now();
    let expires = (t + 2).to_string();
    let kept = alice.post_at(&ch, "kept", t - 10).await;
    let fleeting = alice
        .publish(alice.sign_at(
            9,
            vec![tag(&["h", &ch]), tag(&["expiration", &expires])],
            "fleeting",
            t - 5,
        ))
        .await;
    let reaction = alice
        .publish(alice.sign_at(
            7,
            vec![
                tag(&["h", &ch]),
                tag(&["e", &kept.id]),
                tag(&["expiration", &expires]),
            ],
            "+",
            t - 4,
        ))
        .await;
    let mut filter = window(&ch, 10, None);
    filter["include_aux"] = json!(true);

    let before = alice.query(&relay, vec![filter.clone()]).await;
    let before_ids = ids(&before);
    for e in [&kept, &fleeting, &reaction] {
        assert!(
            before_ids.contains(&e.id),
            "served before expiry: {}",
            e.content
        );
    }

    // Past the expiration second (NIP-40 compares whole seconds).
    while now() <= t + 2 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for via in [Via::Http, Via::Ws] {
        let after = ask(&relay, &mut alice, via, vec![filter.clone()])
            .await
            .expect("window");
        let after_ids = ids(&after);
        assert!(after_ids.contains(&kept.id), "{via:?}: the live row stays");
        assert!(
            !after_ids.contains(&fleeting.id),
            "{via:?}: an expired row is not served"
        );
        assert!(
            !after_ids.contains(&reaction.id),
            "{via:?}: an expired reaction is not served as aux"
        );
        assert_eq!(of_kind(&after, 9).len(), 1, "{via:?}: one row left");
    }
    relay.stop().await;
}
