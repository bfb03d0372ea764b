//! "Event format": every envelope rule refuses with `invalid: <which rule>` and stores
//! nothing; relay-authored 45011 and kind-5 deletions of revisions are refused.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend};
use common::*;
use serde_json::json;

both_backends!(
    every_envelope_rule_is_enforced,
    relay_kinds_and_kind5_deletions_are_refused
);

type Tags = Vec<Vec<String>>;

fn set(tags: &mut Tags, name: &str, value: &str) {
    for t in tags.iter_mut() {
        if t[0] == name {
            t[1] = value.into();
        }
    }
}

fn drop_tag(tags: &mut Tags, name: &str) {
    tags.retain(|t| t[0] != name);
}

async fn every_envelope_rule_is_enforced(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let created = alice.put(&Draft::create(&ch, "base")).await;
    let create = Draft::create(&ch, "new task").tags();
    let update = Draft::after(&created, "update").tags();
    let delete = Draft::after(&created, "delete").tags();

    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, Tags, Box<dyn Fn(&mut Tags)>, &str, &str)> = vec![
        (
            "no ar",
            create.clone(),
            Box::new(|t| drop_tag(t, "ar")),
            "",
            "missing ar tag",
        ),
        (
            "ar 2",
            create.clone(),
            Box::new(|t| set(t, "ar", "2")),
            "",
            "ar must be 1",
        ),
        (
            "no d",
            create.clone(),
            Box::new(|t| drop_tag(t, "d")),
            "",
            "missing d tag",
        ),
        (
            "uppercase d",
            create.clone(),
            Box::new(|t| set(t, "d", "04737C81-E5E8-4412-BB47-F446813CFEBA")),
            "",
            "d must be a lowercase",
        ),
        (
            "nil d",
            create.clone(),
            Box::new(|t| set(t, "d", "00000000-0000-0000-0000-000000000000")),
            "",
            "d must be",
        ),
        (
            "unhyphenated d",
            create.clone(),
            Box::new(|t| set(t, "d", "04737c81e5e84412bb47f446813cfeba")),
            "",
            "d must be",
        ),
        (
            "bad type",
            create.clone(),
            Box::new(|t| set(t, "type", "Buzz.Task")),
            "",
            "type must be",
        ),
        (
            "empty type part",
            create.clone(),
            Box::new(|t| set(t, "type", "buzz..task")),
            "",
            "type must be",
        ),
        (
            "long type",
            create.clone(),
            Box::new(|t| set(t, "type", &format!("a{}", ".b".repeat(64)))),
            "",
            "type is longer than 128",
        ),
        (
            "blank title",
            create.clone(),
            Box::new(|t| set(t, "title", " \t ")),
            "",
            "title must not be blank",
        ),
        (
            "long title",
            create.clone(),
            Box::new(|t| set(t, "title", &"é".repeat(257))),
            "",
            "title is longer than 512",
        ),
        (
            "no title",
            create.clone(),
            Box::new(|t| drop_tag(t, "title")),
            "",
            "missing title tag",
        ),
        (
            "bad op",
            create.clone(),
            Box::new(|t| set(t, "op", "edit")),
            "",
            "op must be one of",
        ),
        (
            "bad root",
            create.clone(),
            Box::new(|t| t.push(tag(&["root", &"A".repeat(64)]))),
            "",
            "root must be 64 lowercase hex",
        ),
        (
            "prev on create",
            create.clone(),
            Box::new(|t| t.push(tag(&["prev", &"a".repeat(64)]))),
            "",
            "a create carries no prev",
        ),
        (
            "update without prev",
            update.clone(),
            Box::new(|t| drop_tag(t, "prev")),
            "{}",
            "missing prev tag",
        ),
        (
            "short prev",
            update.clone(),
            Box::new(|t| set(t, "prev", &"a".repeat(63))),
            "{}",
            "prev must be 64",
        ),
        (
            "three-element d",
            create.clone(),
            Box::new(|t| {
                for x in t.iter_mut() {
                    if x[0] == "d" {
                        x.push("extra".into());
                    }
                }
            }),
            "",
            "d tag must have exactly two string elements",
        ),
        (
            "one-element op",
            create.clone(),
            Box::new(|t| {
                for x in t.iter_mut() {
                    if x[0] == "op" {
                        x.truncate(1);
                    }
                }
            }),
            "",
            "op tag must have exactly two",
        ),
        (
            "title twice",
            create.clone(),
            Box::new(|t| t.push(tag(&["title", "again"]))),
            "",
            "title tag occurs more than once",
        ),
        (
            "257 tags",
            create.clone(),
            Box::new(|t| {
                while t.len() < 257 {
                    let n = t.len().to_string();
                    t.push(tag(&["x", &n]));
                }
            }),
            "",
            "at most 256 tags",
        ),
        (
            "long tag name",
            create.clone(),
            Box::new(|t| t.push(tag(&[&"n".repeat(65), "v"]))),
            "",
            "maxTagNameBytes",
        ),
        (
            "long tag value",
            create.clone(),
            Box::new(|t| t.push(tag(&["assignee", &"v".repeat(1025)]))),
            "",
            "maxTagValueBytes",
        ),
        (
            "too many tag bytes",
            create.clone(),
            Box::new(|t| {
                for i in 0..70 {
                    t.push(tag(&["blob", &format!("{i:04}{}", "x".repeat(996))]));
                }
            }),
            "",
            "maxTagBytes",
        ),
        (
            "delete with title",
            delete.clone(),
            Box::new(|t| t.push(tag(&["title", "still here"]))),
            "",
            "a delete carries no title",
        ),
        (
            "delete with content",
            delete.clone(),
            Box::new(|_| {}),
            "{}",
            "a delete has empty content",
        ),
        (
            "delete with a client tag",
            delete.clone(),
            Box::new(|t| t.push(tag(&["assignee", "x"]))),
            "",
            "only envelope tags",
        ),
    ];
    let http = User::new(&relay).await;
    for (i, (what, base, mutate, content, expected)) in cases.into_iter().enumerate() {
        let mut tags = base;
        mutate(&mut tags);
        // An update's and a delete's content defaults: "{}" marks a non-empty payload.
        let body = match content {
            "{}" => r#"{"version":1}"#,
            _ if expected.contains("delete") || what.starts_with("delete") => "",
            _ => r#"{"version":1}"#,
        };
        let event = alice.keys.sign(45_010, tags, body, now());
        let (ok, message) = if i % 2 == 0 {
            alice.send(&event).await
        } else {
            // Half of them over POST /events (same pipeline): 400 and the same text.
            let (status, answer) = alice.post_event(&relay, &event).await;
            assert_eq!(status, 400, "{what}: {answer}");
            (
                answer["accepted"].as_bool().unwrap_or(true),
                answer["message"].as_str().unwrap_or("").to_owned(),
            )
        };
        assert!(!ok, "{what}: accepted");
        assert!(
            message.starts_with("invalid:") && message.contains(expected),
            "{what}: {message}"
        );
        assert_eq!(relay.stored_rows(&event.id).await, 0, "{what}: stored");
    }
    drop(http);
    // The base artifact is untouched: still exactly its create.
    assert_eq!(
        ids(&alice
            .current(&relay, json!({"#d": [created.tag_value("d")]}))
            .await),
        vec![created.id.clone()]
    );
    relay.stop().await;
}

