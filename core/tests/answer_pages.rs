//! A REQ answer as a client receives it: every page leaves as soon as it is read, with no
//! stall between pages (TCP's Nagle and delayed-ACK timers hold a small write after a
//! large one for 40 ms unless the socket says TCP_NODELAY). Both backends. Alone in its
//! binary, so the gaps it measures are the relay's, not other tests' load.

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::time::{Duration, Instant};

both_backends!(pages_of_an_answer_arrive_without_a_gap);

/// Small outbound queues make small pages (a page is a quarter of `max_outbound_bytes`):
/// 30 events of 5 KB are three pages of about 64 KiB.
const OUTBOUND_BYTES: usize = 256 * 1024;
const EVENTS: usize = 30;
/// Generous for loopback (a page is read in about a millisecond); a page held back by a
/// delayed ACK or a missed wake-up costs 40 ms or more.
const MAX_GAP: Duration = Duration::from_millis(30);
const ATTEMPTS: usize = 20;

async fn pages_of_an_answer_arrive_without_a_gap(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start_with(
        backend,
        name,
        |s| s.limits.max_outbound_bytes = OUTBOUND_BYTES,
        Vec::new(),
    )
    .await
    else {
        return;
    };
    let keys = Keys::generate();
    let t = now();
    let body = "x".repeat(5_000);
    let events: Vec<_> = (0..EVENTS)
        .map(|i| {
            keys.sign(
                1,
                vec![tag(&["t", "pages"])],
                &format!("{i} {body}"),
                t - i as i64,
            )
        })
        .collect();
    let mut publisher = relay.ws().await;
    let oks = publisher.burst(&events).await;
    assert!(oks.values().all(|(ok, _)| *ok), "{oks:?}");
    // A live copy of the burst that reaches a subscription after its stored answer is
    // dropped by the relay (`live_stored_race.rs`), so every answer is exactly the burst.
    let mut ws = relay.ws().await;
    // Each attempt's longest gap. Nagle and delayed ACK stall every multi-page answer, so
    // they move the median; a busy CI box stalls an attempt now and then, which moves
    // only the tail. The median is what this test judges.
    let mut worst_per_attempt = Vec::with_capacity(ATTEMPTS);
    for attempt in 0..ATTEMPTS {
        let mut worst = Duration::ZERO;
        let sub = format!("p{attempt}");
        ws.send(&json!(["REQ", sub, {"#t": ["pages"]}]))
            .await
            .expect("send REQ");
        let (mut received, mut last) = (0, None::<Instant>);
        loop {
            let msg = ws.recv().await.expect("the answer arrives");
            let at = Instant::now();
            if let Some(before) = last {
                worst = worst.max(at - before);
                if at - before > Duration::from_millis(10) {
                    eprintln!(
                        "attempt {attempt}: {:?} before frame {received} ({})",
                        at - before,
                        msg[0]
                    );
                }
            }
            last = Some(at);
            assert_eq!(msg[1], sub.as_str(), "attempt {attempt}: {msg}");
            match msg[0].as_str() {
                Some("EVENT") => received += 1,
                Some("EOSE") => break,
                other => panic!("unexpected {other:?}: {msg}"),
            }
        }
        assert_eq!(received, EVENTS, "attempt {attempt}");
        ws.send(&json!(["CLOSE", sub])).await.expect("send CLOSE");
        worst_per_attempt.push(worst);
    }
    worst_per_attempt.sort();
    let median = worst_per_attempt[ATTEMPTS / 2];
    assert!(
        median < MAX_GAP,
        "the median of each answer's longest wait between two frames was {median:?} \
         (all: {worst_per_attempt:?})"
    );
    relay.stop().await;
}
