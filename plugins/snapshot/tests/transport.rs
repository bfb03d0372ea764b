//! NIP-AR "Stable manifest transport": start, page, bodies, complete — the happy path
//! and its exact shapes, strict requests, token binding, limits and quotas. Each on
//! SQLite (captures in the database) and PostgreSQL (captures in Redis).

use buzz_core::both_backends;
mod common;

use buzz_core::config::CommunitySettings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use common::*;
use serde_json::json;

both_backends!(
    nip11_is_the_spec_table,
    a_capture_pages_fetches_bodies_and_completes,
    an_exact_multiple_ends_without_an_empty_page,
    requests_are_strict,
    tokens_are_bound_to_their_reader,
    tokens_are_bound_to_their_community,
    over_the_row_limit_is_refused_never_cut,
    ttl_channels_refuse_only_when_they_hold_a_match,
    bodies_are_the_captured_revisions_never_newer,
    completion_needs_every_page,
    captures_expire_and_quotas_hold,
);

async fn nip11_is_the_spec_table(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let (status, doc) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        doc["artifacts"]["snapshot"],
        json!({
            "version": 1, "maxRows": 50000, "pageRows": 1000, "pageBytes": 262144,
            "bodyRows": 100, "bodyBytes": 8388608, "lifetimeSeconds": 300,
            "permanentChannelsOnly": true
        })
    );
    // The artifact plugin's own fields are still there beside it.
    assert_eq!(doc["artifacts"]["version"], 1, "{doc}");
}

async fn a_capture_pages_fetches_bodies_and_completes(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"page_rows": 10})).await else {
        return;
    };
    let mut owner = User::new(&relay).await;
    let mut reader = User::new(&relay).await;
    let open = owner.create_channel(false).await;
    let hidden = owner.create_channel(true).await;
    let mut expected = Vec::new();
    for i in 0..24 {
        let status = if i == 0 { "archived" } else { "open" };
        let v = reader
            .put(
                &Draft::create(&open, &format!("task {i}"))
                    .content(&format!(r#"{{"status":"{status}"}}"#)),
            )
            .await;
        expected.push(v.id);
    }
    // Not a task, and a task the reader cannot read: neither is captured.
    let mut note = Draft::create(&open, "a note");
    note.ty = "buzz.note".into();
    reader.put(&note).await;
    owner.put(&Draft::create(&hidden, "secret")).await;

    let first = start(&relay, &reader, tasks()).await;
    let keys: Vec<&String> = first.as_object().expect("object").keys().collect();
    assert_eq!(
        keys,
        ["entries", "expiresAt", "nextToken", "token", "version"]
    );
    assert_eq!(first["version"], 1);
    let expires = first["expiresAt"].as_i64().expect("integer seconds");
    assert!((now() + 290..=now() + 301).contains(&expires), "{expires}");
    assert_eq!(entries(&first).len(), 10);
    let token = first["token"].as_str().expect("token").to_owned();
    // Repeating a cursor returns the same entries.
    let cursor = first["nextToken"].as_str().expect("cursor").to_owned();
    let (s1, p1) = page(&relay, &reader, &token, &cursor).await;
    let (s2, p2) = page(&relay, &reader, &token, &cursor).await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(p1, p2);
    assert_eq!(p1["expiresAt"], first["expiresAt"]);

    let (again, all) = capture(&relay, &reader, tasks()).await;
    let mut got: Vec<String> = all.iter().map(|e| e.revision_id.clone()).collect();
    got.sort();
    expected.sort();
    assert_eq!(
        got, expected,
        "every current task, archived included, nothing else"
    );
    assert!(all.iter().all(|e| e.channel_id == open));
    let bodies = verified_bodies(&relay, &reader, &again, &all).await;
    assert_eq!(bodies.len(), 24);
    let done = complete(&relay, &reader, &again).await;
    assert_eq!(
        done,
        (200, json!({"version": 1, "token": again, "complete": true}))
    );
    // A completed capture stays replayable until it expires.
    assert_eq!(complete(&relay, &reader, &again).await.0, 200);
}

async fn an_exact_multiple_ends_without_an_empty_page(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"page_rows": 5})).await else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    // Nothing yet: one empty page, no cursor.
    let empty = start(&relay, &reader, tasks()).await;
    assert_eq!(empty["entries"], json!([]));
    assert_eq!(empty["nextToken"], json!(null));
    for i in 0..10 {
        reader.put(&Draft::create(&ch, &format!("t{i}"))).await;
    }
    let first = start(&relay, &reader, tasks()).await;
    let token = first["token"].as_str().expect("token");
    assert_eq!(entries(&first).len(), 5);
    let (status, last) = page(
        &relay,
        &reader,
        token,
        first["nextToken"].as_str().expect("cursor"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(entries(&last).len(), 5);
    assert_eq!(
        last["nextToken"],
        json!(null),
        "the final page of an exact multiple"
    );
}

async fn requests_are_strict(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    reader.put(&Draft::create(&ch, "t")).await;
    let bad = [
        json!({"artifact": "snapshot", "action": "start"}),
        json!({"artifact": "snapshot", "action": "start", "query": tasks(), "extra": 1}),
        json!({"artifact": "snapshot", "action": "start", "query": {"artifact": "current", "limit": 10}}),
        json!({"artifact": "snapshot", "action": "start", "query": {"artifact": "current", "offset": 10}}),
        json!({"artifact": "snapshot", "action": "start", "query": {"artifact": "history", "#d": [uuid()]}}),
        json!({"artifact": "snapshot", "action": "start", "query": tasks(), "limit": 1}),
        json!({"artifact": "snapshot", "action": "start", "query": tasks(), "#t": ["x"]}),
        json!({"artifact": "snapshot", "action": "rewind", "token": "x"}),
        json!({"artifact": "snapshot", "action": "page", "token": "x"}),
        json!({"artifact": "snapshot", "action": "complete", "token": 5}),
        json!({"artifact": "snapshot", "action": "bodies", "token": "x", "revisionIds": []}),
        json!({"artifact": "snapshot", "action": "bodies", "token": "x", "revisionIds": ["nothex"]}),
    ];
    for filter in bad {
        assert_code(
            &ask(&relay, &reader, filter.clone()).await,
            400,
            "snapshot_invalid",
        );
    }
    // One filter per request.
    let two = reader
        .http(&relay, vec![start_filter(tasks()), json!({"kinds": [1]})])
        .await;
    assert_code(&two, 400, "snapshot_invalid");
    // 101 revision ids: over bodyRows.
    let ids: Vec<String> = (0..101).map(|i| format!("{i:064x}")).collect();
    assert_code(
        &bodies(&relay, &reader, "x", &ids).await,
        413,
        "snapshot_limit",
    );
    // Unauthenticated.
    let body = json!([start_filter(tasks())]).to_string();
    let (status, _) = relay.http().post("/query", body.as_bytes(), None).await;
    assert_eq!(status, 401);
    // Over WebSocket: refused, nothing captured.
    let refused = reader.req(vec![start_filter(tasks())]).await;
    assert!(
        refused.is_err_and(|m| m.contains("POST /query")),
        "REQ answered"
    );
}

async fn tokens_are_bound_to_their_reader(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"page_rows": 1})).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let bob = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let a = alice.put(&Draft::create(&ch, "a")).await;
    alice.put(&Draft::create(&ch, "b")).await;
    let first = start(&relay, &alice, tasks()).await;
    let token = first["token"].as_str().expect("token");
    let cursor = first["nextToken"].as_str().expect("cursor");
    // Bob can read the channel too, but the token is Alice's: refused exactly like a
    // made-up token, for every action.
    let made_up = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    for t in [token, made_up] {
        assert_code(
            &page(&relay, &bob, t, cursor).await,
            400,
            "snapshot_invalid",
        );
        assert_code(
            &bodies(&relay, &bob, t, std::slice::from_ref(&a.id)).await,
            400,
            "snapshot_invalid",
        );
        assert_code(&complete(&relay, &bob, t).await, 400, "snapshot_invalid");
    }
    // A cursor of another capture does not open a page of this one.
    let other = start(&relay, &alice, tasks()).await;
    let foreign = other["nextToken"].as_str().expect("cursor");
    assert_code(
        &page(&relay, &alice, token, foreign).await,
        400,
        "snapshot_invalid",
    );
    // A revision outside the capture is not served through it.
    let later = alice.put(&Draft::create(&ch, "later")).await;
    assert_code(
        &bodies(&relay, &alice, token, &[later.id]).await,
        400,
        "snapshot_invalid",
    );
}

