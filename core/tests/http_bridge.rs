//! The HTTP bridge (`POST /query`, `POST /events`), NIP-98, NIP-11, and the `Host` →
//! community mapping, over real HTTP and WebSocket clients.

use buzz_core::both_backends;

use base64::Engine;
use buzz_core::config::CommunitySettings;
use buzz_core::testkit::{now, tag, HttpClient, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

both_backends!(
    events_then_query_round_trip,
    invalid_event_over_http_is_refused,
    nip98_failures_are_401,
    nip98_replay_is_refused,
    nip98_lenient_forms_pass,
    bad_bodies_are_refused,
    host_aliases_select_the_same_community,
    communities_are_isolated,
);

// ---------------------------------------------------------------------------
// helpers

/// Stored events matching `filter`, through a one-off subscription that is closed
/// again (so it cannot catch later live events).
async fn stored(ws: &mut WsClient, filter: Value) -> Vec<Event> {
    let sub = uuid::Uuid::new_v4().simple().to_string();
    let got = ws.req(&sub, vec![filter]).await.expect("REQ");
    ws.send(&json!(["CLOSE", sub])).await.expect("CLOSE");
    got
}

/// Assert `status` and an `{"error": "<prefix>…"}` body.
fn assert_error(answer: &(u16, Value), status: u16, prefix: &str, what: &str) {
    let (got, body) = answer;
    assert_eq!(*got, status, "{what}: {body}");
    let message = body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: body has no error string: {body}"));
    assert!(
        message.starts_with(prefix),
        "{what}: expected {prefix:?}, got {message:?}"
    );
}

/// `Nostr <base64>` of an arbitrary (possibly wrong) event.
fn header_of(event: &Event) -> String {
    format!(
        "Nostr {}",
        base64::engine::general_purpose::STANDARD.encode(event.to_json())
    )
}

/// A NIP-98 event with exactly these tags.
fn nip98_event(keys: &Keys, kind: u32, url: &str, method: &str, body: Option<&[u8]>) -> Event {
    let mut tags = vec![tag(&["u", url]), tag(&["method", method])];
    if let Some(body) = body {
        tags.push(tag(&["payload", &hex::encode(Sha256::digest(body))]));
    }
    keys.sign(kind, tags, "", now())
}

/// The POST header for `path` + `body` as a well-behaved client builds it.
fn good_header(http: &HttpClient, keys: &Keys, path: &str, body: &[u8]) -> String {
    authorization_header(
        keys,
        "POST",
        &http.public_url(path),
        Some(body),
        now(),
        None,
    )
}

/// Every way a NIP-98 header can be wrong for `POST path` with `body`.
fn bad_authorizations(
    relay: &TestRelay,
    keys: &Keys,
    path: &str,
    body: &[u8],
) -> Vec<(&'static str, Option<String>)> {
    let http = relay.http();
    let url = http.public_url(path);
    let port = relay.addr.port();
    let good = good_header(&http, keys, path, body);
    let encoded = good.trim_start_matches("Nostr ").to_owned();
    let other_path = if path == "/query" {
        "/events"
    } else {
        "/query"
    };
    let signed = |method: &str, url: &str, body: Option<&[u8]>, at: i64| {
        Some(authorization_header(keys, method, url, body, at, None))
    };
    let mut forged = nip98_event(keys, 27_235, &url, "POST", Some(body));
    forged.sig = keys.sign(1, vec![], "other", now()).sig;
    vec![
        ("no header", None),
        ("Bearer scheme", Some(format!("Bearer {encoded}"))),
        ("Basic scheme", Some("Basic dXNlcjpwYXNz".to_owned())),
        ("no scheme", Some(encoded)),
        ("not base64", Some("Nostr %%% not base64 %%%".to_owned())),
        (
            "base64 of a non-event",
            Some(format!(
                "Nostr {}",
                base64::engine::general_purpose::STANDARD.encode("{\"hello\":1}")
            )),
        ),
        (
            "wrong kind",
            Some(header_of(&nip98_event(
                keys,
                27_236,
                &url,
                "POST",
                Some(body),
            ))),
        ),
        (
            "u names another path",
            signed("POST", &http.public_url(other_path), Some(body), now()),
        ),
        (
            "u names another host",
            signed(
                "POST",
                &format!("http://other.test:{port}{path}"),
                Some(body),
                now(),
            ),
        ),
        (
            "u names another scheme",
            signed(
                "POST",
                &format!("https://localhost:{port}{path}"),
                Some(body),
                now(),
            ),
        ),
        ("method GET", signed("GET", &url, Some(body), now())),
        (
            "payload of another body",
            signed("POST", &url, Some(b"another body"), now()),
        ),
        ("missing payload", signed("POST", &url, None, now())),
        ("61 s old", signed("POST", &url, Some(body), now() - 61)),
        // Well past the window: the headers are made up front and the clock moves on
        // while earlier cases are posted.
        ("70 s ahead", signed("POST", &url, Some(body), now() + 70)),
        ("bad signature", Some(header_of(&forged))),
    ]
}

// ---------------------------------------------------------------------------
// The bridge

async fn events_then_query_round_trip(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let http = relay.http();
    let event = keys.sign(1, vec![tag(&["t", "bridge"])], "over http", now());
    let (status, body) = http
        .post_signed(&keys, "/events", event.to_json().as_bytes())
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"id": event.id, "accepted": true, "message": ""})
    );

    let filters = json!([{"ids": [event.id]}]).to_string();
    let (status, body) = http.post_signed(&keys, "/query", filters.as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!([event]));

    // Same pipeline as WebSocket: visible there too, and a re-post is a duplicate.
    let mut ws = relay.ws().await;
    let got = ws
        .req("q", vec![json!({"#t": ["bridge"]})])
        .await
        .expect("REQ");
    assert_eq!(got, vec![event.clone()]);
    let again = event.to_json().into_bytes();
    let header = authorization_header(
        &keys,
        "POST",
        &http.public_url("/events"),
        Some(&again),
        now(),
        Some("second post"),
    );
    let (status, body) = http.post("/events", &again, Some(&header)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], json!(true));
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("duplicate:")),
        "{body}"
    );
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 1);
    relay.stop().await;
}