async fn relay_kinds_and_kind5_deletions_are_refused(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let created = alice.put(&Draft::create(&ch, "keep me")).await;
    let d = created.tag_value("d").unwrap_or_default().to_owned();

    // A client-signed removal marker.
    let forged = alice.keys.sign(
        45_011,
        vec![
            tag(&["ar", "1"]),
            tag(&["d", &d]),
            tag(&["h", &ch]),
            tag(&["reason", "moved"]),
            tag(&["prev", &created.id]),
        ],
        "",
        now(),
    );
    let (ok, message) = alice.send(&forged).await;
    assert!(!ok && message.starts_with("invalid:"), "{message}");
    assert!(message.contains("authored by the relay"), "{message}");
    assert_eq!(relay.stored_rows(&forged.id).await, 0);

    // Kind 5 naming a revision: refused with a reason; the revision stays.
    let deletion = alice.keys.sign(
        5,
        vec![tag(&["h", &ch]), tag(&["e", &created.id])],
        "",
        now(),
    );
    let (ok, message) = alice.send(&deletion).await;
    assert!(!ok, "kind 5 accepted");
    assert!(
        message.starts_with("invalid:") && message.contains("kind 5 cannot delete artifact"),
        "{message}"
    );
    assert_eq!(relay.stored_rows(&deletion.id).await, 0);
    assert_eq!(
        ids(&alice.current(&relay, json!({"#d": [d]})).await),
        vec![created.id.clone()]
    );
    assert_eq!(
        ids(&alice
            .req(vec![json!({"ids": [created.id]})])
            .await
            .expect("REQ")),
        vec![created.id.clone()]
    );

    // Kind 5 for an ordinary message still works.
    let msg = alice.post(&ch, "hello").await;
    let deletion = alice
        .keys
        .sign(5, vec![tag(&["h", &ch]), tag(&["e", &msg.id])], "", now());
    alice.publish(deletion).await;
    relay.stop().await;
}
