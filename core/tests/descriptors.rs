//! A WebSocket connection costs the relay one file descriptor (`http/socket.rs`): its
//! handle on the socket, which lets it reset a client that does not read, is the socket's
//! number and identity rather than a duplicate descriptor. With a duplicate, a process
//! under a hard limit of 20,000 descriptors could not hold 10,000 connections.
//! (`slow_clients.rs` checks that the handle still lets go of a non-reading socket.)

use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;

/// Descriptors this process has open (the relay and its clients alike).
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_subscribed_connection_costs_one_descriptor() {
    let Some(relay) = TestRelay::start(TestBackend::Sqlite, "descriptors").await else {
        return;
    };
    // Whatever the relay opens once (its pidfd, pooled connections) is open by now.
    let mut warm = relay.ws().await;
    assert!(warm.auth(&Keys::generate()).await.0);
    warm.req("w", vec![json!({"kinds": [1], "limit": 1})])
        .await
        .expect("warm-up REQ");

    const N: usize = 50;
    let before = open_descriptors();
    let mut clients = Vec::new();
    for i in 0..N {
        let mut client = relay.ws().await;
        assert!(client.auth(&Keys::generate()).await.0, "AUTH {i}");
        client
            .req("s", vec![json!({"kinds": [1], "limit": 0})])
            .await
            .expect("REQ");
        clients.push(client);
    }
    let opened = open_descriptors() - before;
    // Each connection's two ends are in this process: the client's socket and the
    // relay's. A third per connection (a duplicate) would make it 150.
    assert!(
        opened <= 2 * N + 10,
        "{opened} descriptors for {N} connections (client and relay ends)"
    );
    drop(clients);
}
