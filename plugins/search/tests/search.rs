//! NIP-50 search over the wire, on both backends: what a reader may read and nothing
//! else, what was deleted, removed, expired or redacted never, the grammar, the bounds,
//! live matching and the backfill.

use buzz_core::both_backends;
mod common;

use buzz_core::config::{CommunitySettings, Settings};
use buzz_core::testkit::disabled::disable;
use buzz_core::testkit::{now, tag, TestBackend};
use common::*;
use serde_json::json;

both_backends!(
    private_channels_are_never_found,
    anonymous_search_of_channels_needs_auth,
    removed_events_are_never_found,
    artifacts_current_revisions_only,
    communities_are_apart,
    case_unicode_phrase_prefix,
    relevance_and_limit,
    bad_queries_are_invalid,
    live_search_matches_new_events,
    backfill_indexes_what_came_before,
    nip11_advertises_search,
    a_burst_is_indexed_whole,
);

async fn private_channels_are_never_found(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let open = alice.create_channel(false).await;
    let secret = alice.create_channel(true).await;
    let public = alice.post(&open, "the zebra launch is friday").await;
    let hidden = alice.post(&secret, "the zebra launch is secret").await;

    // Bob is no member of the private channel: only the open one is found, on every
    // surface, and COUNT says so too (ranks and counts see only what he may read).
    let q = json!({"search": "zebra launch"});
    assert_eq!(bob.search(q.clone()).await, vec![public.id.clone()]);
    assert_eq!(
        bob.search_http(&relay, q.clone()).await,
        vec![public.id.clone()]
    );
    assert_eq!(bob.count(q.clone()).await, Ok(1));
    // Naming the private channel finds nothing either.
    assert!(bob
        .search(json!({"search": "zebra", "#h": [secret]}))
        .await
        .is_empty());
    assert!(bob.search(json!({"search": "secret"})).await.is_empty());

    // Alice reads both; a member added later reads both too.
    assert_eq!(
        sorted(alice.search(q.clone()).await),
        sorted(vec![public.id.clone(), hidden.id.clone()])
    );
    assert_eq!(alice.count(q.clone()).await, Ok(2));
    alice.add_member(&secret, &bob.pubkey()).await;
    assert_eq!(bob.count(q).await, Ok(2));
    relay.stop().await;
}

/// A burst of messages in two channels, replies and reactions between them: on
/// PostgreSQL the writer stores runs of them as insert groups whose documents are one
/// statement (`grouped.rs`); every message is found, each by its own word too.
async fn a_burst_is_indexed_whole(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let channels = [
        alice.create_channel(false).await,
        alice.create_channel(false).await,
    ];
    let t = now();
    let mut burst = Vec::new();
    for i in 0..150 {
        let channel = &channels[i % 2];
        let word = format!("quokka{i}");
        let message = alice
            .keys
            .sign(9, vec![tag(&["h", channel])], &format!("wombat {word}"), t);
        if i % 10 == 0 {
            // A reply to it and a reaction right behind it, in the same burst.
            let reply = alice.keys.sign(
                9,
                vec![
                    tag(&["h", channel]),
                    tag(&["e", &message.id, "", "root"]),
                    tag(&["e", &message.id, "", "reply"]),
                ],
                &format!("wombat reply{i}"),
                t,
            );
            let reaction = alice.keys.sign(
                7,
                vec![tag(&["h", channel]), tag(&["e", &message.id])],
                "+",
                t,
            );
            burst.push(message);
            burst.push(reply);
            burst.push(reaction);
        } else {
            burst.push(message);
        }
    }
    let oks = alice.ws.burst(&burst).await;
    assert_eq!(oks.len(), burst.len());
    assert!(oks.values().all(|(accepted, _)| *accepted), "{oks:?}");
    let messages: Vec<String> = burst
        .iter()
        .filter(|e| e.kind == 9)
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(messages.len(), 165);

    let all = alice
        .search(json!({"search": "wombat", "limit": 500}))
        .await;
    assert_eq!(sorted(all), sorted(messages));
    assert_eq!(alice.count(json!({"search": "wombat"})).await, Ok(165));
    for i in [0, 1, 77, 149] {
        let found = alice.search(json!({"search": format!("quokka{i}")})).await;
        let expected = burst
            .iter()
            .find(|e| e.content == format!("wombat quokka{i}"))
            .map(|e| e.id.clone());
        assert_eq!(found, expected.into_iter().collect::<Vec<_>>(), "quokka{i}");
    }
    relay.stop().await;
}

