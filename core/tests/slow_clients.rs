//! Clients that do not read (issue 10, item 1): a connection's queued output is bounded
//! in bytes, a REQ's stored answer streams under that bound, and a client that makes no
//! progress is closed within the stall limit — memory stays bounded meanwhile.

use buzz_core::both_backends;
use buzz_core::testkit::{now, relay_side_socket, TestBackend, TestRelay, WsClient};
use buzz_nostr::keys::Keys;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

both_backends!(
    non_reading_clients_are_closed_and_memory_stays_bounded,
    the_relay_lets_go_of_a_non_reading_socket,
    a_query_answer_nobody_reads_is_let_go
);

const STALL_SECS: u64 = 2;

/// One test at a time: the memory test reads this process's RSS, which a neighbour's
/// 8 MB answers would blur.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _serial = SERIAL.lock().await;
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

    // Twenty clients send three REQs each for all of it and never read (nor answer
    // pings).
    let mut silent: Vec<WsClient> = Vec::new();
    for _ in 0..20 {
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
    println!("relay memory grew by {} MB", grown / (1024 * 1024));
    // Without the bounds every REQ queued its whole 6 MB answer (and more as events):
    // 60 × 6 MB. With them a connection holds at most a page plus its queue and the
    // message the socket is writing; every byte stays counted until the HTTP layer has
    // taken it for the socket (a second queue there, 32 messages deep per connection,
    // held 20 × 64 × 100 KB before). SQLite's page cache of the readers is most of
    // what remains.
    assert!(
        grown < 48 * 1024 * 1024,
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

/// A client that stops reading keeps its socket full; the WebSocket close frame can
/// never reach it. The relay must still let go of the connection — its end of the
/// socket and the bytes queued in it — within the stall limit, whatever state the
/// WebSocket layer is in.
async fn the_relay_lets_go_of_a_non_reading_socket(backend: TestBackend, name: &str) {
    let _serial = SERIAL.lock().await;
    let Some(relay) = start(backend, name).await else {
        return;
    };
    // 40 notes of 200 KB: one REQ is 8 MB, far more than the kernel's socket buffers.
    let mut writer = relay.ws().await;
    let filler = "s".repeat(200 * 1024);
    for i in 0..40 {
        let event = Keys::generate().sign(1, vec![], &format!("{i} {filler}"), now());
        assert!(writer.publish(&event).await.0, "event {i} stored");
    }
    let mut silent: Vec<WsClient> = Vec::new();
    for _ in 0..8 {
        let mut ws = relay.ws().await;
        for sub in ["a", "b", "c"] {
            ws.send(&json!(["REQ", sub, {"kinds": [1], "limit": 500}]))
                .await
                .expect("send REQ");
        }
        silent.push(ws);
    }
    let peers: Vec<_> = silent
        .iter()
        .map(|ws| ws.local_addr().expect("client address"))
        .collect();
    // The sockets fill up while the relay writes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let filled = peers
        .iter()
        .filter_map(|peer| relay_side_socket(relay.addr, *peer))
        .filter(|s| s.tx_queue > 0)
        .count();
    assert!(
        filled > 0,
        "the relay's side of the silent sockets holds queued bytes"
    );

    // Stall limit, heartbeat period, close grace and slack: the relay's end of every
    // silent socket must be gone (or closed and empty) by then, while the clients
    // still have not read a byte.
    let deadline = Instant::now() + Duration::from_secs(STALL_SECS * 3 + 6);
    let held = loop {
        let held: Vec<_> = peers
            .iter()
            .filter_map(|peer| relay_side_socket(relay.addr, *peer).map(|s| (peer, s)))
            .filter(|(_, s)| s.is_held())
            .collect();
        if held.is_empty() || Instant::now() > deadline {
            break held;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        held.is_empty(),
        "the relay still holds {} of {} silent sockets: {held:?}",
        held.len(),
        peers.len()
    );
    drop(silent);

    // Everyone else is served as before.
    let mut reader = relay.ws().await;
    let all = reader
        .req("all", vec![json!({"kinds": [1], "limit": 500})])
        .await
        .expect("a reading client gets the whole answer");
    assert_eq!(all.len(), 40);
    relay.stop().await;
}

/// `POST /query` answers stream too (a page at a time within the outbound budget): a
/// client that asks for 8 MB and never reads the response is let go after the stall
/// limit, and one that reads gets the whole array.
async fn a_query_answer_nobody_reads_is_let_go(backend: TestBackend, name: &str) {
    let _serial = SERIAL.lock().await;
    let Some(relay) = start(backend, name).await else {
        return;
    };
    let mut writer = relay.ws().await;
    let filler = "q".repeat(200 * 1024);
    for i in 0..40 {
        let event = Keys::generate().sign(1, vec![], &format!("{i} {filler}"), now());
        assert!(writer.publish(&event).await.0, "event {i} stored");
    }
    let keys = Keys::generate();
    let body = json!([{"kinds": [1], "limit": 500}]).to_string();
    let mut silent = Vec::new();
    for _ in 0..4 {
        let auth = buzz_nostr::nip98::authorization_header(
            &keys,
            "POST",
            &relay.http().public_url("/query"),
            Some(body.as_bytes()),
            now(),
            Some(&uuid::Uuid::new_v4().simple().to_string()),
        );
        let mut stream = tokio::net::TcpStream::connect(relay.addr)
            .await
            .expect("connect");
        let request = format!(
            "POST /query HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nAuthorization: {auth}\r\n\r\n{body}",
            relay.host(),
            body.len()
        );
        stream.write_all(request.as_bytes()).await.expect("request");
        silent.push(stream);
    }
    let peers: Vec<_> = silent
        .iter()
        .map(|s| s.local_addr().expect("client address"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(STALL_SECS * 3 + 6);
    let held = loop {
        let held: Vec<_> = peers
            .iter()
            .filter_map(|peer| relay_side_socket(relay.addr, *peer))
            .filter(|s| s.is_held())
            .collect();
        if held.is_empty() || Instant::now() > deadline {
            break held;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        held.is_empty(),
        "the relay still holds unread answers: {held:?}"
    );
    drop(silent);

    let (status, answer) = relay
        .http()
        .post_signed(&keys, "/query", body.as_bytes())
        .await;
    assert_eq!(status, 200);
    let events = answer.as_array().expect("a JSON array of events");
    assert_eq!(events.len(), 40, "every page of the answer arrives");
    let mut reader = relay.ws().await;
    let over_ws = reader
        .req("all", vec![json!({"kinds": [1], "limit": 500})])
        .await
        .expect("answer");
    let http_ids: Vec<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
    let ws_ids: Vec<&str> = over_ws.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        http_ids, ws_ids,
        "the same events in the same order as over WebSocket"
    );
    relay.stop().await;
}