async fn over_the_row_limit_is_refused_never_cut(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_rows": 3, "max_inspected": 4})).await
    else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    for i in 0..3 {
        reader.put(&Draft::create(&ch, &format!("t{i}"))).await;
    }
    assert_eq!(entries(&start(&relay, &reader, tasks()).await).len(), 3);
    reader.put(&Draft::create(&ch, "t3")).await;
    let over = ask(&relay, &reader, start_filter(tasks())).await;
    assert_code(&over, 413, "snapshot_limit");
    // Candidates are counted after the type predicate: five tasks are over the
    // inspection bound even when another predicate would match one.
    reader
        .put(&Draft::create(&ch, "t4").with("assignee", "x"))
        .await;
    let narrow = json!({"artifact": "current", "#type": [TASK], "#assignee": ["x"]});
    assert_code(
        &ask(&relay, &reader, start_filter(narrow)).await,
        413,
        "snapshot_limit",
    );
}

async fn ttl_channels_refuse_only_when_they_hold_a_match(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let permanent = reader.create_channel(false).await;
    reader.put(&Draft::create(&permanent, "kept")).await;
    let chat = uuid();
    let ttl_tags = |id: &str| {
        vec![
            tag(&["h", id]),
            tag(&["name", "ephemeral"]),
            tag(&["ttl", "3600"]),
        ]
    };
    reader
        .publish(reader.keys.sign(9007, ttl_tags(&chat), "", now()))
        .await;
    reader.post(&chat, "unrelated chat").await;
    // An unrelated TTL chat does not block a task capture.
    assert_eq!(entries(&start(&relay, &reader, tasks()).await).len(), 1);
    // A matching task in a TTL channel does, before any token exists.
    reader.put(&Draft::create(&chat, "temporary")).await;
    let refused = ask(&relay, &reader, start_filter(tasks())).await;
    assert_code(&refused, 422, "snapshot_unsupported_scope");
    // A query that does not match it is fine.
    let narrow = json!({"artifact": "current", "#title": ["kept"]});
    assert_eq!(entries(&start(&relay, &reader, narrow).await).len(), 1);
}