async fn anonymous_search_of_channels_needs_auth(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let open = alice.create_channel(false).await;
    alice.post(&open, "walrus sighting").await;
    let note = alice.publish(alice.sign(1, vec![], "walrus note")).await;

    let mut anon = relay.ws().await;
    // A search of channel messages (the default kinds) asks for AUTH, like a REQ for
    // them, whether or not anything matches.
    for filter in [
        json!({"search": "walrus"}),
        json!({"search": "nothing-like-this"}),
        json!({"search": "walrus", "kinds": [9]}),
        json!({"search": "walrus", "#h": [open]}),
    ] {
        let err = anon
            .req(&sub(), vec![filter.clone()])
            .await
            .expect_err("refused");
        assert!(err.starts_with("auth-required:"), "{filter}: {err}");
        let err = anon.count(&sub(), vec![filter]).await.expect_err("refused");
        assert!(err.starts_with("auth-required:"), "{err}");
    }
    let (status, _) = relay
        .http()
        .post(
            "/query",
            json!([{"search": "walrus"}]).to_string().as_bytes(),
            None,
        )
        .await;
    assert_eq!(status, 401);
    // Kind 1 notes are community-wide: searched without AUTH.
    let found = anon
        .req(&sub(), vec![json!({"search": "walrus", "kinds": [1]})])
        .await
        .expect("kind 1 is public");
    assert_eq!(ids(&found), vec![note.id]);
    relay.stop().await;
}

async fn removed_events_are_never_found(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let deleted = bob.post(&ch, "okapi one").await;
    let removed = bob.post(&ch, "okapi two").await;
    let kept = bob.post(&ch, "okapi three").await;
    let soon = (now() + 2).to_string();
    let expiring = bob
        .publish(bob.sign(
            9,
            vec![tag(&["h", &ch]), tag(&["expiration", &soon])],
            "okapi four",
        ))
        .await;
    let q = json!({"search": "okapi"});
    assert_eq!(bob.count(q.clone()).await, Ok(4));

    // Bob deletes his own; a kind 5 by someone else deletes nothing.
    let tags = |target: &str| vec![tag(&["h", &ch]), tag(&["e", target])];
    let _ = alice.ws.publish(&alice.sign(5, tags(&kept.id), "")).await;
    bob.publish(bob.sign(5, tags(&deleted.id), "")).await;
    // The channel's creator removes one as moderator.
    alice.publish(alice.sign(9005, tags(&removed.id), "")).await;
    // An edit is found as itself, with its own words.
    let edit = bob
        .publish(bob.sign(40003, tags(&kept.id), "okapi three, corrected: tapir"))
        .await;
    assert_eq!(
        bob.search(json!({"search": "tapir"})).await,
        vec![edit.id.clone()]
    );

    tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    let found = sorted(bob.search(q.clone()).await);
    assert_eq!(found, sorted(vec![kept.id.clone(), edit.id.clone()]));
    assert!(!found.contains(&expiring.id));
    assert_eq!(bob.count(q).await, Ok(2));
    relay.stop().await;
}

/// A revision before signing (NIP-AR envelope).
fn revision(
    d: &str,
    h: &str,
    title: Option<&str>,
    op: &str,
    prev: Option<&str>,
    content: &str,
) -> (Vec<Vec<String>>, String) {
    let mut tags = vec![
        tag(&["ar", "1"]),
        tag(&["d", d]),
        tag(&["h", h]),
        tag(&["type", "buzz.task"]),
    ];
    if let Some(t) = title {
        tags.push(tag(&["title", t]));
    }
    tags.push(tag(&["op", op]));
    if let Some(p) = prev {
        tags.push(tag(&["prev", p]));
    }
    (tags, content.to_owned())
}