async fn invalid_event_over_http_is_refused(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let http = relay.http();
    let mut tampered = keys.sign(1, vec![], "signed", now());
    tampered.content = "changed after signing".into();
    let stale = keys.sign(1, vec![], "stale", now() - 16 * 60);
    for event in [&tampered, &stale] {
        let (status, body) = http
            .post_signed(&keys, "/events", event.to_json().as_bytes())
            .await;
        assert!((400..500).contains(&status), "{status}: {body}");
        assert_eq!(body["accepted"], json!(false), "{body}");
        assert_eq!(body["id"], json!(event.id), "{body}");
        let message = body["message"].as_str().expect("message");
        assert!(message.starts_with("invalid:"), "{message}");
    }
    // Channel-scoped, signed by someone else than the NIP-98 caller.
    let mallory = Keys::generate();
    let channel = uuid::Uuid::new_v4().to_string();
    let foreign = keys.sign(9, vec![tag(&["h", &channel])], "not yours", now());
    let (status, body) = http
        .post_signed(&mallory, "/events", foreign.to_json().as_bytes())
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["accepted"], json!(false), "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("restricted:")),
        "{body}"
    );
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// NIP-98

async fn nip98_failures_are_401(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let caller = Keys::generate();
    let author = Keys::generate();
    let http = relay.http();
    let event = author.sign(1, vec![], "never stored", now());
    let event_body = event.to_json().into_bytes();
    let query_body = json!([{"kinds": [1]}]).to_string().into_bytes();
    for (path, body) in [("/query", &query_body), ("/events", &event_body)] {
        for (what, header) in bad_authorizations(&relay, &caller, path, body) {
            let answer = http.post(path, body, header.as_deref()).await;
            assert_error(&answer, 401, "auth-required:", &format!("{path} {what}"));
            assert_eq!(
                answer.1.as_object().map(|o| o.len()),
                Some(1),
                "{path} {what}: only an error field: {}",
                answer.1
            );
        }
    }
    assert_eq!(relay.stored_rows(author.pubkey()).await, 0);
    relay.stop().await;
}

