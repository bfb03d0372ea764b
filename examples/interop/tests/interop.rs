//! Buzz against an independent Nostr implementation, the `nostr` crate.
//!
//! - Ids and signatures made by either side verify on the other, including content that
//!   exercises NIP-01's canonical JSON escaping.
//! - A note built and signed by `nostr` is accepted over the wire, read back, and the
//!   relay's JSON parses and verifies in `nostr` unchanged.
//! - NIP-42: a `nostr`-built kind-22242 event authenticates the connection.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::{Event as BuzzEvent, EventLimits};
use buzz_nostr::keys::Keys as BuzzKeys;
use nostr::nips::nip42::ClientAuthentication;
use nostr::prelude::{
    Event as NostrEvent, EventBuilder, FinalizeEvent, Keys as NostrKeys, Kind, RelayUrl, Tag,
    Timestamp,
};
use serde_json::{json, Value};

/// Contents that stress the canonical id serialization: quotes, backslashes, every
/// short escape, raw control characters (escaped as `\u00XX`), DEL (not escaped),
/// non-ASCII, astral-plane characters and the JavaScript line separators.
const TRICKY_CONTENTS: [&str; 6] = [
    "",
    "plain ascii",
    "quote \" backslash \\ slash / newline \n tab \t cr \r",
    "backspace \u{8} formfeed \u{c} nul \u{0} unit-sep \u{1f} del \u{7f}",
    "accents éàü, CJK 蜂, emoji 🐝🍯, zero-width \u{200b}",
    "line sep \u{2028} para sep \u{2029} bom \u{feff}",
];

fn to_nostr(event: &BuzzEvent) -> NostrEvent {
    NostrEvent::from_json(event.to_json()).expect("nostr parses buzz's JSON")
}

fn to_buzz(event: &NostrEvent) -> BuzzEvent {
    serde_json::from_str(&event.as_json()).expect("buzz parses nostr's JSON")
}

fn nostr_note(keys: &NostrKeys, content: &str, tags: Vec<Tag>) -> NostrEvent {
    EventBuilder::new(Kind::TextNote, content)
        .tags(tags)
        .custom_created_at(Timestamp::from_secs(now() as u64))
        .finalize(keys)
        .expect("nostr signs")
}

#[test]
fn buzz_signed_events_verify_in_nostr() {
    let keys = BuzzKeys::generate();
    for (i, content) in TRICKY_CONTENTS.iter().enumerate() {
        let tags = vec![
            tag(&["t", "interop"]),
            tag(&["e", &"ab".repeat(32), "", "reply"]),
            tag(&["x", content]),
            tag(&["multi-letter", "value", "second", "third"]),
        ];
        let event = keys.sign(i as u32 + 1, tags, content, now());
        let theirs = to_nostr(&event);
        theirs
            .verify()
            .unwrap_or_else(|e| panic!("nostr rejects buzz event {content:?}: {e}"));
        assert_eq!(theirs.id.to_hex(), event.id);
        assert_eq!(theirs.pubkey.to_hex(), event.pubkey);
        assert_eq!(theirs.content, event.content);
        // And back: what nostr serializes is the same event for buzz.
        assert_eq!(to_buzz(&theirs), event);
    }
}

#[test]
fn nostr_signed_events_pass_buzz_checks() {
    let keys = NostrKeys::generate();
    let limits = EventLimits::default();
    for content in TRICKY_CONTENTS {
        let event = nostr_note(
            &keys,
            content,
            vec![
                Tag::hashtag("Interop"),
                Tag::custom("x", [content]),
                Tag::custom("multi-letter", ["value", "second"]),
            ],
        );
        let ours = to_buzz(&event);
        limits
            .check(&ours, now())
            .unwrap_or_else(|e| panic!("buzz rejects nostr event {content:?}: {e}"));
        assert_eq!(hex_id(&ours), event.id.to_hex());
        assert_eq!(ours.pubkey, keys.public_key().to_hex());
    }

    // A tampered nostr event fails buzz's checks the same way it fails nostr's.
    let event = nostr_note(&keys, "original", vec![]);
    let mut tampered = to_buzz(&event);
    tampered.content = "tampered".into();
    let err = limits
        .check(&tampered, now())
        .expect_err("tampered content");
    assert!(err.to_string().starts_with("invalid: event id"), "{err}");
    let theirs = NostrEvent::from_json(tampered.to_json());
    assert!(theirs.map_or(true, |e| e.verify().is_err()));
}

