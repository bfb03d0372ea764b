//! Each client connection costs the relay one open file, its socket (`http/socket.rs`):
//! the handle the relay keeps to abort a connection is the socket's number and identity,
//! not a duplicate descriptor, so an open-file limit of 20,000 holds 10,000 clients with
//! room to spare (issue 45).

use buzz_core::testkit::{TestBackend, TestRelay};

const CONNECTIONS: usize = 200;

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_costs_the_relay_one_descriptor() {
    let Some(relay) = TestRelay::start(TestBackend::Sqlite, "descriptors").await else {
        return;
    };
    // Warm up: the relay's pidfd, pools and worker threads are opened once.
    let first = relay.ws().await;
    first.close().await;
    let before = open_files();
    let mut clients = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        clients.push(relay.ws().await);
    }
    // Every client's socket is answered (the relay accepted it) before counting.
    for ws in &mut clients {
        ws.send_raw(r#"["REQ","s",{"limit":0}]"#)
            .await
            .expect("REQ");
        ws.recv().await.expect("EOSE");
    }
    let grown = open_files() - before;
    // This process holds both ends: the test's client socket and the relay's one.
    let per_connection = grown as f64 / CONNECTIONS as f64;
    assert!(
        per_connection < 2.2,
        "{grown} files for {CONNECTIONS} connections ({per_connection:.2} each, client end included)"
    );
    for ws in clients {
        ws.close().await;
    }
    relay.stop().await;
}