async fn nip98_replay_is_refused(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let http = relay.http();
    let query = json!([{"kinds": [1]}]).to_string().into_bytes();
    let header = good_header(&http, &keys, "/query", &query);
    assert_eq!(http.post("/query", &query, Some(&header)).await.0, 200);
    let again = http.post("/query", &query, Some(&header)).await;
    assert_error(&again, 401, "auth-required:", "replayed /query");

    let first = keys.sign(1, vec![], "first", now());
    let body = first.to_json().into_bytes();
    let header = good_header(&http, &keys, "/events", &body);
    assert_eq!(http.post("/events", &body, Some(&header)).await.0, 200);
    let again = http.post("/events", &body, Some(&header)).await;
    assert_error(&again, 401, "auth-required:", "replayed /events");
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 1);

    // A header that failed another check was not burned by the failure.
    let body = keys.sign(1, vec![], "second", now()).to_json().into_bytes();
    let header = good_header(&http, &keys, "/events", &body);
    let wrong_body = keys.sign(1, vec![], "third", now()).to_json().into_bytes();
    let refused = http.post("/events", &wrong_body, Some(&header)).await;
    assert_error(&refused, 401, "auth-required:", "payload mismatch");
    assert_eq!(http.post("/events", &body, Some(&header)).await.0, 200);
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 2);
    relay.stop().await;
}

