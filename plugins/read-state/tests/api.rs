//! The API surface: discovery, NIP-98 on every request, the error body, cache headers,
//! admission (bans, membership, timeouts), bounds — on SQLite and PostgreSQL.

mod common;

use buzz_core::both_backends;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_read_state::ReadStatePlugin;
use buzz_read_state_client as client;
use common::*;
use serde_json::{json, Value};

async fn nip11(relay: &TestRelay) -> Value {
    let answer = client::Client::new(
        &format!("http://{}", relay.addr),
        &relay.host(),
        buzz_nostr::keys::Keys::generate(),
    )
    .get_with("/info", None)
    .await
    .expect("nip11");
    assert_eq!(answer.status, 200);
    answer.body
}

async fn discovery_only_when_enabled(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    assert_eq!(
        nip11(&relay).await["buzz_v1"],
        json!({"version":1,"base_path":"/buzz/v1","max_channels":20,"max_intents":100,
               "max_contexts":20,"max_context_messages":100,
               "eligible_kinds":[9,40002,45001,45003],
               "max_threads":50,"max_message_mentions":50})
    );
    relay.stop().await;

    // Built but disabled (the default): no field, nothing mounted, tables migrated.
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |_| {},
        vec![PluginEntry::of::<ReadStatePlugin>()],
    )
    .await
    else {
        return;
    };
    assert!(nip11(&relay).await.get("buzz_v1").is_none());
    let user = User::new(&relay).await;
    for path in [
        "/buzz/v1/me/sidebar",
        "/buzz/v1/me/read-state?targets=%5B%5D",
    ] {
        let answer = user.api.get(path).await.expect("get");
        assert_eq!(answer.status, 404);
        assert!(
            answer.body.get("error").is_none(),
            "plain 404: {}",
            answer.body
        );
    }
    let answer = user
        .api
        .post("/buzz/v1/me/read-state", br#"{"intents":[]}"#)
        .await
        .expect("post");
    assert_eq!(answer.status, 404);
    let tables = relay
        .running()
        .services
        .store
        .read(|mut conn| {
            use diesel::RunQueryDsl;
            for table in [
                "read_state_accounts",
                "read_state_frontiers",
                "read_state_mentions",
            ] {
                buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(format!(
                    "SELECT 1 FROM {table} LIMIT 1"
                ))
                .execute(c))?;
            }
            Ok(())
        })
        .await;
    assert!(tables.is_ok(), "tables exist while disabled: {tables:?}");
}

async fn nip98_on_every_request(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut user = User::new(&relay).await;
    let ch = user.create_channel("auth", "stream").await;
    let path = "/buzz/v1/me/sidebar?limit=5";

    let ok = user.api.get(path).await.expect("signed");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.header("cache-control"), Some("private, no-store"));

    let none = user.api.get_with(path, None).await.expect("unsigned");
    assert_api_error(&none, 401, "unauthorized");

    // Replayed authorization.
    let auth = user.api.authorization("GET", path, None);
    assert_eq!(
        user.api
            .get_with(path, Some(&auth))
            .await
            .expect("first")
            .status,
        200
    );
    let replay = user.api.get_with(path, Some(&auth)).await.expect("replay");
    assert_api_error(&replay, 401, "unauthorized");

    // Signed for another query: the exact URL, query included, is what counts.
    let auth = user
        .api
        .authorization("GET", "/buzz/v1/me/sidebar?limit=4", None);
    let other = user
        .api
        .get_with(path, Some(&auth))
        .await
        .expect("other url");
    assert_api_error(&other, 401, "unauthorized");

    // The encoded query as sent is the signed one.
    let encoded = "/buzz/v1/me/sidebar?channel_ids=".to_owned() + &ch;
    let auth = user
        .api
        .authorization("GET", &encoded.replace('-', "%2D"), None);
    let answer = user
        .api
        .get_with(&encoded, Some(&auth))
        .await
        .expect("encoded");
    assert_api_error(&answer, 401, "unauthorized");
    let answer = user
        .api
        .get(&encoded.replace('-', "%2D"))
        .await
        .expect("encoded signed");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["channels"][0]["channel_id"], ch.as_str());

    // POST: the payload hash must be of the exact body.
    let body = json!({"intents": [client::follow(&ch, &"b".repeat(64))]}).to_string();
    let auth = user
        .api
        .authorization("POST", "/buzz/v1/me/read-state", Some(b"{}"));
    let answer = user
        .api
        .post_with("/buzz/v1/me/read-state", body.as_bytes(), Some(&auth))
        .await
        .expect("post");
    assert_api_error(&answer, 401, "unauthorized");
    let auth = user
        .api
        .authorization("POST", "/buzz/v1/me/read-state", None);
    let answer = user
        .api
        .post_with("/buzz/v1/me/read-state", body.as_bytes(), Some(&auth))
        .await
        .expect("post without payload tag");
    assert_api_error(&answer, 401, "unauthorized");

    // Unknown host: 404; unknown path under the base: the API's 404.
    let stranger = client::Client::new(
        &format!("http://{}", relay.addr),
        "elsewhere.example",
        user.keys.clone(),
    );
    let answer = stranger.get(path).await.expect("unknown host");
    assert_api_error(&answer, 404, "unavailable");
    let answer = user
        .api
        .get("/buzz/v1/me/nothing")
        .await
        .expect("unknown path");
    assert_api_error(&answer, 404, "unavailable");
    let answer = user
        .api
        .post("/buzz/v1/me/sidebar", b"{}")
        .await
        .expect("wrong method");
    assert_api_error(&answer, 404, "unavailable");
}

