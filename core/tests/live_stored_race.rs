//! An event committed just before a REQ reads its stored answer is in that answer, and
//! its live copy may still be on its way through the fan-out (it was published after the
//! subscription started listening): the relay must not send it to that subscription a
//! second time. Publishers write concurrently while a reader opens REQ after REQ; no id
//! may reach one subscription twice. Both backends.

use buzz_core::both_backends;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

both_backends!(no_event_reaches_a_subscription_twice);

const PUBLISHERS: usize = 4;
/// REQs the reader opens while the publishers write.
const REQS: usize = 60;
/// Events per burst: a burst is committed in a few groups, so commits land right next
/// to the reader's REQs again and again.
const BURST: usize = 20;
/// How long the reader listens after each EOSE, so live copies queued for the
/// subscription reach it before its CLOSE (the relay serves a client's messages first).
const LISTEN: Duration = Duration::from_millis(3);

async fn no_event_reaches_a_subscription_twice(backend: TestBackend, name: &str) {
    let Some(relay) = TestRelay::start(backend, name).await else {
        return;
    };
    let t = now();
    let done = Arc::new(AtomicBool::new(false));
    let mut publishers = Vec::new();
    for p in 0..PUBLISHERS {
        let mut ws = relay.ws().await;
        let keys = Keys::generate();
        let done = done.clone();
        publishers.push(tokio::spawn(async move {
            let mut sent = 0;
            while !done.load(Ordering::SeqCst) {
                let burst: Vec<_> = (sent..sent + BURST)
                    .map(|i| keys.sign(1, vec![tag(&["t", "race"])], &format!("{p}/{i}"), t))
                    .collect();
                let oks = ws.burst(&burst).await;
                assert!(oks.values().all(|(ok, _)| *ok), "{oks:?}");
                sent += BURST;
            }
            sent
        }));
    }
    let seen = read_repeatedly(relay.ws().await).await;
    done.store(true, Ordering::SeqCst);
    let mut published = 0;
    for publisher in publishers {
        published += publisher.await.expect("publisher");
    }
    assert!(
        published >= 4 * BURST,
        "only {published} events were published"
    );
    let twice: Vec<_> = seen
        .iter()
        .flat_map(|(sub, ids)| {
            ids.iter()
                .filter(|(_, n)| **n > 1)
                .map(move |(id, n)| format!("{sub}: {id} ×{n}"))
        })
        .collect();
    assert!(
        twice.is_empty(),
        "{} ids reached a subscription more than once over {REQS} REQs: {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    relay.stop().await;
}

type Seen = HashMap<String, HashMap<String, usize>>;

/// Open REQ after REQ, counting every id each subscription receives.
async fn read_repeatedly(mut ws: WsClient) -> Seen {
    let mut seen: Seen = HashMap::new();
    for n in 0..REQS {
        let sub = format!("r{n}");
        ws.send(&json!(["REQ", sub, {"#t": ["race"], "limit": 50}]))
            .await
            .expect("send REQ");
        loop {
            let msg = ws.recv().await.expect("the answer arrives");
            if msg[0] == "EOSE" && msg[1] == sub.as_str() {
                break;
            }
            count(&mut seen, &msg);
        }
        let until = tokio::time::Instant::now() + LISTEN;
        while let Ok(Some(msg)) = tokio::time::timeout_at(until, ws.recv()).await {
            count(&mut seen, &msg);
        }
        ws.send(&json!(["CLOSE", sub])).await.expect("send CLOSE");
    }
    seen
}

fn count(seen: &mut Seen, msg: &serde_json::Value) {
    assert_ne!(msg[0], "CLOSED", "{msg}");
    if msg[0] != "EVENT" {
        return;
    }
    let sub = msg[1].as_str().unwrap_or_default().to_owned();
    let id = msg[2]["id"].as_str().unwrap_or_default().to_owned();
    *seen.entry(sub).or_default().entry(id).or_default() += 1;
}
