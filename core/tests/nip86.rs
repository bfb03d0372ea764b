//! NIP-86 relay management over HTTP: every method, its effect on the wire (a banned
//! pubkey's EVENT gets `blocked:`), the audit trail, and refusals (bad or missing NIP-98
//! → 401, not an owner → 403, malformed calls → 400) that change nothing.

use buzz_core::both_backends;
use buzz_core::store::moderation;
use buzz_core::testkit::{authed, now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::{json, Value};

both_backends!(
    bans_and_unbans_take_effect_on_the_wire,
    allow_timeout_and_event_bans,
    refusals_change_nothing,
);

async fn start(backend: TestBackend, name: &str, owner: &Keys) -> Option<TestRelay> {
    let owner = owner.pubkey().to_owned();
    TestRelay::start_with(
        backend,
        name,
        move |s| s.communities[0].owners = vec![owner],
        Vec::new(),
    )
    .await
}

/// Call `method` as `keys`; returns status and body.
async fn rpc(relay: &TestRelay, keys: &Keys, method: &str, params: Value) -> (u16, Value) {
    relay
        .http()
        .nip86(Some(keys), &json!({"method": method, "params": params}))
        .await
}

/// Call and expect success; returns `result`.
async fn ok(relay: &TestRelay, keys: &Keys, method: &str, params: Value) -> Value {
    let (status, body) = rpc(relay, keys, method, params).await;
    assert_eq!(status, 200, "{method}: {body}");
    assert_eq!(body["error"], Value::Null, "{method}: {body}");
    body["result"].clone()
}

async fn new_channel(ws: &mut WsClient, keys: &Keys) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let create = keys.sign(9007, vec![tag(&["h", &id]), tag(&["name", "x"])], "", now());
    assert_eq!(ws.publish(&create).await, (true, String::new()));
    id
}

async fn bans_and_unbans_take_effect_on_the_wire(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = start(backend, name, &owner).await else {
        return;
    };
    let methods = ok(&relay, &owner, "supportedmethods", json!([])).await;
    for m in [
        "banpubkey",
        "listbannedpubkeys",
        "allowpubkey",
        "listallowedpubkeys",
        "banevent",
        "listbannedevents",
    ] {
        assert!(
            methods.as_array().is_some_and(|l| l.contains(&json!(m))),
            "{m} in {methods}"
        );
    }

    let mallory = Keys::generate();
    let mut ws = authed(&relay, &mallory).await;
    let channel = new_channel(&mut ws, &mallory).await;
    let before = mallory.sign(9, vec![tag(&["h", &channel])], "before", now());
    assert_eq!(ws.publish(&before).await, (true, String::new()));

    assert_eq!(
        ok(
            &relay,
            &owner,
            "banpubkey",
            json!([mallory.pubkey(), "spam"])
        )
        .await,
        json!(true)
    );
    // The ban reached the open connection at once: it is closed (core/tests/bans.rs),
    // and what mallory signs is refused wherever it is sent.
    let (code, _) = ws.close_frame().await.expect("closed by the ban");
    assert_eq!(code, 1008);
    let during = mallory.sign(1, vec![], "during", now());
    let mut ws = relay.ws().await;
    let (accepted, message) = ws.publish(&during).await;
    assert!(!accepted && message.starts_with("blocked:"), "{message}");
    assert_eq!(relay.stored_rows(&during.id).await, 0);
    assert_eq!(
        ok(&relay, &owner, "listbannedpubkeys", json!([])).await,
        json!([{"pubkey": mallory.pubkey(), "reason": "spam"}])
    );

    // Audit: the ban is a stored relay-signed 9042 naming the owner, and the sanction
    // row records the owner as its author.
    let mut reader = authed(&relay, &owner).await;
    let audit = reader
        .req("audit", vec![json!({"kinds": [9042]})])
        .await
        .expect("audit readable");
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].pubkey, relay.running().pubkey());
    assert_eq!(audit[0].tag_value("actor"), Some(owner.pubkey()));
    assert_eq!(audit[0].tag_value("p"), Some(mallory.pubkey()));
    let community = relay.running().services.communities[0].id;
    let rows = relay
        .running()
        .services
        .store
        .read(move |mut conn| moderation::sanctions(&mut conn, community, None))
        .await
        .expect("sanctions");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].by, owner.pubkey());

    // Unban, ban and unban again within one second: each call takes effect.
    ok(&relay, &owner, "unbanpubkey", json!([mallory.pubkey()])).await;
    ok(&relay, &owner, "banpubkey", json!([mallory.pubkey()])).await;
    assert_eq!(
        ok(&relay, &owner, "listbannedpubkeys", json!([])).await,
        json!([{"pubkey": mallory.pubkey(), "reason": ""}])
    );
    ok(&relay, &owner, "unbanpubkey", json!([mallory.pubkey()])).await;
    assert_eq!(
        ok(&relay, &owner, "listbannedpubkeys", json!([])).await,
        json!([])
    );
    // Lifted: mallory authenticates again and writes.
    let mut ws = authed(&relay, &mallory).await;
    let after = mallory.sign(9, vec![tag(&["h", &channel])], "after", now());
    assert_eq!(ws.publish(&after).await, (true, String::new()));
    relay.stop().await;
}

