//! A TCP proxy that can stall: while frozen it accepts connections and keeps every
//! socket open but passes no bytes in either direction (what a hung middlebox or a
//! network partition looks like to the relay); thawed, it forwards again, the held
//! bytes included.

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub(crate) struct FreezeProxy {
    pub(crate) addr: SocketAddr,
    /// `true` = frozen.
    gate: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl FreezeProxy {
    /// Listen on 127.0.0.1:0 and forward each connection to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr) -> FreezeProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let (gate, _) = watch::channel(false);
        let gates = gate.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, gates.subscribe()));
                tokio::spawn(pump(server_read, client_write, gates.subscribe()));
            }
        });
        FreezeProxy { addr, gate, accept }
    }

    /// `redis://` URL of the proxy.
    pub(crate) fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Stop passing bytes; close nothing.
    pub(crate) fn freeze(&self) {
        self.gate.send_replace(true);
    }

    /// Pass bytes again.
    pub(crate) fn thaw(&self) {
        self.gate.send_replace(false);
    }
}

impl Drop for FreezeProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copy `from` → `to`, holding each chunk while the gate is frozen.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut gate: watch::Receiver<bool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if gate.wait_for(|frozen| !*frozen).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The TCP address of a `redis://host:port` URL.
pub(crate) async fn redis_addr(url: &str) -> SocketAddr {
    let rest = url
        .strip_prefix("redis://")
        .expect("BUZZ_TEST_REDIS_URL starts with redis://");
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    tokio::net::lookup_host(host_port)
        .await
        .expect("redis host resolves")
        .next()
        .expect("redis address")
}
