//! A connection that keeps sending messages the relay refuses is read more slowly once
//! it is past `limits.refusals_per_sec` (after a burst of five seconds' worth): every
//! message it sent is still answered, in order, it is told once with
//! `NOTICE rate-limited:`, its live events keep arriving meanwhile, and another
//! connection is served as if nothing happened. Refused EVENTs (their `OK false`, written
//! by the connection's EVENT task) count as well. NIP-11 advertises the bound. SQLite: the
//! bound is the connection's, not the storage's.

use buzz_core::testkit::{now, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PER_SEC: u32 = 20;
/// Refusals a quiet connection may spend at once (five seconds' worth).
const BURST: u32 = 5 * PER_SEC;
/// Refusals sent: `OVER` past the burst, so the last is answered no sooner than
/// `OVER / PER_SEC` seconds after the first.
const OVER: u32 = 30;

async fn relay(name: &str) -> TestRelay {
    TestRelay::start_with(
        TestBackend::Sqlite,
        name,
        |s| s.limits.refusals_per_sec = PER_SEC,
        Vec::new(),
    )
    .await
    .expect("SQLite is always there")
}

/// A COUNT the relay refuses (`kinds` must be a list of numbers).
fn refused_count(n: u32) -> Value {
    json!(["COUNT", format!("c{n}"), {"kinds": "nine"}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_past_the_budget_are_answered_later_and_nothing_is_dropped() {
    let relay = relay("refusals_past_the_budget").await;
    let mut flooder = relay.ws().await;
    flooder
        .send(&json!(["REQ", "live", {"kinds": [1], "since": now()}]))
        .await
        .expect("REQ");
    assert_eq!(flooder.recv().await.expect("EOSE"), json!(["EOSE", "live"]));

    let started = Instant::now();
    for n in 0..BURST + OVER {
        flooder.send(&refused_count(n)).await.expect("send");
    }
    // Until the flood's first throttled message comes back the flooder is past its burst.
    let mut answered = Vec::new();
    let mut notices = Vec::new();
    let mut live = 0;
    let mut bystander_answered_at = None;
    let mut bystander = None;
    while answered.len() < (BURST + OVER) as usize {
        let msg = flooder.recv().await.unwrap_or_else(|| {
            panic!(
                "the connection ended or went silent after {} answers",
                answered.len()
            )
        });
        match msg[0].as_str() {
            Some("CLOSED") => {
                let text = msg[2].as_str().unwrap_or_default();
                assert!(text.starts_with("invalid:"), "{msg}");
                answered.push(msg[1].as_str().unwrap_or_default().to_owned());
            }
            Some("NOTICE") => {
                notices.push(msg[1].as_str().unwrap_or_default().to_owned());
                // Throttled now: another connection is served at once, and an event
                // published meanwhile reaches the throttled connection's subscription.
                if bystander.is_none() {
                    let mut other = relay.ws().await;
                    let asked = Instant::now();
                    let count = other.count("b", vec![json!({"kinds": [1]})]).await;
                    assert!(count.is_ok(), "{count:?}");
                    bystander_answered_at = Some(asked.elapsed());
                    let note = Keys::generate().sign(1, vec![], "while throttled", now());
                    let (accepted, message) = other.publish(&note).await;
                    assert!(accepted, "{message}");
                    bystander = Some(other);
                }
            }
            Some("EVENT") => live += 1,
            _ => panic!("unexpected {msg}"),
        }
    }
    let elapsed = started.elapsed();

    let expected: Vec<String> = (0..BURST + OVER).map(|n| format!("c{n}")).collect();
    assert_eq!(
        answered, expected,
        "every refused message answered, in order"
    );
    assert_eq!(notices.len(), 1, "told once: {notices:?}");
    assert!(
        notices[0].starts_with("rate-limited:") && notices[0].contains("limits.refusals_per_sec"),
        "{notices:?}"
    );
    let floor = Duration::from_secs(u64::from(OVER)) / PER_SEC;
    assert!(
        elapsed >= floor.mul_f32(0.9),
        "{OVER} refusals past the burst answered in {elapsed:?}, under {floor:?}"
    );
    let waited = bystander_answered_at.expect("the flooder was throttled");
    assert!(
        waited < floor,
        "another connection waited {waited:?} while one was throttled"
    );
    // The event published while the flooder was throttled reached it.
    if live == 0 {
        let msg = flooder.recv().await.expect("live event");
        assert_eq!(msg[0], "EVENT", "{msg}");
    }
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_events_count_against_the_budget() {
    let relay = relay("refused_events_count").await;
    let mut ws: WsClient = relay.ws().await;
    let keys = Keys::generate();
    let mut ids = Vec::new();
    // The connection reads EVENTs while it has in-flight slots, so it may be that many
    // ahead of their OKs (and of their charges).
    let in_flight = relay.settings.limits.max_inflight_events as u32;
    for n in 0..BURST + in_flight + OVER {
        let mut event =
            serde_json::to_value(keys.sign(1, vec![], &format!("{n}"), now())).expect("event JSON");
        // A signature of the right shape that does not verify.
        event["sig"] = json!("00".repeat(64));
        ids.push(event["id"].as_str().unwrap_or_default().to_owned());
        ws.send(&json!(["EVENT", event])).await.expect("send");
    }
    let started = Instant::now();
    let mut oks = 0;
    let mut notice = None;
    while oks < ids.len() {
        let msg = ws.recv().await.expect("an answer for every EVENT");
        match msg[0].as_str() {
            Some("OK") => {
                assert_eq!(msg[2], false, "{msg}");
                oks += 1;
            }
            Some("NOTICE") => notice = msg[1].as_str().map(str::to_owned),
            _ => panic!("unexpected {msg}"),
        }
    }
    let notice = notice.expect("told it is rate-limited");
    assert!(notice.starts_with("rate-limited:"), "{notice}");
    let floor = Duration::from_secs(u64::from(OVER)) / PER_SEC;
    assert!(
        started.elapsed() >= floor.mul_f32(0.5),
        "refused EVENTs were not slowed: {:?}",
        started.elapsed()
    );
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip11_advertises_the_refusal_bound_and_the_read_deadline() {
    let relay = relay("refusals_nip11").await;
    let (status, info) = relay
        .http()
        .get("/", &[("accept", "application/nostr+json")])
        .await;
    assert_eq!(status, 200);
    let limitation = &info["limitation"];
    assert_eq!(limitation["refusals_per_sec"], PER_SEC, "{limitation}");
    // On SQLite the read deadline is the relay's own (storage.read_timeout_ms).
    assert_eq!(
        limitation["read_timeout_ms"], relay.settings.storage.read_timeout_ms,
        "{limitation}"
    );
    relay.stop().await;
}