async fn allow_timeout_and_event_bans(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = start(backend, name, &owner).await else {
        return;
    };
    let bob = Keys::generate();
    ok(
        &relay,
        &owner,
        "allowpubkey",
        json!([bob.pubkey(), "new hire"]),
    )
    .await;
    assert_eq!(
        ok(&relay, &owner, "listallowedpubkeys", json!([])).await,
        json!([{"pubkey": bob.pubkey(), "reason": ""}])
    );

    let mut ws = authed(&relay, &bob).await;
    let channel = new_channel(&mut ws, &bob).await;
    let until = now() + 3_600;
    ok(
        &relay,
        &owner,
        "timeoutpubkey",
        json!([bob.pubkey(), until, "cool off"]),
    )
    .await;
    assert_eq!(
        ok(&relay, &owner, "listtimedoutpubkeys", json!([])).await,
        json!([{"pubkey": bob.pubkey(), "reason": "cool off", "until": until}])
    );
    let muted = bob.sign(9, vec![tag(&["h", &channel])], "muted", now());
    let (accepted, message) = ws.publish(&muted).await;
    assert!(!accepted && message.starts_with("restricted:"), "{message}");
    // A timeout in the past lifts it.
    ok(&relay, &owner, "timeoutpubkey", json!([bob.pubkey(), 0])).await;
    assert_eq!(
        ok(&relay, &owner, "listtimedoutpubkeys", json!([])).await,
        json!([])
    );
    let spam = bob.sign(9, vec![tag(&["h", &channel])], "spam", now());
    assert_eq!(ws.publish(&spam).await, (true, String::new()));

    ok(&relay, &owner, "banevent", json!([spam.id, "off topic"])).await;
    assert_eq!(
        ok(&relay, &owner, "listbannedevents", json!([])).await,
        json!([{"id": spam.id, "reason": "off topic"}])
    );
    let left = ws
        .req("c", vec![json!({"#h": [channel], "kinds": [9]})])
        .await
        .expect("channel readable");
    assert!(
        left.iter().all(|e| e.id != spam.id),
        "the banned event is gone"
    );
    // A banned event cannot come back.
    let (accepted, message) = ws.publish(&spam).await;
    assert!(!accepted && message.starts_with("blocked:"), "{message}");

    // Unknown and non-channel events are refused, naming why.
    let (status, body) = rpc(&relay, &owner, "banevent", json!(["f".repeat(64)])).await;
    assert_eq!(status, 404, "{body}");
    let note = bob.sign(1, vec![], "a note", now());
    assert_eq!(ws.publish(&note).await, (true, String::new()));
    let (status, body) = rpc(&relay, &owner, "banevent", json!([note.id])).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid:")),
        "{body}"
    );
    relay.stop().await;
}

