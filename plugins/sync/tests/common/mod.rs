//! Shared by the sync suites: a relay with the plugin, channels and messages made through
//! the wire, and a NIP-77 client built on the `negentropy` crate as an initiator.
#![allow(dead_code)]

use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
#[allow(unused_imports)] // each suite uses its own subset
pub(crate) use buzz_core::testkit::{authed, create_channel, disabled::set_enabled, publish_kind};
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use negentropy::{Id, Negentropy, NegentropyStorageVector};
use serde_json::{json, Value};
use std::collections::HashSet;

/// A relay with the sync plugin built (enabled unless `tweak` says otherwise).
pub(crate) async fn relay(
    backend: TestBackend,
    name: &str,
    tweak: impl FnOnce(&mut Settings),
) -> Option<TestRelay> {
    TestRelay::start_with(
        backend,
        name,
        tweak,
        vec![PluginEntry::of::<buzz_sync::SyncPlugin>()],
    )
    .await
}

/// Set `[plugins.sync] key = value`.
pub(crate) fn set(settings: &mut Settings, key: &str, value: Value) {
    settings
        .plugins
        .entry("sync".into())
        .or_default()
        .options
        .insert(key.into(), value);
}

/// `n` kind-9 messages in `channel`, through ingest in bursts (within the connection's
/// in-flight bound), spread over the last ten minutes.
pub(crate) async fn post(ws: &mut WsClient, keys: &Keys, channel: &str, n: usize) -> Vec<Event> {
    let t = now();
    let events: Vec<Event> = (0..n)
        .map(|i| {
            keys.sign(
                9,
                vec![tag(&["h", channel])],
                &format!("message {i} {}", uuid::Uuid::new_v4()),
                t - (i % 600) as i64,
            )
        })
        .collect();
    for chunk in events.chunks(50) {
        let oks = ws.burst(chunk).await;
        for event in chunk {
            let (accepted, message) = oks.get(&event.id).cloned().unwrap_or_default();
            assert!(accepted, "message refused: {message}");
        }
    }
    events
}

/// A record of the client's own set.
pub(crate) fn record(event: &Event) -> (u64, String) {
    (event.created_at as u64, event.id.clone())
}

/// What one reconciliation told the client.
#[derive(Debug, Default)]
pub(crate) struct Reconciled {
    /// Ids the client has and the relay lacks.
    pub(crate) have: HashSet<String>,
    /// Ids the relay has and the client lacks.
    pub(crate) need: HashSet<String>,
    /// NEG-MSG round trips.
    pub(crate) rounds: usize,
    /// Every relay NEG-MSG, as sent (hex).
    pub(crate) answers: Vec<String>,
}

/// The client's initial message for `records`.
pub(crate) fn initiator(
    records: &[(u64, String)],
    frame: u64,
) -> (Negentropy<'static, NegentropyStorageVector>, String) {
    let mut storage = NegentropyStorageVector::with_capacity(records.len());
    for (at, id) in records {
        let bytes: [u8; 32] = hex::decode(id)
            .expect("hex id")
            .try_into()
            .expect("32 bytes");
        storage
            .insert(*at, Id::from_byte_array(bytes))
            .expect("insert");
    }
    storage.seal().expect("seal");
    let mut engine = Negentropy::owned(storage, frame).expect("engine");
    let first = engine.initiate().expect("initiate");
    (engine, hex::encode(first))
}

/// Run NIP-77 to the end for `filter` holding `records`: `Err` is the relay's NEG-ERR
/// reason.
pub(crate) async fn reconcile(
    ws: &mut WsClient,
    sub: &str,
    filter: Value,
    records: &[(u64, String)],
) -> Result<Reconciled, String> {
    let (mut engine, first) = initiator(records, 0);
    ws.send(&json!(["NEG-OPEN", sub, filter, first]))
        .await
        .expect("send NEG-OPEN");
    let mut out = Reconciled::default();
    loop {
        let answer = next_answer(ws, sub).await?;
        out.rounds += 1;
        out.answers.push(answer.clone());
        let bytes = hex::decode(&answer).expect("relay sends hex");
        let (mut have, mut need) = (Vec::new(), Vec::new());
        let next = engine
            .reconcile_with_ids(&bytes, &mut have, &mut need)
            .expect("the relay's message is valid negentropy");
        out.have
            .extend(have.iter().map(|id| hex::encode(id.as_bytes())));
        out.need
            .extend(need.iter().map(|id| hex::encode(id.as_bytes())));
        match next {
            Some(next) => ws
                .send(&json!(["NEG-MSG", sub, hex::encode(next)]))
                .await
                .expect("send NEG-MSG"),
            None => break,
        }
    }
    ws.send(&json!(["NEG-CLOSE", sub]))
        .await
        .expect("send NEG-CLOSE");
    Ok(out)
}

/// The relay's next NEG-MSG payload for `sub`, or its NEG-ERR reason.
pub(crate) async fn next_answer(ws: &mut WsClient, sub: &str) -> Result<String, String> {
    let sub = sub.to_owned();
    let v = ws
        .recv_where(|v| {
            (v[0] == "NEG-MSG" || v[0] == "NEG-ERR") && v[1] == sub.as_str() || v[0] == "NOTICE"
        })
        .await
        .ok_or_else(|| "no answer in time".to_owned())?;
    match v[0].as_str() {
        Some("NEG-MSG") => Ok(v[2].as_str().unwrap_or_default().to_owned()),
        Some("NEG-ERR") => Err(v[2].as_str().unwrap_or_default().to_owned()),
        _ => Err(format!("NOTICE instead: {v}")),
    }
}

/// Send `message` and return the relay's answer for `sub` (NEG-MSG text or NEG-ERR
/// reason).
pub(crate) async fn ask(ws: &mut WsClient, sub: &str, message: Value) -> Result<String, String> {
    ws.send(&message).await.expect("send");
    next_answer(ws, sub).await
}

/// The connection still serves: a REQ is answered.
pub(crate) async fn still_serves(ws: &mut WsClient) {
    let sub = format!("alive-{}", uuid::Uuid::new_v4());
    ws.req(&sub, vec![json!({"kinds": [0], "limit": 1})])
        .await
        .expect("REQ answered after the bad message");
}