async fn artifacts_current_revisions_only(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut owner = User::new(&relay).await;
    let mut alice = User::new(&relay).await;
    let ch = owner.create_channel(false).await;
    let d = uuid();
    let (tags, content) = revision(
        &d,
        &ch,
        Some("Quarterly roadmap"),
        "create",
        None,
        r#"{"version":1,"status":"open"}"#,
    );
    let v1 = alice.publish(alice.sign(45010, tags, &content)).await;
    assert_eq!(
        alice.search(json!({"search": "quarterly"})).await,
        vec![v1.id.clone()]
    );

    // A newer revision replaces the old one in search.
    let (tags, content) = revision(
        &d,
        &ch,
        Some("Annual plan"),
        "update",
        Some(&v1.id),
        r#"{"version":1,"status":"open"}"#,
    );
    let v2 = alice.publish(alice.sign(45010, tags, &content)).await;
    assert!(alice
        .search(json!({"search": "quarterly"}))
        .await
        .is_empty());
    assert_eq!(
        alice.search(json!({"search": "annual plan"})).await,
        vec![v2.id.clone()]
    );

    // A deleted artifact is not found; restored, it is again.
    let (tags, _) = revision(&d, &ch, None, "delete", Some(&v2.id), "");
    let v3 = alice.publish(alice.sign(45010, tags, "")).await;
    assert!(alice.search(json!({"search": "annual"})).await.is_empty());
    let (tags, content) = revision(
        &d,
        &ch,
        Some("Annual plan restored"),
        "restore",
        Some(&v3.id),
        r#"{"version":1}"#,
    );
    let v4 = alice.publish(alice.sign(45010, tags, &content)).await;
    assert_eq!(
        alice.search(json!({"search": "annual"})).await,
        vec![v4.id.clone()]
    );

    // A redacted current revision leaves search ("including search", NIP-AR).
    let removal = vec![tag(&["h", &ch]), tag(&["e", &v4.id])];
    owner.publish(owner.sign(9005, removal, "")).await;
    assert!(alice.search(json!({"search": "annual"})).await.is_empty());
    assert_eq!(alice.count(json!({"search": "annual"})).await, Ok(0));
    relay.stop().await;
}

async fn communities_are_apart(backend: TestBackend, name: &str) {
    let second = |s: &mut Settings| {
        s.communities.push(CommunitySettings {
            host: "second.test".into(),
            name: "Second".into(),
            owners: vec![],
            open: true,
            policies: Default::default(),
        })
    };
    let Some(relay) = relay_with(backend, name, json!({}), second).await else {
        return;
    };
    let mut here = User::new(&relay).await;
    let mut there = User::at(&relay, "second.test", buzz_nostr::keys::Keys::generate()).await;
    let ch_here = here.create_channel(false).await;
    let ch_there = there.create_channel(false).await;
    let mine = here.post(&ch_here, "narwhal here").await;
    let theirs = there.post(&ch_there, "narwhal there").await;
    assert_eq!(
        here.search(json!({"search": "narwhal"})).await,
        vec![mine.id]
    );
    assert_eq!(
        there.search(json!({"search": "narwhal"})).await,
        vec![theirs.id]
    );
    assert_eq!(there.count(json!({"search": "narwhal"})).await, Ok(1));
    relay.stop().await;
}

