//! Hostile and malformed input over the WebSocket (and `POST /events` where the brief
//! is about one pipeline): every refusal carries the exact NIP-01 prefix and leaves no
//! row behind.

use buzz_core::both_backends;

use buzz_core::testkit::{authed, create_channel, now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

both_backends!(
    bad_id_and_bad_signature_are_invalid,
    created_at_outside_the_window_is_invalid,
    content_and_tag_limits_are_enforced,
    malformed_events_are_invalid_and_echo_the_id,
    oversized_frame_gets_notice_and_close,
    nip42_auth_rules,
    channel_writes_need_the_authors_auth,
    channel_reads_need_auth,
    relay_authored_kinds_are_refused_on_every_transport,
    auth_kind_is_refused_as_event,
    ephemeral_events_are_live_only,
);

// ---------------------------------------------------------------------------
// helpers

/// Assert an `OK false` with the NIP-01 `prefix`.
fn assert_refused(answer: (bool, String), prefix: &str, what: &str) {
    let (accepted, message) = answer;
    assert!(
        !accepted,
        "{what}: must be refused, got OK true {message:?}"
    );
    assert!(
        message.starts_with(prefix),
        "{what}: expected {prefix:?}, got {message:?}"
    );
}

/// Publish `event` and assert it is refused with `prefix` and nothing was stored.
async fn assert_publish_refused(relay: &TestRelay, ws: &mut WsClient, event: &Event, prefix: &str) {
    assert_refused(ws.publish(event).await, prefix, &event.content);
    assert_eq!(
        relay.stored_rows(&event.id).await,
        0,
        "{}: stored",
        event.content
    );
}

/// Next `NOTICE` text.
async fn notice(ws: &mut WsClient) -> String {
    let v = ws
        .recv_where(|v| v[0] == "NOTICE")
        .await
        .expect("NOTICE arrives");
    v[1].as_str().expect("NOTICE text").to_owned()
}

/// The event of the next live `EVENT` message.
async fn next_live(ws: &mut WsClient) -> Value {
    let v = ws
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("live EVENT arrives");
    v[2].clone()
}

/// The connection still answers a REQ (it was not dropped over a bad message).
async fn assert_alive(ws: &mut WsClient) {
    // Kind 1: readable before AUTH (a filter that could match channel data is not).
    ws.req("alive", vec![json!({"kinds": [1], "limit": 0})])
        .await
        .expect("connection still serves REQ");
}

/// A fresh channel id.
fn channel() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A kind-22242 event built by hand (NIP-42), for right and wrong variants.
fn auth_event(keys: &Keys, kind: u32, relay_url: &str, challenge: &str, at: i64) -> Event {
    keys.sign(
        kind,
        vec![tag(&["relay", relay_url]), tag(&["challenge", challenge])],
        "",
        at,
    )
}

/// A WebSocket client that has read the relay's challenge.
async fn ws_with_challenge(relay: &TestRelay) -> (WsClient, String) {
    let mut ws = relay.ws().await;
    assert_alive(&mut ws).await; // the AUTH frame arrives first and is recorded
    let challenge = ws.challenge.clone().expect("relay sent an AUTH challenge");
    (ws, challenge)
}

// ---------------------------------------------------------------------------
// EVENT validation

async fn bad_id_and_bad_signature_are_invalid(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;

    let mut tampered = keys.sign(1, vec![], "signed text", now());
    tampered.content = "changed after signing".into();
    assert_publish_refused(&relay, &mut ws, &tampered, "invalid:").await;

    let mut stolen_sig = keys.sign(1, vec![], "sig from another event", now());
    stolen_sig.sig = keys.sign(1, vec![], "another event", now()).sig;
    assert_publish_refused(&relay, &mut ws, &stolen_sig, "invalid:").await;

    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

async fn created_at_outside_the_window_is_invalid(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let past = keys.sign(1, vec![], "16 minutes ago", now() - 16 * 60);
    let future = keys.sign(1, vec![], "16 minutes ahead", now() + 16 * 60);
    assert_publish_refused(&relay, &mut ws, &past, "invalid:").await;
    assert_publish_refused(&relay, &mut ws, &future, "invalid:").await;
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

async fn content_and_tag_limits_are_enforced(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;

    let too_long = keys.sign(1, vec![], &"x".repeat(262_145), now());
    assert!(
        too_long.to_json().len() < 524_288,
        "frame stays under the limit"
    );
    assert_publish_refused(&relay, &mut ws, &too_long, "invalid:").await;

    let tags: Vec<Vec<String>> = (0..2_001).map(|i| tag(&["t", &i.to_string()])).collect();
    let too_many_tags = keys.sign(1, tags, "2001 tags", now());
    assert_publish_refused(&relay, &mut ws, &too_many_tags, "invalid:").await;
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);

    // Exactly at the limits is fine.
    let at_limit = keys.sign(1, vec![], &"x".repeat(262_144), now());
    assert_eq!(ws.publish(&at_limit).await, (true, String::new()));
    let tags: Vec<Vec<String>> = (0..2_000).map(|i| tag(&["t", &i.to_string()])).collect();
    let max_tags = keys.sign(1, tags, "2000 tags", now());
    assert_eq!(ws.publish(&max_tags).await, (true, String::new()));
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 2);

    // One tag of 100,000 values is refused by its bound, deterministically (`invalid:`,
    // never a retryable `error:` from a policy script that ran out of time on it).
    let mut huge = vec!["t".to_owned()];
    huge.extend((0..99_999).map(|_| String::new()));
    let one_huge_tag = keys.sign(1, vec![huge], "one huge tag", now());
    let (accepted, message) = ws.publish(&one_huge_tag).await;
    assert!(!accepted);
    assert!(
        message.starts_with("invalid:") && message.contains("max_tag_values"),
        "{message}"
    );
    // 2,000 p tags of three values (6,000 with the names) are within it, and the
    // default policies pass them every time.
    for round in 0..5 {
        let tags: Vec<Vec<String>> = (0..2_000)
            .map(|i| tag(&["p", &format!("{i:064x}"), "wss://relay.example"]))
            .collect();
        let mentions = keys.sign(1, tags, &format!("2000 p tags {round}"), now());
        assert_eq!(
            ws.publish(&mentions).await,
            (true, String::new()),
            "round {round}"
        );
    }
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 7);
    relay.stop().await;
}

