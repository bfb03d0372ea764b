//! Clients that do not read (issue 10, item 1): a connection's queued output is bounded
//! in bytes, a REQ's stored answer streams under that bound, and a client that makes no
//! progress is closed within the stall limit — memory stays bounded meanwhile.

use buzz_core::both_backends;
use buzz_core::keys::Keys;
use buzz_core::testkit::{now, TestBackend, TestRelay, WsClient};
use serde_json::json;
use std::time::{Duration, Instant};

both_backends!(non_reading_clients_are_closed_and_memory_stays_bounded);

const STALL_SECS: u64 = 2;

/// Resident memory of this process (relay and clients), bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

async fn start(backend: TestBackend, name: &str) -> Option<TestRelay> {
    TestRelay::start_with(
        backend,
        name,
        |s| {
            s.limits.max_outbound_bytes = 256 * 1024;
            s.limits.max_outbound_bytes_total = 1024 * 1024;
            s.limits.outbound_stall_secs = STALL_SECS;
        },
        Vec::new(),
    )
    .await
}

async fn non_reading_clients_are_closed_and_memory_stays_bounded(backend: TestBackend, name: &str) {
    let Some(relay) = start(backend, name).await else {
        return;
    };
    // 60 anonymous notes of 100 KB: each REQ below matches 6 MB.
    let mut writer = relay.ws().await;
    let filler = "m".repeat(100 * 1024);
    for i in 0..60 {
        let event = Keys::generate().sign(1, vec![], &format!("{i} {filler}"), now());
        assert!(writer.publish(&event).await.0, "event {i} stored");
    }
    let before = rss();

    // Six clients send three REQs each for all of it and never read (nor answer pings).
    let mut silent: Vec<WsClient> = Vec::new();
    for _ in 0..6 {
        let mut ws = relay.ws().await;
        for sub in ["a", "b", "c"] {
            ws.send(&json!(["REQ", sub, {"kinds": [1], "limit": 500}]))
                .await
                .expect("send REQ");
        }
        silent.push(ws);
    }
    // One more asks for a small answer that fits the queue, then stops reading: only
    // the heartbeat can tell.
    let mut quiet = relay.ws().await;
    quiet
        .send(&json!(["REQ", "small", {"kinds": [1], "limit": 1}]))
        .await
        .expect("send REQ");
    let sent = Instant::now();

    // Stall limit, plus a heartbeat period, plus the close grace, plus slack for a busy
    // box: every one of them must be gone by then.
    tokio::time::sleep(Duration::from_secs(STALL_SECS * 3 + 4)).await;
    let grown = rss().saturating_sub(before);
    // Without the bounds every REQ queued its whole 6 MB answer (and more as events):
    // 18 × 6 MB ≥ 100 MB. With them a connection holds at most a page plus its queue.
    assert!(
        grown < 80 * 1024 * 1024,
        "relay memory grew by {} MB while clients did not read",
        grown / (1024 * 1024)
    );
    for (i, ws) in silent.iter_mut().enumerate() {
        ws.timeout = Duration::from_secs(5);
        assert!(ws.is_closed().await, "non-reading client {i} was closed");
    }
    quiet.timeout = Duration::from_secs(5);
    assert!(
        quiet.is_closed().await,
        "a client that stopped reading was closed"
    );
    println!("closed within {:?} of the last REQ", sent.elapsed());

    // The relay serves everyone else as before, large answers included.
    let mut reader = relay.ws().await;
    let all = reader
        .req("all", vec![json!({"kinds": [1], "limit": 500})])
        .await
        .expect("a reading client gets the whole answer");
    assert_eq!(all.len(), 60);
    assert!(all.windows(2).all(|w| w[0].created_at >= w[1].created_at));
    relay.stop().await;
}