fn hex_id(event: &BuzzEvent) -> String {
    event
        .compute_id()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nostr_note_round_trips_through_the_relay() {
    let relay = TestRelay::start(TestBackend::Sqlite, "interop::round_trip")
        .await
        .expect("SQLite is always available");
    let keys = NostrKeys::generate();
    let note = nostr_note(
        &keys,
        "hello from an independent implementation \u{1f41d} \"quoted\"\n",
        vec![Tag::hashtag("interop")],
    );
    let id = note.id.to_hex();
    let wire: Value = serde_json::from_str(&note.as_json()).expect("nostr JSON");

    let mut ws = relay.ws().await;
    ws.send(&json!(["EVENT", wire])).await.expect("send EVENT");
    assert_eq!(ws.wait_ok(&id).await, (true, String::new()));

    // Read it back as raw JSON, so `nostr` parses exactly what the relay sent.
    for (sub, filter) in [
        ("by-id", json!({"ids": [id]})),
        ("by-tag", json!({"#t": ["interop"], "kinds": [1]})),
        (
            "by-author",
            json!({"authors": [keys.public_key().to_hex()]}),
        ),
    ] {
        let got = req_raw(&mut ws, sub, filter).await;
        assert_eq!(got.len(), 1, "{sub}: {got:?}");
        let back = NostrEvent::from_json(got[0].to_string()).expect("nostr parses relay JSON");
        back.verify().expect("nostr verifies the relay's copy");
        assert_eq!(back, note, "{sub}: the relay returns the event unchanged");
    }
    ws.close().await;
    relay.stop().await;
}

/// REQ and return the raw event objects received before EOSE.
async fn req_raw(ws: &mut WsClient, sub: &str, filter: Value) -> Vec<Value> {
    ws.send(&json!(["REQ", sub, filter]))
        .await
        .expect("send REQ");
    let mut events = Vec::new();
    loop {
        let msg = ws
            .recv_where(|v| v[1] == sub && v[0] != "OK")
            .await
            .expect("relay answers the REQ");
        match msg[0].as_str() {
            Some("EVENT") => events.push(msg[2].clone()),
            Some("EOSE") => return events,
            _ => panic!("unexpected answer to REQ {sub}: {msg}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip42_auth_with_a_nostr_built_event() {
    let relay = TestRelay::start(TestBackend::Sqlite, "interop::nip42")
        .await
        .expect("SQLite is always available");
    let keys = NostrKeys::generate();
    let mut ws = relay.ws().await;

    // Channel-scoped reads need an authenticated caller.
    let channel_filter = json!({"#h": ["6f1d4c3e-8a7b-4e2f-9c1d-0a1b2c3d4e5f"]});
    let refused = ws
        .req("before", vec![channel_filter.clone()])
        .await
        .expect_err("unauthenticated channel REQ is closed");
    assert!(refused.starts_with("auth-required:"), "{refused}");

    // The relay's challenge is the first frame of the connection; the client has read it.
    let challenge = ws.challenge.clone().expect("relay sent an AUTH challenge");
    let relay_url = || RelayUrl::parse(&format!("ws://{}/", relay.host())).expect("relay url");

    // A wrong challenge is refused...
    let wrong = ClientAuthentication::new("not-the-challenge", relay_url())
        .finalize(&keys)
        .expect("nostr signs");
    let (ok, msg) = send_auth(&mut ws, &wrong).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");

    // ...the right one, built entirely by nostr's NIP-42 builder, is accepted.
    let auth = ClientAuthentication::new(challenge, relay_url())
        .finalize(&keys)
        .expect("nostr signs the auth event");
    assert_eq!(u16::from(auth.kind), 22_242);
    assert_eq!(send_auth(&mut ws, &auth).await, (true, String::new()));

    // Authenticated now: the same channel-scoped REQ is served.
    let served = ws
        .req("after", vec![channel_filter])
        .await
        .expect("authenticated channel REQ is served");
    assert!(served.is_empty(), "{served:?}");
    ws.close().await;
    relay.stop().await;
}

async fn send_auth(ws: &mut WsClient, auth: &NostrEvent) -> (bool, String) {
    let wire: Value = serde_json::from_str(&auth.as_json()).expect("nostr JSON");
    ws.send(&json!(["AUTH", wire])).await.expect("send AUTH");
    ws.wait_ok(&auth.id.to_hex()).await
}