async fn bans_block_timeouts_do_not(backend: TestBackend, name: &str) {
    let owner_keys = buzz_nostr::keys::Keys::generate();
    let owner_pk = owner_keys.pubkey().to_owned();
    let Some(relay) = relay_with(backend, name, json!({}), move |s| {
        s.communities[0].owners = vec![owner_pk];
    })
    .await
    else {
        return;
    };
    let mut owner = User::with_keys(&relay, owner_keys).await;
    let timed = User::new(&relay).await;
    let banned = User::new(&relay).await;
    let until = (now() + 3600).to_string();
    let tags = vec![tag(&["p", &timed.pubkey()]), tag(&["until", &until])];
    owner.publish(owner.keys.sign(9044, tags, "", now())).await;
    owner
        .publish(
            owner
                .keys
                .sign(9042, vec![tag(&["p", &banned.pubkey()])], "", now()),
        )
        .await;
    let answer = timed.api.sidebar(20, None).await.expect("timed out");
    assert_eq!(
        answer.status, 200,
        "timeouts do not stop reading: {}",
        answer.body
    );
    let answer = banned.api.sidebar(20, None).await.expect("banned");
    assert_api_error(&answer, 403, "forbidden");
    let answer = banned
        .api
        .intents(&[client::follow(
            &uuid::Uuid::new_v4().to_string(),
            &"c".repeat(64),
        )])
        .await
        .expect("banned post");
    assert_api_error(&answer, 403, "forbidden");
}

async fn closed_community_needs_membership(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({}), |s| {
        s.communities[0].open = false;
    })
    .await
    else {
        return;
    };
    let stranger = client::Client::new(
        &format!("http://{}", relay.addr),
        &relay.host(),
        buzz_nostr::keys::Keys::generate(),
    );
    let answer = stranger.sidebar(20, None).await.expect("stranger");
    assert_api_error(&answer, 403, "forbidden");
}

async fn bounds(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"max_response_bytes": 1024}), |_| {}).await
    else {
        return;
    };
    let mut user = User::new(&relay).await;
    let ch = user.create_channel("bounds", "stream").await;
    let root = user.post(&ch).await;

    // 64 KiB body: one byte over is refused, whatever it holds.
    let pad = " ".repeat(64 * 1024);
    let over = format!("{{\"intents\":[{}]}}{pad}", client::follow(&ch, &root.id));
    let answer = user
        .api
        .post("/buzz/v1/me/read-state", over.as_bytes())
        .await
        .expect("over");
    assert_api_error(&answer, 400, "invalid_request");
    assert!(answer.body.to_string().contains("65536"), "{}", answer.body);

    // 16 KiB URL.
    let long = format!("/buzz/v1/me/sidebar?cursor={}", "a".repeat(16 * 1024));
    let answer = user.api.get(&long).await.expect("long url");
    assert_api_error(&answer, 400, "invalid_request");
    assert!(answer.body.to_string().contains("16384"), "{}", answer.body);

    // The response bound (configured small here): an error, never a cut list.
    for i in 0..8 {
        user.create_channel(&format!("channel-with-a-long-name-{i}"), "stream")
            .await;
    }
    let answer = user.api.sidebar(20, None).await.expect("big");
    assert_api_error(&answer, 400, "invalid_request");
    assert!(answer.body.to_string().contains("1024"), "{}", answer.body);
}

async fn intent_deadline(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, json!({"intent_deadline_ms": 1}), |_| {}).await
    else {
        return;
    };
    let mut user = User::new(&relay).await;
    let ch = user.create_channel("deadline", "stream").await;
    let root = user.post(&ch).await;
    // The intent deadline (1 ms here): unknown and retryable, never "applied" after an
    // unknown, never a whole-request failure.
    let answer = user
        .api
        .intents(&vec![client::follow(&ch, &root.id); 100])
        .await
        .expect("deadline");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let results = answer.body["results"].as_array().cloned().expect("results");
    assert_eq!(results.len(), 100);
    let first_unknown = results
        .iter()
        .position(|r| r["status"] == "unknown")
        .expect("the deadline passed");
    assert!(results[first_unknown..]
        .iter()
        .all(|r| *r == json!({"status": "unknown", "retryable": true})));
    assert_eq!(answer.body["projection_status"], "not_requested");
}

/// Operators see sizes, never positions; Nostr queries never see read state.
async fn positions_stay_private(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut user = User::new(&relay).await;
    let ch = user.create_channel("private", "stream").await;
    user.start(&ch).await;
    let panel = relay
        .running()
        .services
        .store
        .read(|mut conn| {
            <ReadStatePlugin as buzz_core::plugin::PluginManifest>::admin_panel(
                &buzz_read_state::Config::default(),
                &mut conn,
            )
        })
        .await
        .expect("admin panel");
    assert!(panel.tables.is_empty(), "no rows shown: {panel:?}");
    let facts: Vec<&str> = panel.facts.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        facts,
        vec![
            "intent deadline (ms)",
            "max response bytes",
            "quota requests per reader",
            "quota window (s)",
            "max threads per row",
            "max mentions per message",
            "accounts",
            "frontier rows",
            "mention rows"
        ]
    );
    assert!(panel.facts.iter().all(|(_, v)| v.parse::<u64>().is_ok()));
    // Everything a Nostr query can answer for this user is events; none carries state.
    let events = user
        .ws
        .req("all", vec![json!({"#h": [ch]})])
        .await
        .expect("req");
    assert!(
        events.iter().all(|e| e.kind == 9 || e.kind >= 9000),
        "{events:?}"
    );
}

both_backends!(
    positions_stay_private,
    discovery_only_when_enabled,
    nip98_on_every_request,
    bans_block_timeouts_do_not,
    closed_community_needs_membership,
    bounds,
    intent_deadline,
);
