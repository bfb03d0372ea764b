//! Fair shares of the process's sync memory: one reader (a pubkey, or an address before
//! AUTH) holds at most its sessions and records over all its connections, a community
//! keeps its reserve whatever another community holds, a session ends after its lifetime
//! however often it is renewed, and an open that finds no room is refused before its set
//! is read. The attack this reproduces: one member opened sessions on several
//! connections, renewed them, and every other reader's NEG-OPEN got "retry later" for as
//! long as it stayed. Both backends.

mod common;

use buzz_core::both_backends;
use buzz_core::config::{CommunitySettings, Settings};
use buzz_core::testkit::{authed_at, TestBackend, WsClient};
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

both_backends!(
    a_victim_syncs_while_an_attacker_holds_every_session,
    a_reader_holds_at_most_its_sessions_across_connections,
    a_community_keeps_its_reserve,
    a_lone_community_holds_the_whole_budget,
    a_session_ends_after_its_lifetime,
    nip11_lists_every_bound,
);

/// A second open community.
const OTHER: &str = "other.test";

fn empty_first() -> String {
    initiator(&[], 0).1
}

fn open(sub: &str, filter: Value) -> Value {
    json!(["NEG-OPEN", sub, filter, empty_first()])
}

fn channel_set(channel: &str) -> Value {
    json!({"#h": [channel], "kinds": [9]})
}

fn add_other(settings: &mut Settings) {
    settings.communities.push(CommunitySettings {
        host: OTHER.into(),
        name: OTHER.into(),
        owners: Vec::new(),
        open: true,
        policies: Default::default(),
    });
}

/// A channel of `n` messages by `keys` on `ws`.
async fn channel_of(ws: &mut WsClient, keys: &Keys, n: usize) -> String {
    let channel = create_channel(ws, keys, false).await;
    post(ws, keys, &channel, n).await;
    channel
}

async fn a_victim_syncs_while_an_attacker_holds_every_session(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_sync_records", json!(20));
        set(s, "max_records_in_memory", json!(60));
        set(s, "max_records_per_pubkey", json!(40));
        set(s, "max_sessions_per_pubkey", json!(8));
        set(s, "max_sessions_per_connection", json!(2));
    })
    .await
    else {
        return;
    };
    let (attacker, victim) = (Keys::generate(), Keys::generate());
    let mut first = authed(&relay, &attacker).await;
    let big = channel_of(&mut first, &attacker, 20).await;
    let mut victim_ws = authed(&relay, &victim).await;
    let mine = channel_of(&mut victim_ws, &victim, 15).await;

    // The attacker opens whole sets on five connections, two sessions each, as many as
    // it can get.
    let mut connections = vec![first];
    for _ in 0..4 {
        connections.push(authed(&relay, &attacker).await);
    }
    let mut held = 0;
    for ws in &mut connections {
        for sub in ["a", "b"] {
            match ask(ws, sub, open(sub, channel_set(&big))).await {
                Ok(_) => held += 1,
                Err(reason) => assert!(
                    reason.starts_with("blocked: ") && reason.contains("max_records_per_pubkey"),
                    "{reason}"
                ),
            }
        }
    }
    assert_eq!(held, 2, "40 records of 20 each");
    // Its share is spent: a filter matching more than one sync may cover is refused for
    // the share, so its set was never read.
    let whole = ask(&mut connections[4], "c", open("c", json!({"kinds": [9]})))
        .await
        .expect_err("no share left");
    assert!(
        whole.starts_with("blocked: ") && whole.contains("max_records_per_pubkey"),
        "{whole}"
    );

    // The victim's set of fifteen reconciles.
    let got = reconcile(&mut victim_ws, "v", channel_set(&mine), &[])
        .await
        .expect("the victim syncs");
    assert_eq!(got.need.len(), 15);
    // The attacker's sessions are still open: it was not let go to make room.
    assert!(ask(&mut connections[0], "a", json!(["NEG-MSG", "a", "61"]))
        .await
        .is_ok());
    relay.stop().await;
}

async fn a_reader_holds_at_most_its_sessions_across_connections(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_sessions_per_pubkey", json!(3));
        set(s, "max_sessions_per_connection", json!(2));
    })
    .await
    else {
        return;
    };
    let notes = || json!({"kinds": [1]});
    let alice = Keys::generate();
    let (mut one, mut two) = (authed(&relay, &alice).await, authed(&relay, &alice).await);
    assert!(ask(&mut one, "a", open("a", notes())).await.is_ok());
    assert!(ask(&mut one, "b", open("b", notes())).await.is_ok());
    assert!(ask(&mut two, "c", open("c", notes())).await.is_ok());
    let fourth = ask(&mut two, "d", open("d", notes()))
        .await
        .expect_err("a fourth session of one reader");
    assert!(
        fourth.starts_with("blocked: ") && fourth.contains("max_sessions_per_pubkey"),
        "{fourth}"
    );
    // Another reader has its own sessions; a NEG-CLOSE gives alice one back.
    let mut bob = authed(&relay, &Keys::generate()).await;
    assert!(ask(&mut bob, "a", open("a", notes())).await.is_ok());
    one.send(&json!(["NEG-CLOSE", "a"])).await.expect("send");
    // NEG-CLOSE has no answer: a NEG-MSG after it, answered "no such session", says it
    // was done (a connection's messages are answered in order).
    let gone = ask(&mut one, "a", json!(["NEG-MSG", "a", "61"])).await;
    assert!(gone.is_err(), "{gone:?}");
    assert!(ask(&mut two, "d", open("d", notes())).await.is_ok());

    // Before AUTH a reader is its address: two anonymous connections share its count.
    let (mut anon1, mut anon2) = (relay.ws().await, relay.ws().await);
    assert!(ask(&mut anon1, "a", open("a", notes())).await.is_ok());
    assert!(ask(&mut anon1, "b", open("b", notes())).await.is_ok());
    assert!(ask(&mut anon2, "c", open("c", notes())).await.is_ok());
    let fourth = ask(&mut anon2, "d", open("d", notes()))
        .await
        .expect_err("a fourth session from one address");
    assert!(fourth.contains("max_sessions_per_pubkey"), "{fourth}");
    still_serves(&mut anon2).await;
    relay.stop().await;
}