async fn refusals_change_nothing(backend: TestBackend, name: &str) {
    let owner = Keys::generate();
    let Some(relay) = start(backend, name, &owner).await else {
        return;
    };
    let victim = Keys::generate();
    let ban = json!({"method": "banpubkey", "params": [victim.pubkey()]});
    let body = ban.to_string().into_bytes();
    let http = relay.http();

    // No Authorization: 401.
    let (status, answer) = http.nip86(None, &ban).await;
    assert_eq!(status, 401, "{answer}");
    assert!(answer["error"]
        .as_str()
        .is_some_and(|e| e.starts_with("auth-required:")));
    // NIP-98 for another URL, for another body, and replayed: 401.
    let wrong_url = authorization_header(
        &owner,
        "POST",
        &http.public_url("/query"),
        Some(&body),
        now(),
        None,
    );
    let typed = |auth: &str| {
        let http = http.clone();
        let body = body.clone();
        let auth = auth.to_owned();
        async move {
            http.post_typed("/", "application/nostr+json+rpc", &body, Some(&auth))
                .await
        }
    };
    assert_eq!(typed(&wrong_url).await.0, 401);
    let wrong_body = authorization_header(
        &owner,
        "POST",
        &http.public_url("/"),
        Some(b"{}"),
        now(),
        None,
    );
    assert_eq!(typed(&wrong_body).await.0, 401);
    let stale = authorization_header(
        &owner,
        "POST",
        &http.public_url("/"),
        Some(&body),
        now() - 3_600,
        None,
    );
    assert_eq!(typed(&stale).await.0, 401);
    let good = authorization_header(
        &owner,
        "POST",
        &http.public_url("/"),
        Some(&b"{\"method\":\"supportedmethods\"}"[..]),
        now(),
        None,
    );
    let once = http
        .post_typed(
            "/",
            "application/nostr+json+rpc",
            b"{\"method\":\"supportedmethods\"}",
            Some(&good),
        )
        .await;
    assert_eq!(once.0, 200, "{}", once.1);
    let replay = http
        .post_typed(
            "/",
            "application/nostr+json+rpc",
            b"{\"method\":\"supportedmethods\"}",
            Some(&good),
        )
        .await;
    assert_eq!(replay.0, 401, "a replayed authorization is refused");

    // A valid signature from someone who is not an owner: 403.
    let stranger = Keys::generate();
    let (status, answer) = rpc(&relay, &stranger, "banpubkey", json!([victim.pubkey()])).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer["error"]
        .as_str()
        .is_some_and(|e| e.starts_with("restricted:")));

    // Wrong content type, malformed calls: 400.
    let auth = authorization_header(
        &owner,
        "POST",
        &http.public_url("/"),
        Some(&body),
        now(),
        None,
    );
    assert_eq!(
        http.post_typed("/", "application/json", &body, Some(&auth))
            .await
            .0,
        400
    );
    for (method, params) in [
        ("banpubkey", json!(["not-a-key"])),
        ("banpubkey", json!([])),
        ("changerelayname", json!(["x"])),
        ("banpubkey", json!([victim.pubkey(), "r".repeat(5_000)])),
    ] {
        let (status, answer) = rpc(&relay, &owner, method, params).await;
        assert_eq!(status, 400, "{method}: {answer}");
        assert!(answer["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("invalid:")));
    }
    // An unknown community: 404 before anything is read.
    let (status, _) = http
        .with_host("elsewhere.example")
        .nip86(Some(&owner), &ban)
        .await;
    assert_eq!(status, 404);

    // Nothing was banned by any of it.
    assert_eq!(
        ok(&relay, &owner, "listbannedpubkeys", json!([])).await,
        json!([])
    );
    let mut ws = authed(&relay, &victim).await;
    let note = victim.sign(1, vec![], "still here", now());
    assert_eq!(ws.publish(&note).await, (true, String::new()));
    relay.stop().await;
}