async fn bodies_are_the_captured_revisions_never_newer(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    let v1 = reader.put(&Draft::create(&ch, "t")).await;
    let (token, all) = capture(&relay, &reader, tasks()).await;
    let v2 = reader
        .put(&Draft::after(&v1, "update").content(r#"{"status":"done"}"#))
        .await;
    let got = verified_bodies(&relay, &reader, &token, &all).await;
    assert_eq!(got[0].id, v1.id, "the captured revision, not {}", v2.id);
    // An ordinary update after the capture leaves it complete.
    assert_eq!(complete(&relay, &reader, &token).await.0, 200);
}

async fn completion_needs_every_page(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"page_rows": 1})).await else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    for i in 0..3 {
        reader.put(&Draft::create(&ch, &format!("t{i}"))).await;
    }
    let first = start(&relay, &reader, tasks()).await;
    let token = first["token"].as_str().expect("token");
    let (_, second) = page(
        &relay,
        &reader,
        token,
        first["nextToken"].as_str().expect("c1"),
    )
    .await;
    let third_cursor = second["nextToken"].as_str().expect("c2").to_owned();
    // Page 1 fetched, page 2 skipped.
    assert_code(
        &complete(&relay, &reader, token).await,
        400,
        "snapshot_invalid",
    );
    let (status, third) = page(&relay, &reader, token, &third_cursor).await;
    assert_eq!(status, 200);
    assert_eq!(third["nextToken"], json!(null));
    assert_eq!(complete(&relay, &reader, token).await.0, 200);
}

async fn captures_expire_and_quotas_hold(backend: TestBackend, name: &str) {
    let options = json!({"lifetime_seconds": 2, "max_captures": 3, "captures_per_reader": 2});
    let Some(relay) = relay_with(backend, name, options).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let bob = User::new(&relay).await;
    let carol = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    alice.put(&Draft::create(&ch, "t")).await;
    let first = start(&relay, &alice, tasks()).await;
    start(&relay, &alice, tasks()).await;
    // Two per reader per community.
    assert_code(
        &ask(&relay, &alice, start_filter(tasks())).await,
        503,
        "snapshot_unavailable",
    );
    start(&relay, &bob, tasks()).await;
    // Three shared.
    assert_code(
        &ask(&relay, &carol, start_filter(tasks())).await,
        503,
        "snapshot_unavailable",
    );
    // Expiry is fixed (reads do not extend it) and frees the slots.
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    assert_eq!(
        complete(&relay, &alice, first["token"].as_str().expect("t"))
            .await
            .0,
        200
    );
    tokio::time::sleep(std::time::Duration::from_millis(1_300)).await;
    assert_code(
        &complete(&relay, &alice, first["token"].as_str().expect("t")).await,
        409,
        "snapshot_reset",
    );
    start(&relay, &carol, tasks()).await;
}

async fn tokens_are_bound_to_their_community(backend: TestBackend, name: &str) {
    let other = CommunitySettings {
        host: "other.test".into(),
        name: "Other".into(),
        owners: Vec::new(),
        open: true,
        policies: Default::default(),
    };
    let plugins = vec![
        PluginEntry::of::<buzz_snapshot::SnapshotPlugin>(),
        PluginEntry::of::<buzz_artifacts::ArtifactsPlugin>(),
    ];
    let Some(relay) =
        TestRelay::start_with(backend, name, |s| s.communities.push(other), plugins).await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let task = alice.put(&Draft::create(&ch, "a")).await;
    let first = start(&relay, &alice, tasks()).await;
    let token = first["token"].as_str().expect("token");
    // The same reader, the same token, another community (Host): refused like a
    // made-up token; nothing about the capture is disclosed.
    let there = relay
        .http()
        .with_host(&format!("other.test:{}", relay.addr.port()));
    let ask_there = |filter: serde_json::Value| {
        let body = json!([filter]).to_string();
        let (there, keys) = (there.clone(), alice.keys.clone());
        async move { there.post_signed(&keys, "/query", body.as_bytes()).await }
    };
    let complete_there =
        ask_there(json!({"artifact": "snapshot", "action": "complete", "token": token})).await;
    assert_code(&complete_there, 400, "snapshot_invalid");
    let bodies_there = ask_there(
        json!({"artifact": "snapshot", "action": "bodies", "token": token,
        "revisionIds": [task.id]}),
    )
    .await;
    assert_code(&bodies_there, 400, "snapshot_invalid");
    // At home it still works.
    assert_eq!(complete(&relay, &alice, token).await.0, 200);
}
