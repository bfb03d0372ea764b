//! Thread mode (`thread_window: true`) over the wire, on both backends.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use common::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

both_backends!(
    thread_pages_newest_first_with_bound_bounds,
    roots_are_validated,
    grammar_is_strict,
    aux_closure_of_root_and_replies,
    expired_replies_are_not_served,
);
/// The binding `d` tag, computed here from the spec's text, independently of the relay.
#[allow(clippy::too_many_arguments)]
fn expected_d(
    host: &str,
    reader: &str,
    channel: &str,
    root: &str,
    limit: u64,
    depth: u64,
    kinds: &[u32],
    cursor: Option<&(i64, String)>,
    include_aux: bool,
) -> String {
    let kinds: Vec<String> = kinds.iter().map(u32::to_string).collect();
    let cursor = match cursor {
        None => "null".to_owned(),
        Some((at, id)) => format!("[{at},\"{id}\"]"),
    };
    let text = format!(
        r#"["tw",1,"older","{host}","{reader}","{channel}","{root}",{limit},{depth},[{}],{cursor},{include_aux}]"#,
        kinds.join(",")
    );
    format!("tw:1:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// The one `39007` of a thread window, checked against `d`: `(has_more, next)`.
fn thread_bounds(
    relay: &TestRelay,
    events: &[Event],
    d: &str,
    channel: &str,
    root: &str,
) -> (bool, Option<(i64, String)>) {
    let bounds = of_kind(events, 39007);
    assert_eq!(bounds.len(), 1, "exactly one 39007: {events:?}");
    let b = &bounds[0];
    let content = overlay(relay, b, &["d", "h", "e"]);
    assert_eq!(b.tags[0][1], d, "request binding");
    assert_eq!(b.tags[1][1], channel);
    assert_eq!(b.tags[2][1], root);
    assert_eq!(content["version"], json!(1));
    assert_eq!(content["direction"], json!("older"));
    cursor_content(&content)
}

async fn thread_pages_newest_first_with_bound_bounds(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 500;
    let root = alice.post_at(&ch, "root", t).await;
    let other_root = alice.post_at(&ch, "other", t).await;
    let mut replies = Vec::new();
    for i in 0..12 {
        // Pairs share a second; every third is nested one level deeper.
        let at = t + 1 + i / 2;
        let parent = if i % 3 == 2 {
            replies.last().cloned().unwrap_or(root.clone())
        } else {
            root.clone()
        };
        let reply = alice.reply_event(&ch, &parent, Some(&root), &format!("r{i}"), at, false);
        replies.push(alice.publish(reply).await);
    }
    // Excluded: another kind, a deleted reply, another thread's reply.
    let other_kind = alice
        .publish(alice.sign_at(
            40_002,
            vec![tag(&["h", &ch]), tag(&["e", &root.id, "", "reply"])],
            "k",
            t + 3,
        ))
        .await;
    let deleted = alice.post_reply(&ch, &root, t + 4).await;
    alice.delete(&ch, &deleted, now()).await;
    alice.post_reply(&ch, &other_root, t + 5).await;

    let mut expected = replies.clone();
    newest_first(&mut expected);
    let host = relay.host();
    let reader = bob.pubkey();
    for via in [Via::Http, Via::Ws] {
        let mut cursor: Option<(i64, String)> = None;
        let mut got = Vec::new();
        loop {
            let page = ask(
                &relay,
                &mut bob,
                via,
                vec![thread(&ch, &root.id, 5, cursor.as_ref())],
            )
            .await
            .expect("thread window");
            let d = expected_d(
                &host,
                &reader,
                &ch,
                &root.id,
                5,
                100,
                &[9],
                cursor.as_ref(),
                false,
            );
            let (has_more, next) = thread_bounds(&relay, &page, &d, &ch, &root.id);
            assert_eq!(page.last().map(|e| e.kind), Some(39007), "bounds last");
            let rows = of_kind(&page, 9);
            assert!(rows.len() <= 5);
            if has_more {
                let last = rows.last().expect("a full page");
                assert_eq!(next, Some((last.created_at, last.id.clone())));
            }
            got.extend(rows);
            if !has_more {
                break;
            }
            cursor = next;
        }
        assert_eq!(
            ids(&got),
            ids(&expected),
            "{via:?}: every reply once, newest first"
        );
    }

    // depth_limit 1: direct replies only. kinds: the 40002 reply joins.
    let mut shallow = thread(&ch, &root.id, 50, None);
    shallow["depth_limit"] = json!(1);
    let got = bob.query(&relay, vec![shallow]).await;
    let depth_one: Vec<String> = expected
        .iter()
        .filter(|e| {
            e.tags
                .iter()
                .any(|t| t[0] == "e" && t[1] == root.id && t[3] == "reply")
        })
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(ids(&of_kind(&got, 9)), depth_one);
    let d = expected_d(&host, &reader, &ch, &root.id, 50, 1, &[9], None, false);
    assert_eq!(
        thread_bounds(&relay, &got, &d, &ch, &root.id),
        (false, None)
    );

    let mut both = thread(&ch, &root.id, 50, None);
    both["kinds"] = json!([40002, 9, 9]);
    let got = bob.query(&relay, vec![both]).await;
    assert!(got.iter().any(|e| e.id == other_kind.id));
    let d = expected_d(
        &host,
        &reader,
        &ch,
        &root.id,
        50,
        100,
        &[9, 40002],
        None,
        false,
    );
    thread_bounds(&relay, &got, &d, &ch, &root.id);

    // Two windows in one query: one bounds each, each bound to its own request.
    let got = bob
        .query(
            &relay,
            vec![
                thread(&ch, &root.id, 2, None),
                thread(&ch, &other_root.id, 2, None),
            ],
        )
        .await;
    let bounds = of_kind(&got, 39007);
    assert_eq!(bounds.len(), 2);
    assert_eq!(bounds[0].tags[2][1], root.id);
    assert_eq!(bounds[1].tags[2][1], other_root.id);
    relay.stop().await;
}

async fn roots_are_validated(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let elsewhere = alice.create_channel(false).await;
    let private = alice.create_channel(true).await;
    let t = now() - 100;
    let root = alice.post_at(&ch, "root", t).await;
    let reply = alice.post_reply(&ch, &root, t + 1).await;
    let foreign = alice.post_at(&elsewhere, "elsewhere", t).await;
    alice.post_reply(&elsewhere, &foreign, t + 1).await;
    let reaction = alice.react(&ch, &root, t + 2).await;
    let secret = alice.post_at(&private, "secret", t).await;
    alice.post_reply(&private, &secret, t + 1).await;

    let nothing = [
        thread(&ch, &"f".repeat(64), 5, None), // no such root
        thread(&ch, &foreign.id, 5, None),     // root of another channel
        thread(&ch, &reaction.id, 5, None),    // not a conversation kind
        thread(&private, &secret.id, 5, None), // channel bob cannot read
        thread(&uuid::Uuid::new_v4().to_string(), &root.id, 5, None),
    ];
    for filter in nothing {
        for via in [Via::Http, Via::Ws] {
            let got = ask(&relay, &mut bob, via, vec![filter.clone()]).await;
            assert_eq!(got, Ok(vec![]), "{via:?} {filter}: no events, no bounds");
        }
    }
    // A retained root tombstone still anchors its thread.
    alice.delete(&ch, &root, now()).await;
    let got = bob
        .query(&relay, vec![thread(&ch, &root.id, 5, None)])
        .await;
    assert_eq!(ids(&of_kind(&got, 9)), vec![reply.id.clone()]);
    assert_eq!(of_kind(&got, 39007).len(), 1);
    relay.stop().await;
}

async fn grammar_is_strict(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let root = alice.post_at(&ch, "root", now()).await;
    let id = "a".repeat(64);
    let ok = thread(&ch, &root.id, 5, None);
    let with = |k: &str, v: Value| {
        let mut f = ok.clone();
        f[k] = v;
        f
    };
    let without = |k: &str| {
        let mut f = ok.clone();
        f.as_object_mut().expect("object").remove(k);
        f
    };
    let bad = [
        without("kinds"),
        without("#h"),
        with("#e", json!([root.id, id])),
        with("#e", json!(["nothex"])),
        with("kinds", json!([7])),
        with("kinds", json!([9, 40002, 45001, 45003, 9])),
        with("limit", json!(0)),
        with("limit", json!(201)),
        with("depth_limit", json!(0)),
        with("depth_limit", json!(101)),
        with("include_aux", json!("true")),
        with("until", json!(5)),
        with("before_id", json!(id)),
        with("top_level", json!(true)),
        with("thread_cursor", json!(5)),
        with("ids", json!([id])),
        with("authors", json!([id])),
        with("since", json!(5)),
        with("#p", json!([id])),
        with("extra", json!(1)),
    ];
    for filter in bad {
        let (status, body) = alice.http(&relay, vec![filter.clone()]).await;
        assert_eq!(status, 400, "{filter}: {body}");
        let closed = alice.req(vec![filter.clone()]).await.expect_err("CLOSED");
        assert!(closed.starts_with("invalid:"), "{filter}: {closed}");
    }
    // At most four thread windows per query.
    let five = vec![ok.clone(); 5];
    assert_eq!(alice.http(&relay, five.clone()).await.0, 400);
    assert!(alice
        .req(five)
        .await
        .expect_err("CLOSED")
        .starts_with("invalid:"));
    assert_eq!(
        alice.query(&relay, vec![ok; 4]).await.len(),
        4,
        "four bounds"
    );
    relay.stop().await;
}

async fn aux_closure_of_root_and_replies(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let root = alice.post_at(&ch, "root", t).await;
    let reply = alice.post_reply(&ch, &root, t + 1).await;
    let on_root = bob.react(&ch, &root, t + 2).await;
    let edit = alice
        .publish(alice.sign_at(
            40_003,
            vec![tag(&["h", &ch]), tag(&["e", &reply.id])],
            "e",
            t + 3,
        ))
        .await;
    let withdrawn = bob.react(&ch, &reply, t + 4).await;
    let undo = bob.delete(&ch, &withdrawn, t + 5).await;
    // The root id in a tag's third position, or in the content, is not a reference.
    let other = alice.post_at(&ch, "other", t + 6).await;
    bob.publish(bob.sign_at(
        7,
        vec![tag(&["h", &ch]), tag(&["e", &other.id, &root.id])],
        "+",
        t + 7,
    ))
    .await;
    bob.publish(bob.sign_at(
        7,
        vec![tag(&["h", &ch]), tag(&["e", &other.id])],
        &root.id,
        t + 8,
    ))
    .await;

    let mut filter = thread(&ch, &root.id, 1, None);
    filter["include_aux"] = json!(true);
    filter["until"] = json!(reply.created_at);
    filter["before_id"] = json!("0".repeat(64));
    let got = bob.query(&relay, vec![filter]).await;
    let cursor = (reply.created_at, "0".repeat(64));
    let d = expected_d(
        &relay.host(),
        &bob.pubkey(),
        &ch,
        &root.id,
        1,
        100,
        &[9],
        Some(&cursor),
        true,
    );
    thread_bounds(&relay, &got, &d, &ch, &root.id);
    let mut got_ids = ids(&got);
    got_ids.pop();
    assert_eq!(
        got_ids,
        ids(&[reply, on_root, edit, undo]),
        "replies, hop 1 (the withdrawn reaction is a tombstone), hop 2"
    );
    relay.stop().await;
}

/// NIP-40: a reply that has expired leaves the thread window (the same rule as core's
/// REQ).
async fn expired_replies_are_not_served(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now();
    let root = alice.post_at(&ch, "root", t - 20).await;
    let kept = alice.post_reply(&ch, &root, t - 10).await;
    let expires = (t + 2).to_string();
    let fleeting = alice
        .publish(alice.sign_at(
            9,
            vec![
                tag(&["h", &ch]),
                tag(&["e", &root.id, "", "reply"]),
                tag(&["expiration", &expires]),
            ],
            "fleeting",
            t - 5,
        ))
        .await;
    let window = thread(&ch, &root.id, 10, None);
    let before = ids(&alice.query(&relay, vec![window.clone()]).await);
    assert!(before.contains(&kept.id) && before.contains(&fleeting.id));

    while now() <= t + 2 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for via in [Via::Http, Via::Ws] {
        let after = ids(&ask(&relay, &mut alice, via, vec![window.clone()])
            .await
            .expect("thread window"));
        assert!(after.contains(&kept.id), "{via:?}: the live reply stays");
        assert!(
            !after.contains(&fleeting.id),
            "{via:?}: an expired reply is not served"
        );
    }
    relay.stop().await;
}