async fn malformed_events_are_invalid_and_echo_the_id(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let event = keys.sign(1, vec![], "malformed", now());
    let good = serde_json::to_value(&event).expect("event as JSON");
    let with = |key: &str, value: Option<Value>| {
        let mut v = good.clone();
        let obj = v.as_object_mut().expect("object");
        match value {
            Some(value) => obj.insert(key.to_owned(), value),
            None => obj.remove(key),
        };
        v
    };
    let cases = [
        ("missing sig", with("sig", None)),
        ("missing tags", with("tags", None)),
        ("kind as string", with("kind", Some(json!("1")))),
        (
            "created_at as string",
            with("created_at", Some(json!("now"))),
        ),
        ("tags not an array", with("tags", Some(json!("t")))),
        ("content as number", with("content", Some(json!(5)))),
        ("negative kind", with("kind", Some(json!(-1)))),
    ];
    for (what, value) in cases {
        ws.send(&json!(["EVENT", value])).await.expect("send");
        assert_refused(ws.wait_ok(&event.id).await, "invalid:", what);
    }
    // Without an id, the OK names the empty id.
    ws.send(&json!(["EVENT", with("id", None)]))
        .await
        .expect("send");
    assert_refused(ws.wait_ok("").await, "invalid:", "missing id");
    // Not an object at all.
    ws.send(&json!(["EVENT", "not an event"]))
        .await
        .expect("send");
    assert_refused(ws.wait_ok("").await, "invalid:", "event is a string");

    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    assert_alive(&mut ws).await;
    relay.stop().await;
}