async fn case_unicode_phrase_prefix(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let german = alice.post(&ch, "Die Brücke über den Fluß").await;
    let russian = alice.post(&ch, "Привет, МИР!").await;
    let japanese = alice.post(&ch, "東京タワーで会いましょう").await;
    let release = alice.post(&ch, "The release candidate is deployed").await;
    let reversed = alice
        .post(&ch, "candidate for release, not deployable")
        .await;
    let wide = alice.post(&ch, "ＦＵＬＬ width").await;

    let one = |id: &str| vec![id.to_owned()];
    assert_eq!(
        alice.search(json!({"search": "ÜBER brücke"})).await,
        one(&german.id)
    );
    assert_eq!(
        alice.search(json!({"search": "мир"})).await,
        one(&russian.id)
    );
    assert_eq!(
        alice.search(json!({"search": "東京"})).await,
        one(&japanese.id)
    );
    assert!(alice.search(json!({"search": "京東"})).await.is_empty());
    assert_eq!(alice.search(json!({"search": "full"})).await, one(&wide.id));
    assert_eq!(
        alice
            .search(json!({"search": "\"release candidate\""}))
            .await,
        one(&release.id)
    );
    assert_eq!(
        sorted(alice.search(json!({"search": "candidate release"})).await),
        sorted(vec![release.id.clone(), reversed.id.clone()])
    );
    assert_eq!(
        sorted(alice.search(json!({"search": "deploy*"})).await),
        sorted(vec![release.id.clone(), reversed.id.clone()])
    );
    assert_eq!(
        alice.search(json!({"search": "deploya* release"})).await,
        one(&reversed.id)
    );
    // Unsupported NIP-50 extensions are ignored.
    assert_eq!(
        alice
            .search(json!({"search": "мир include:spam language:ru"}))
            .await,
        one(&russian.id)
    );
    // The filter's other fields apply: kinds, authors, since/until, tags.
    assert!(alice
        .search(json!({"search": "мир", "authors": ["0".repeat(64)]}))
        .await
        .is_empty());
    assert!(alice
        .search(json!({"search": "мир", "kinds": [1]}))
        .await
        .is_empty());
    assert!(alice
        .search(json!({"search": "мир", "until": now() - 3_600}))
        .await
        .is_empty());
    assert_eq!(
        alice
            .search(json!({"search": "мир", "#h": [ch], "authors": [alice.pubkey()]}))
            .await,
        one(&russian.id)
    );
    relay.stop().await;
}

async fn relevance_and_limit(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let long = alice
        .post(
            &ch,
            "a long message that mentions gecko once among many other words here",
        )
        .await;
    let twice = alice.post(&ch, "gecko gecko").await;
    let short = alice.post(&ch, "gecko").await;
    let q = json!({"search": "gecko"});
    // More of the word, and a shorter message, rank higher; same on both transports.
    let ranked = alice.search(q.clone()).await;
    assert_eq!(
        ranked,
        vec![twice.id.clone(), short.id.clone(), long.id.clone()]
    );
    assert_eq!(alice.search_http(&relay, q).await, ranked);
    // `limit` takes the best ones.
    assert_eq!(
        alice.search(json!({"search": "gecko", "limit": 2})).await,
        vec![twice.id.clone(), short.id.clone()]
    );
    assert!(alice
        .search(json!({"search": "gecko", "limit": 0}))
        .await
        .is_empty());
    // Equal ranks: newest first, then id — stable between calls.
    let mut same = Vec::new();
    for _ in 0..4 {
        same.push(alice.post(&ch, &format!("iguana {}", same.len())).await);
    }
    let first = alice.search(json!({"search": "iguana"})).await;
    assert_eq!(first.len(), 4);
    assert_eq!(alice.search(json!({"search": "iguana"})).await, first);
    relay.stop().await;
}