async fn nip98_lenient_forms_pass(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let http = relay.http();
    let port = relay.addr.port();
    let body = json!([{"kinds": [1], "limit": 1}]).to_string().into_bytes();
    let lenient = [
        (
            "upper-case scheme and host",
            format!("HTTP://LOCALHOST:{port}/query"),
            "POST",
        ),
        (
            "mixed-case host",
            format!("http://LocalHost:{port}/query"),
            "POST",
        ),
        (
            "trailing slash",
            format!("http://localhost:{port}/query/"),
            "POST",
        ),
        (
            "lower-case method",
            format!("http://localhost:{port}/query"),
            "post",
        ),
    ];
    for (what, url, method) in lenient {
        let header = authorization_header(&keys, method, &url, Some(&body), now(), None);
        let (status, answer) = http.post("/query", &body, Some(&header)).await;
        assert_eq!(status, 200, "{what}: {answer}");
    }
    // Lower-case `nostr` scheme in the header.
    let header = authorization_header(
        &keys,
        "POST",
        &http.public_url("/query"),
        Some(&body),
        now(),
        Some("lower-case scheme"),
    )
    .replacen("Nostr ", "nostr ", 1);
    assert_eq!(http.post("/query", &body, Some(&header)).await.0, 200);

    // Two identical requests in the same second pass when their nonces differ.
    let at = now();
    let url = http.public_url("/query");
    let a = authorization_header(&keys, "POST", &url, Some(&body), at, Some("nonce-a"));
    let b = authorization_header(&keys, "POST", &url, Some(&body), at, Some("nonce-b"));
    assert_ne!(a, b);
    assert_eq!(http.post("/query", &body, Some(&a)).await.0, 200);
    assert_eq!(http.post("/query", &body, Some(&b)).await.0, 200);
    // ...and without a nonce the second one is a replay.
    let plain = authorization_header(&keys, "POST", &url, Some(&body), at, None);
    assert_eq!(http.post("/query", &body, Some(&plain)).await.0, 200);
    let replay = http.post("/query", &body, Some(&plain)).await;
    assert_error(&replay, 401, "auth-required:", "same second, no nonce");
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Bodies

async fn bad_bodies_are_refused(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let http = relay.http();

    // Over 512 KiB: 413 on both routes, nothing stored.
    let huge_query = format!("[{{\"kinds\":[1],\"pad\":\"{}\"}}]", "q".repeat(524_288));
    let answer = http
        .post_signed(&keys, "/query", huge_query.as_bytes())
        .await;
    assert_error(&answer, 413, "", "/query body over 512 KiB");
    let huge_event = keys.sign(1, vec![], &"e".repeat(524_288), now());
    let answer = http
        .post_signed(&keys, "/events", huge_event.to_json().as_bytes())
        .await;
    assert_error(&answer, 413, "", "/events body over 512 KiB");

    let query_cases: [(&str, &[u8]); 7] = [
        ("malformed JSON", b"[{\"kinds\": [1]"),
        ("empty body", b""),
        ("an object, not an array", b"{\"kinds\": [1]}"),
        ("a string", b"\"kinds\""),
        ("kinds as string", b"[{\"kinds\": \"1\"}]"),
        ("limit 1.5", b"[{\"limit\": 1.5}]"),
        ("filter not an object", b"[5]"),
    ];
    for (what, body) in query_cases {
        let answer = http.post_signed(&keys, "/query", body).await;
        assert_error(&answer, 400, "invalid:", &format!("/query {what}"));
    }
    let negative_since = json!([{"since": -1}]).to_string();
    let answer = http
        .post_signed(&keys, "/query", negative_since.as_bytes())
        .await;
    assert_error(&answer, 400, "invalid:", "/query negative since");
    let bad_ids = json!([{"ids": ["xyz"]}, {"#e": "abc"}]).to_string();
    let answer = http.post_signed(&keys, "/query", bad_ids.as_bytes()).await;
    assert_error(&answer, 400, "invalid:", "/query ids not hex");

    let event_cases: [(&str, &[u8]); 3] = [
        ("malformed JSON", b"{\"id\": "),
        ("an array", b"[]"),
        ("missing fields", b"{\"kind\": 1}"),
    ];
    for (what, body) in event_cases {
        let answer = http.post_signed(&keys, "/events", body).await;
        assert_error(&answer, 400, "invalid:", &format!("/events {what}"));
    }
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

// ---------------------------------------------------------------------------
// Hosts and communities

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_is_404_everywhere() {
    let relay = TestRelay::start(TestBackend::Sqlite, "unknown_host_is_404_everywhere")
        .await
        .expect("sqlite relay");
    let keys = Keys::generate();
    let host = format!("unknown.test:{}", relay.addr.port());
    let http = relay.http().with_host(&host);
    let body = json!([{"kinds": [1]}]).to_string();
    let event = keys.sign(1, vec![], "nowhere", now()).to_json();
    let answers = [
        ("GET /info", http.get("/info", &[]).await),
        (
            "GET / nostr+json",
            http.get("/", &[("accept", "application/nostr+json")]).await,
        ),
        ("GET /", http.get("/", &[]).await),
        (
            "POST /query",
            http.post_signed(&keys, "/query", body.as_bytes()).await,
        ),
        (
            "POST /events",
            http.post_signed(&keys, "/events", event.as_bytes()).await,
        ),
        (
            "POST /query without auth",
            http.post("/query", body.as_bytes(), None).await,
        ),
    ];
    let (_, (_, generic)) = &answers[0];
    let generic = generic.clone();
    for (what, answer) in &answers {
        assert_error(answer, 404, "", what);
        assert_eq!(answer.1, generic, "{what}: one generic body");
        assert_eq!(answer.1.as_object().map(|o| o.len()), Some(1), "{what}");
        assert!(!answer.1.to_string().contains("unknown.test"), "{what}");
    }
    let refused = WsClient::connect(relay.addr, &host).await;
    let err = refused
        .err()
        .expect("WebSocket upgrade to an unknown host fails");
    assert!(err.to_string().contains("404"), "{err}");
    assert_eq!(relay.stored_rows(keys.pubkey()).await, 0);
    relay.stop().await;
}

async fn host_aliases_select_the_same_community(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let keys = Keys::generate();
    let port = relay.addr.port();
    let event = keys.sign(1, vec![], "one community", now());
    let mut ws = relay.ws().await;
    assert!(ws.publish(&event).await.0);

    for host in [
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("LOCALHOST.:{port}"),
        format!("LocalHost:{port}"),
        "localhost".to_owned(),
    ] {
        let http = relay.http().with_host(&host);
        let (status, info) = http.get("/info", &[]).await;
        assert_eq!(status, 200, "{host}: {info}");
        let filters = json!([{"ids": [event.id]}]).to_string();
        let (status, got) = http.post_signed(&keys, "/query", filters.as_bytes()).await;
        assert_eq!((status, got), (200, json!([event])), "{host} /query");
        let mut ws = WsClient::connect(relay.addr, &host)
            .await
            .unwrap_or_else(|e| panic!("{host}: WebSocket connects: {e}"));
        let got = ws
            .req("q", vec![json!({"ids": [event.id]})])
            .await
            .expect("REQ");
        assert_eq!(got, vec![event.clone()], "{host} REQ");
        // NIP-42 names the host as sent.
        assert_eq!(ws.auth(&keys).await, (true, String::new()), "{host} AUTH");
    }
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip11_document() {
    let relay = TestRelay::start(TestBackend::Sqlite, "nip11_document")
        .await
        .expect("sqlite relay");
    let http = relay.http();
    let by_accept = http.get("/", &[("accept", "application/nostr+json")]).await;
    let by_path = http.get("/info", &[]).await;
    for (what, (status, doc)) in [("GET / (Accept)", by_accept), ("GET /info", by_path)] {
        assert_eq!(status, 200, "{what}: {doc}");
        assert_eq!(doc["self"], json!(relay.running().pubkey()), "{what}");
        let nips: Vec<u64> = doc["supported_nips"]
            .as_array()
            .expect("supported_nips")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        for nip in [1, 11, 42, 98] {
            assert!(nips.contains(&nip), "{what}: NIP-{nip} in {nips:?}");
        }
        assert_eq!(
            doc["limitation"]["max_message_length"],
            json!(524_288),
            "{what}"
        );
    }
    relay.stop().await;
}

async fn communities_are_isolated(backend: TestBackend, name: &str) {
    let other = CommunitySettings {
        host: "other.test".into(),
        name: "Other".into(),
        owners: Vec::new(),
        open: true,
        policies: Default::default(),
    };
    let Some(relay) =
        TestRelay::start_with(backend, name, |s| s.communities.push(other), Vec::new()).await
    else {
        return;
    };
    let keys = Keys::generate();
    let port = relay.addr.port();
    let other_host = format!("other.test:{port}");
    let mut local = relay.ws().await;
    let mut remote = WsClient::connect(relay.addr, &other_host)
        .await
        .expect("other.test WebSocket");

    // Live: a subscriber in other.test does not see localhost's events.
    let mine = json!({"kinds": [1], "authors": [keys.pubkey()]});
    assert!(remote
        .req("live", vec![mine.clone()])
        .await
        .expect("REQ")
        .is_empty());
    let here = keys.sign(1, vec![], "published on localhost", now());
    let there = keys.sign(1, vec![], "published on other.test", now());
    assert_eq!(local.publish(&here).await, (true, String::new()));
    assert_eq!(remote.publish(&there).await, (true, String::new()));
    let live = remote
        .recv_where(|v| v[0] == "EVENT")
        .await
        .expect("live event");
    assert_eq!(
        live[2],
        json!(there),
        "first live event is other.test's own"
    );

    // Stored: each host sees only its own, over WS and HTTP.
    // With its kind: before AUTH, ids alone that are not this community's public events
    // are `auth-required:` (they might be channel events), which would hide nothing here.
    let by_id = |e: &Event| json!({"ids": [e.id], "kinds": [e.kind]});
    assert!(stored(&mut remote, by_id(&here)).await.is_empty());
    assert!(stored(&mut local, by_id(&there)).await.is_empty());
    let http = relay.http().with_host(&other_host);
    let body = json!([by_id(&here)]).to_string();
    let (status, got) = http.post_signed(&keys, "/query", body.as_bytes()).await;
    assert_eq!((status, got), (200, json!([])));

    // The same event id is stored independently in both communities.
    assert_eq!(
        remote.publish(&here).await,
        (true, String::new()),
        "not a duplicate"
    );
    assert_eq!(relay.stored_rows(&here.id).await, 2);
    assert_eq!(stored(&mut remote, by_id(&here)).await, vec![here.clone()]);

    // Deleting it in one community leaves the other's copy alone.
    let deletion = keys.sign(5, vec![tag(&["e", &here.id])], "", now());
    assert_eq!(remote.publish(&deletion).await, (true, String::new()));
    assert!(stored(&mut remote, by_id(&here)).await.is_empty());
    assert_eq!(stored(&mut local, by_id(&here)).await, vec![here.clone()]);

    // NIP-11 names each community.
    let (_, local_doc) = relay.http().get("/info", &[]).await;
    let (_, other_doc) = http.get("/info", &[]).await;
    assert_ne!(local_doc["name"], other_doc["name"]);
    relay.stop().await;
}