/// Budget 60, reserve 20 per community, 20 per reader: in a relay of two communities one
/// community's readers hold at most 40.
async fn a_community_keeps_its_reserve(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_sync_records", json!(20));
        set(s, "max_records_in_memory", json!(60));
        set(s, "max_records_per_pubkey", json!(20));
        set(s, "records_reserved_per_community", json!(20));
        add_other(s);
    })
    .await
    else {
        return;
    };
    let author = Keys::generate();
    let mut ws = authed(&relay, &author).await;
    let here = channel_of(&mut ws, &author, 20).await;
    // Three throwaway readers of the default community, twenty records each.
    let mut outcomes = Vec::new();
    let mut readers = Vec::new();
    for _ in 0..3 {
        let mut reader = authed(&relay, &Keys::generate()).await;
        outcomes.push(ask(&mut reader, "s", open("s", channel_set(&here))).await);
        readers.push(reader);
    }
    assert!(outcomes[0].is_ok() && outcomes[1].is_ok(), "{outcomes:?}");
    let third = outcomes[2]
        .clone()
        .expect_err("the other community's reserve");
    assert!(
        third.starts_with("error: ") && third.contains("records_reserved_per_community"),
        "{third}"
    );
    // A reader of the other community syncs a whole set of twenty.
    let keys = Keys::generate();
    let mut there = authed_at(&relay, OTHER, &keys).await;
    let channel = channel_of(&mut there, &keys, 20).await;
    let got = reconcile(&mut there, "s", channel_set(&channel), &[])
        .await
        .expect("the other community syncs");
    assert_eq!(got.need.len(), 20);
    relay.stop().await;
}

/// The same bounds with one community: its readers hold the whole budget.
async fn a_lone_community_holds_the_whole_budget(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_sync_records", json!(20));
        set(s, "max_records_in_memory", json!(60));
        set(s, "max_records_per_pubkey", json!(20));
        set(s, "records_reserved_per_community", json!(20));
    })
    .await
    else {
        return;
    };
    let author = Keys::generate();
    let mut ws = authed(&relay, &author).await;
    let here = channel_of(&mut ws, &author, 20).await;
    let mut readers = Vec::new();
    for i in 0..3 {
        let mut reader = authed(&relay, &Keys::generate()).await;
        let answer = ask(&mut reader, "s", open("s", channel_set(&here))).await;
        assert!(answer.is_ok(), "reader {i}: {answer:?}");
        readers.push(reader);
    }
    let mut fourth = authed(&relay, &Keys::generate()).await;
    let full = ask(&mut fourth, "s", open("s", channel_set(&here)))
        .await
        .expect_err("the budget is spent");
    assert!(
        full.starts_with("error: ") && full.contains("max_records_in_memory"),
        "{full}"
    );
    relay.stop().await;
}

async fn a_session_ends_after_its_lifetime(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| {
        set(s, "max_session_secs", json!(1));
        set(s, "max_sessions_per_connection", json!(1));
    })
    .await
    else {
        return;
    };
    let mut ws = authed(&relay, &Keys::generate()).await;
    let opened = Instant::now();
    assert!(ask(&mut ws, "s", open("s", json!({"kinds": [1]})))
        .await
        .is_ok());
    // Renewed well within the idle timeout, the session still ends at its lifetime.
    let ended = loop {
        match ask(&mut ws, "s", json!(["NEG-MSG", "s", "61"])).await {
            Ok(_) if opened.elapsed() < Duration::from_secs(3) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(_) => panic!("the session outlived its lifetime"),
            Err(reason) => break reason,
        }
    };
    assert!(opened.elapsed() >= Duration::from_secs(1));
    assert!(
        ended.starts_with("closed: ") && ended.contains("max_session_secs"),
        "{ended}"
    );
    // Its slot is free again.
    assert!(ask(&mut ws, "t", open("t", json!({"kinds": [1]})))
        .await
        .is_ok());
    relay.stop().await;
}

async fn nip11_lists_every_bound(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name, |s| set(s, "max_session_secs", json!(90))).await else {
        return;
    };
    let (_, doc) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    let sync = &doc["sync"];
    let defaults = buzz_sync::Config::default();
    for (key, value) in [
        ("max_sync_records", json!(defaults.max_sync_records)),
        (
            "max_records_in_memory",
            json!(defaults.max_records_in_memory),
        ),
        ("frame_size_limit", json!(defaults.frame_size_limit)),
        (
            "max_sessions_per_connection",
            json!(defaults.max_sessions_per_connection),
        ),
        ("idle_timeout_secs", json!(defaults.idle_timeout_secs)),
        (
            "max_sessions_per_pubkey",
            json!(defaults.max_sessions_per_pubkey),
        ),
        (
            "max_records_per_pubkey",
            json!(defaults.max_records_per_pubkey),
        ),
        (
            "records_reserved_per_community",
            json!(defaults.records_reserved_per_community),
        ),
        ("max_session_secs", json!(90)),
    ] {
        assert_eq!(sync[key], value, "{key} in {sync}");
    }
    relay.stop().await;
}