async fn oversized_frame_gets_notice_and_close(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let huge = keys.sign(1, vec![], &"x".repeat(524_288), now());
    let frame = json!(["EVENT", huge]).to_string();
    assert!(frame.len() > 524_288);
    ws.send_raw(&frame).await.expect("send oversized frame");
    let text = notice(&mut ws).await;
    assert!(text.starts_with("invalid:"), "{text}");
    assert!(
        ws.is_closed().await,
        "relay closes after an oversized frame"
    );
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);

    // Others are unaffected.
    let mut other = relay.ws().await;
    assert_alive(&mut other).await;
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Message framing (no storage involved)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_get_invalid_notice() {
    let relay = TestRelay::start(TestBackend::Sqlite, "malformed_messages_get_invalid_notice")
        .await
        .expect("sqlite relay");
    let mut ws = relay.ws().await;
    let cases = [
        "not json",
        "[\"REQ\", \"s\"",
        "{\"type\": \"REQ\"}",
        "\"EVENT\"",
        "42",
        "[]",
        "[1, 2]",
        // COUNT is NIP-45 now; one without a query id is still malformed.
        "[\"COUNT\"]",
        "[\"HELLO\"]",
        "[\"EVENT\"]",
        "[\"CLOSE\"]",
    ];
    for raw in cases {
        ws.send_raw(raw).await.expect("send");
        let text = notice(&mut ws).await;
        assert!(text.starts_with("invalid:"), "{raw}: {text}");
    }
    assert_alive(&mut ws).await;
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_filters_are_closed_invalid() {
    let relay = TestRelay::start(TestBackend::Sqlite, "bad_filters_are_closed_invalid")
        .await
        .expect("sqlite relay");
    let mut ws = relay.ws().await;
    let cases = [
        json!({"kinds": "1"}),
        json!({"kinds": ["1"]}),
        json!({"since": -1}),
        json!({"until": "now"}),
        json!({"ids": ["not hex"]}),
        json!({"ids": ["A".repeat(64)]}),
        json!({"authors": "abc"}),
        json!({"limit": 1.5}),
        json!({"limit": -1}),
        json!({"#e": "abc"}),
        json!({"#t": [1]}),
        json!(5),
        json!([]),
        json!("filter"),
    ];
    for (i, filter) in cases.into_iter().enumerate() {
        let sub = format!("bad{i}");
        let err = ws
            .req(&sub, vec![filter.clone()])
            .await
            .expect_err("bad filter is CLOSED");
        assert!(err.starts_with("invalid:"), "{filter}: {err}");
    }
    // A good filter after a bad one in the same REQ still closes the whole REQ.
    let err = ws
        .req("mixed", vec![json!({"kinds": [1]}), json!({"kinds": "1"})])
        .await
        .expect_err("CLOSED");
    assert!(err.starts_with("invalid:"), "{err}");
    assert_alive(&mut ws).await;
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_subscription_ids_get_notice() {
    let relay = TestRelay::start(TestBackend::Sqlite, "bad_subscription_ids_get_notice")
        .await
        .expect("sqlite relay");
    let mut ws = relay.ws().await;
    for sub in [json!(""), json!("x".repeat(65)), json!(7), json!(null)] {
        ws.send(&json!(["REQ", sub, {"kinds": [1]}]))
            .await
            .expect("send");
        let text = notice(&mut ws).await;
        assert!(text.starts_with("invalid:"), "{sub}: {text}");
    }
    // 64 characters is the longest accepted id.
    let longest = "y".repeat(64);
    ws.req(&longest, vec![json!({"kinds": [1]})])
        .await
        .expect("64-character subscription id is accepted");
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// NIP-42

async fn nip42_auth_rules(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let (mut ws, challenge) = ws_with_challenge(&relay).await;
    let url = format!("ws://{}/", relay.host());
    let other_host = format!("ws://other.test:{}/", relay.addr.port());
    let wrong = [
        (
            "wrong challenge",
            auth_event(&keys, 22_242, &url, "not-the-challenge", now()),
        ),
        (
            "other host",
            auth_event(&keys, 22_242, &other_host, &challenge, now()),
        ),
        (
            "stale",
            auth_event(&keys, 22_242, &url, &challenge, now() - 61),
        ),
        (
            "future",
            // Well past the ±60 s window: the clock moves on while earlier cases run.
            auth_event(&keys, 22_242, &url, &challenge, now() + 70),
        ),
        (
            "wrong kind",
            auth_event(&keys, 22_241, &url, &challenge, now()),
        ),
        ("kind 1", auth_event(&keys, 1, &url, &challenge, now())),
    ];
    for (what, event) in &wrong {
        ws.send(&json!(["AUTH", event])).await.expect("send AUTH");
        assert_refused(ws.wait_ok(&event.id).await, "invalid:", what);
    }
    let mut forged = auth_event(&keys, 22_242, &url, &challenge, now());
    forged.sig = auth_event(&keys, 22_242, &url, "x", now()).sig;
    ws.send(&json!(["AUTH", forged])).await.expect("send AUTH");
    assert_refused(ws.wait_ok(&forged.id).await, "invalid:", "bad signature");

    // None of them authenticated the connection.
    let err = ws
        .req("h", vec![json!({"#h": [channel()]})])
        .await
        .expect_err("still unauthenticated");
    assert!(err.starts_with("auth-required:"), "{err}");

    // The right one does; scheme and host compare case-insensitively.
    let right = auth_event(
        &keys,
        22_242,
        &url.to_ascii_uppercase().replace("WS://", "Ws://"),
        &challenge,
        now(),
    );
    ws.send(&json!(["AUTH", right])).await.expect("send AUTH");
    assert_eq!(ws.wait_ok(&right.id).await, (true, String::new()));
    ws.req("h", vec![json!({"#h": [channel()]})])
        .await
        .expect("authenticated REQ with #h");
    // No auth event was stored.
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Channel-scoped data

async fn channel_writes_need_the_authors_auth(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let (alice, mallory) = (Keys::generate(), Keys::generate());
    let mut as_alice = authed(&relay, &alice).await;
    let ch = create_channel(&mut as_alice, &alice, false).await;
    let msg = alice.sign(9, vec![tag(&["h", &ch])], "hello channel", now());

    let mut anon = relay.ws().await;
    assert_publish_refused(&relay, &mut anon, &msg, "auth-required:").await;

    let mut as_mallory = authed(&relay, &mallory).await;
    assert_publish_refused(&relay, &mut as_mallory, &msg, "restricted:").await;

    let two_h = alice.sign(
        9,
        vec![tag(&["h", &ch]), tag(&["h", &channel()])],
        "two channels",
        now(),
    );
    assert_publish_refused(&relay, &mut as_alice, &two_h, "invalid:").await;
    assert_eq!(relay.stored_rows(mallory.pubkey()).await, 0);

    // The author, authenticated, may write it.
    assert_eq!(as_alice.publish(&msg).await, (true, String::new()));
    assert_eq!(relay.stored_rows(&msg.id).await, 1);
    relay.stop().await;
}

async fn channel_reads_need_auth(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let alice = Keys::generate();
    let mut writer = authed(&relay, &alice).await;
    let ch = create_channel(&mut writer, &alice, false).await;
    let mut anon = relay.ws().await;
    let err = anon
        .req("h", vec![json!({"#h": [ch]})])
        .await
        .expect_err("unauthenticated #h is CLOSED");
    assert!(err.starts_with("auth-required:"), "{err}");

    // Any filter that could match channel data is refused before AUTH (kind 9 here),
    // never answered with a silent empty EOSE.
    let err = anon
        .req("k9", vec![json!({"kinds": [9]})])
        .await
        .expect_err("unauthenticated kind 9 is CLOSED");
    assert!(err.starts_with("auth-required:"), "{err}");

    // Live: an anonymous subscriber to kind 1 (a community-wide marker event) and an
    // authenticated one to kinds 9 and 1.
    let live = vec![json!({"kinds": [9]}), json!({"kinds": [1]})];
    assert!(anon
        .req("live", vec![json!({"kinds": [1]})])
        .await
        .expect("REQ")
        .is_empty());
    let mut member = authed(&relay, &Keys::generate()).await;
    assert!(member.req("live", live).await.expect("REQ").is_empty());

    let secret = alice.sign(9, vec![tag(&["h", &ch])], "channel only", now());
    let marker = alice.sign(1, vec![], "community-wide", now());
    assert_eq!(writer.publish(&secret).await, (true, String::new()));
    assert_eq!(writer.publish(&marker).await, (true, String::new()));

    // The member sees both, in order; the anonymous subscriber's first live event is the
    // marker: the channel event was never delivered to it.
    assert_eq!(next_live(&mut member).await, json!(secret));
    assert_eq!(next_live(&mut member).await, json!(marker));
    assert_eq!(next_live(&mut anon).await, json!(marker));

    // Stored reads: same rule.
    let mut fresh = relay.ws().await;
    let err = fresh
        .req("q", vec![json!({"kinds": [9]})])
        .await
        .expect_err("anonymous kind-9 REQ is CLOSED");
    assert!(err.starts_with("auth-required:"), "{err}");
    let got = member
        .req("q", vec![json!({"kinds": [9]})])
        .await
        .expect("REQ");
    assert_eq!(
        got,
        vec![secret],
        "an authenticated reader of the open channel"
    );
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Kinds clients may not send

async fn relay_authored_kinds_are_refused_on_every_transport(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    let http = relay.http();
    // Core's group state; kinds a plugin reserves are tested with that plugin.
    for kind in [39_000, 39_001, 39_002] {
        let d = tag(&["d", &channel()]);
        let over_ws = keys.sign(kind, vec![d.clone()], &format!("ws {kind}"), now());
        assert_publish_refused(&relay, &mut ws, &over_ws, "invalid:").await;

        let over_http = keys.sign(kind, vec![d], &format!("http {kind}"), now());
        let (status, body) = http
            .post_signed(&keys, "/events", over_http.to_json().as_bytes())
            .await;
        assert_eq!(status, 400, "kind {kind}: {body}");
        assert_eq!(body["accepted"], json!(false), "{body}");
        assert_eq!(body["id"], json!(over_http.id), "{body}");
        let message = body["message"].as_str().expect("message");
        assert!(message.starts_with("invalid:"), "{message}");
        assert_eq!(relay.stored_rows(&over_http.id).await, 0);
    }
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

async fn auth_kind_is_refused_as_event(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let (mut ws, challenge) = ws_with_challenge(&relay).await;
    let url = format!("ws://{}/", relay.host());
    let auth = auth_event(&keys, 22_242, &url, &challenge, now());
    assert_publish_refused(&relay, &mut ws, &auth, "invalid:").await;
    relay.stop().await;
}

async fn ephemeral_events_are_live_only(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let mut reader = relay.ws().await;
    assert!(reader
        .req("live", vec![json!({"kinds": [20001]})])
        .await
        .expect("REQ")
        .is_empty());
    let mut writer = relay.ws().await;
    let typing = keys.sign(20_001, vec![], "typing…", now());
    assert_eq!(writer.publish(&typing).await, (true, String::new()));
    let live = reader
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("live ephemeral event");
    assert_eq!(live, json!(["EVENT", "live", typing]));

    let later = writer
        .req("later", vec![json!({"kinds": [20001]})])
        .await
        .expect("REQ");
    assert!(later.is_empty(), "ephemeral events are never returned");
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Slow consumers

/// A REQ may answer with more messages than the outbound queue holds; a client that
/// reads gets all of them, and stays connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_answer_larger_than_the_outbound_queue_is_delivered() {
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "req_answer_larger_than_the_outbound_queue_is_delivered",
        |s| s.limits.max_outbound_queue = 4,
        Vec::new(),
    )
    .await
    .expect("sqlite relay");
    let keys = Keys::generate();
    let mut ws = relay.ws().await;
    for i in 0..40 {
        let event = keys.sign(1, vec![tag(&["t", "many"])], &format!("note {i}"), now());
        assert!(ws.publish(&event).await.0, "event {i} accepted");
    }
    let got = ws
        .req(
            "many",
            vec![json!({"kinds": [1], "#t": ["many"], "limit": 40})],
        )
        .await
        .expect("the whole answer, then EOSE");
    assert_eq!(got.len(), 40);
    let after = keys.sign(1, vec![], "still connected", now());
    assert_eq!(ws.publish(&after).await, (true, String::new()));
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reader_is_disconnected_and_relay_stays_healthy() {
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "slow_reader_is_disconnected_and_relay_stays_healthy",
        |s| s.limits.max_outbound_queue = 8,
        Vec::new(),
    )
    .await
    .expect("sqlite relay");
    let keys = Keys::generate();

    // Subscribe, then never read again.
    let mut slow = relay.ws().await;
    slow.req("all", vec![json!({"kinds": [1]})])
        .await
        .expect("REQ");

    // Enough data to fill the socket buffers and then the outbound queue.
    let mut writer = relay.ws().await;
    let filler = "z".repeat(128 * 1024);
    for i in 0..160 {
        let event = keys.sign(1, vec![], &format!("{i} {filler}"), now());
        assert!(writer.publish(&event).await.0, "burst event {i} accepted");
    }

    assert!(
        slow.is_closed().await,
        "a reader that lets its queue fill is disconnected"
    );

    // Everyone else is unaffected.
    let last = keys.sign(1, vec![tag(&["t", "after"])], "after the burst", now());
    assert_eq!(writer.publish(&last).await, (true, String::new()));
    let mut fresh = relay.ws().await;
    let got = fresh
        .req("after", vec![json!({"kinds": [1], "#t": ["after"]})])
        .await
        .expect("REQ");
    assert_eq!(got, vec![last]);
    relay.stop().await;
}
