//! The bench's client side: a WebSocket that counts the bytes it moves, and the relay's
//! CPU as process CPU minus the client thread's.

use crate::seed::now;
use crate::HOST;
use anyhow::Context;
use buzz_core::testkit::cpu_secs;
use buzz_nostr::keys::Keys;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Process CPU minus this thread's, from `/proc` (clock-tick resolution).
pub(crate) struct CpuClock {
    process: f64,
    thread: f64,
}

impl CpuClock {
    pub(crate) fn start() -> CpuClock {
        CpuClock {
            process: cpu_secs("/proc/self/stat"),
            thread: cpu_secs("/proc/thread-self/stat"),
        }
    }

    /// CPU the relay spent since [`Self::start`]: everything but this (client) thread.
    pub(crate) fn relay(&self) -> Duration {
        let process = cpu_secs("/proc/self/stat") - self.process;
        let thread = cpu_secs("/proc/thread-self/stat") - self.thread;
        Duration::from_secs_f64((process - thread).max(0.0))
    }
}

/// A WebSocket client that counts the text bytes it sends and receives.
pub(crate) struct Counted {
    stream: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    pub(crate) sent: usize,
    pub(crate) received: usize,
}

impl Counted {
    /// Connect and authenticate (NIP-42) as `keys`.
    pub(crate) async fn connect(addr: SocketAddr, keys: &Keys) -> anyhow::Result<Counted> {
        let mut request = format!("ws://{addr}/").into_client_request()?;
        request.headers_mut().insert("host", HOST.parse()?);
        let (stream, _) = tokio_tungstenite::connect_async(request).await?;
        let mut ws = Counted {
            stream,
            sent: 0,
            received: 0,
        };
        let challenge = loop {
            let message = ws.recv().await?;
            if message[0] == "AUTH" {
                break message[1].as_str().unwrap_or_default().to_owned();
            }
        };
        let auth = keys.sign(
            22_242,
            vec![
                vec!["relay".into(), format!("ws://{HOST}/")],
                vec!["challenge".into(), challenge],
            ],
            "",
            now(),
        );
        ws.send(&json!(["AUTH", auth])).await?;
        let ok = ws.recv().await?;
        anyhow::ensure!(ok[0] == "OK" && ok[2] == true, "AUTH refused: {ok}");
        Ok(ws)
    }

    pub(crate) fn reset(&mut self) {
        self.sent = 0;
        self.received = 0;
    }

    pub(crate) async fn send(&mut self, value: &Value) -> anyhow::Result<()> {
        let text = value.to_string();
        self.sent += text.len();
        self.stream.send(Message::text(text)).await?;
        Ok(())
    }

    pub(crate) async fn recv(&mut self) -> anyhow::Result<Value> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), self.stream.next())
                .await
                .context("no message from the relay within 60 s")?
                .context("the relay closed the connection")??;
            if let Message::Text(text) = next {
                self.received += text.len();
                return Ok(serde_json::from_str(&text)?);
            }
        }
    }

    /// The next message for NIP-77 subscription `sub`.
    pub(crate) async fn recv_for(&mut self, sub: &str) -> anyhow::Result<Value> {
        loop {
            let message = self.recv().await?;
            if message[1] == sub {
                return Ok(message);
            }
        }
    }
}