async fn bad_queries_are_invalid(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_search_bytes": 64}), |_| {}).await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let note = alice.post(&ch, "ordinary words OR near AND not").await;
    for bad in [
        json!({"search": ""}),
        json!({"search": "   "}),
        json!({"search": "x".repeat(65)}),
        json!({"search": "\"unterminated"}),
        json!({"search": "a*"}),
        json!({"search": "()^-:*"}),
        json!({"search": 42}),
        json!({"search": "a b c d e f g h i"}),
    ] {
        let err = alice.req(vec![bad.clone()]).await.expect_err("refused");
        assert!(err.starts_with("invalid:"), "{bad}: {err}");
        let err = alice.count(bad.clone()).await.expect_err("refused");
        assert!(err.starts_with("invalid:"), "{bad}: {err}");
        let (status, body) = alice.http(&relay, vec![bad.clone()]).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // FTS5 and tsquery syntax are words like any other: answered (or refused by the
    // grammar, `invalid:`), never an SQL error.
    for hostile in [
        "NEAR(ordinary words)",
        "ordinary OR words",
        "\"ordinary\" AND NOT",
        "words:* & !ordinary | (x)",
        "'ordinary' \\ words",
        "ordinary^ words{}",
        "- ordinary -- ; DROP TABLE events",
    ] {
        match alice.req(vec![json!({"search": hostile})]).await {
            Ok(_) => {}
            Err(e) => assert!(e.starts_with("invalid:"), "{hostile}: {e}"),
        }
        let (status, body) = alice.http(&relay, vec![json!({"search": hostile})]).await;
        assert!(status == 200 || status == 400, "{hostile}: {status} {body}");
    }
    assert_eq!(
        alice.search(json!({"search": "ordinary OR near"})).await,
        vec![note.id.clone()]
    );
    // Punctuation joins words into a phrase: `NEAR(ordinary` is "near ordinary".
    assert!(alice
        .search(json!({"search": "NEAR(ordinary words)"}))
        .await
        .is_empty());
    assert_eq!(
        alice.search(json!({"search": "OR(near"})).await,
        vec![note.id.clone()]
    );
    assert_eq!(
        alice
            .search(json!({"search": "\"ordinary\" AND NOT"}))
            .await,
        vec![note.id.clone()]
    );
    relay.stop().await;
}

async fn live_search_matches_new_events(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let open = alice.create_channel(false).await;
    let secret = alice.create_channel(true).await;
    let id = sub();
    let before = bob
        .ws
        .req(&id, vec![json!({"search": "\"blue whale\""})])
        .await
        .expect("REQ");
    assert!(before.is_empty());
    alice.post(&open, "a whale, blue").await;
    alice.post(&secret, "blue whale in secret").await;
    let found = alice.post(&open, "Blue Whale spotted").await;
    let live = bob
        .ws
        .recv_where(|v| v[0] == "EVENT" && v[1] == id.as_str())
        .await
        .expect("a live match");
    assert_eq!(live[2]["id"], found.id.as_str());
    // Nothing else arrives for that subscription: not the reversed words, not the
    // private channel's message.
    let marker = alice.post(&open, "blue whale marker").await;
    let next = bob
        .ws
        .recv_where(|v| v[0] == "EVENT" && v[1] == id.as_str())
        .await
        .expect("the marker");
    assert_eq!(next[2]["id"], marker.id.as_str());
    relay.stop().await;
}

async fn backfill_indexes_what_came_before(backend: TestBackend, name: &str) {
    let off = disable(buzz_search::NAME);
    let Some(mut relay) = relay_with(backend, name, json!({"backfill_batch": 2}), off).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let mut before = Vec::new();
    for i in 0..5 {
        before.push(alice.post(&ch, &format!("capybara number {i}")).await.id);
    }
    let deleted = alice.post(&ch, "capybara deleted").await;
    let tags = vec![tag(&["h", &ch]), tag(&["e", &deleted.id])];
    alice.publish(alice.sign(5, tags, "")).await;
    // Disabled, the filter is not a search: NIP-11 does not list 50.
    assert!(!relay.nip11().await["supported_nips"]
        .as_array()
        .expect("nips")
        .contains(&json!(50)));

    if let Some(section) = relay.settings.plugins.get_mut(buzz_search::NAME) {
        section.enabled = Some(true);
    }
    relay.restart().await;
    let mut alice2 = User::new(&relay).await;
    let mut found = Vec::new();
    for _ in 0..100 {
        found = alice2.search(json!({"search": "capybara"})).await;
        if found.len() >= before.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(sorted(found), sorted(before));
    relay.stop().await;
}

async fn nip11_advertises_search(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let info = relay.nip11().await;
    assert!(info["supported_nips"]
        .as_array()
        .expect("nips")
        .contains(&json!(50)));
    assert_eq!(info["search"]["max_search_bytes"], 256);
    relay.stop().await;
}
