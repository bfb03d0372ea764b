use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Stream = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// A REQ's stored answer: its events, and the CLOSED text when it ended with one
/// instead of EOSE.
#[derive(Debug)]
pub struct ReqAnswer {
    pub events: Vec<Event>,
    pub closed: Option<String>,
}

/// A NIP-01 WebSocket client for tests, examples and benchmarks.
pub struct WsClient {
    stream: Stream,
    host: String,
    /// The latest `["AUTH", challenge]` the relay sent.
    pub challenge: Option<String>,
    /// Messages read while waiting for something else, in arrival order.
    backlog: std::collections::VecDeque<Value>,
    pub timeout: Duration,
}

impl WsClient {
    /// Connect to `addr`, sending `host` as the `Host` header.
    pub async fn connect(addr: SocketAddr, host: &str) -> anyhow::Result<WsClient> {
        let mut request = format!("ws://{addr}/").into_client_request()?;
        request.headers_mut().insert("host", host.parse()?);
        let (stream, _) = tokio_tungstenite::connect_async(request).await?;
        Ok(WsClient {
            stream,
            host: host.to_owned(),
            challenge: None,
            backlog: Default::default(),
            timeout: Duration::from_secs(10),
        })
    }

    /// This client's end of the TCP connection (to find the relay's end with
    /// [`super::relay_side_socket`]).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match self.stream.get_ref() {
            tokio_tungstenite::MaybeTlsStream::Plain(tcp) => tcp.local_addr().ok(),
            _ => None,
        }
    }

    pub async fn send_raw(&mut self, text: &str) -> anyhow::Result<()> {
        self.stream.send(Message::text(text)).await?;
        Ok(())
    }

    pub async fn send(&mut self, value: &Value) -> anyhow::Result<()> {
        self.send_raw(&value.to_string()).await
    }

    /// Next message from the relay (backlog first); `None` when closed or timed out.
    pub async fn recv(&mut self) -> Option<Value> {
        if let Some(v) = self.backlog.pop_front() {
            return Some(v);
        }
        self.read().await
    }

    /// Next relay message of any type; an `AUTH` challenge is remembered as well.
    async fn read_any(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(self.timeout, self.stream.next())
                .await
                .ok()??
                .ok()?;
            match msg {
                Message::Text(text) => {
                    let value: Value = serde_json::from_str(&text).ok()?;
                    if value[0] == "AUTH" {
                        self.challenge = value[1].as_str().map(str::to_owned);
                    }
                    return Some(value);
                }
                Message::Close(_) => return None,
                _ => continue,
            }
        }
    }

    /// Next relay message other than an `AUTH` challenge.
    async fn read(&mut self) -> Option<Value> {
        loop {
            let value = self.read_any().await?;
            if value[0] != "AUTH" {
                return Some(value);
            }
        }
    }

    /// Wait for the first message satisfying `pred`; others are kept for later.
    pub async fn recv_where(&mut self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        if let Some(pos) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(pos);
        }
        loop {
            let v = self.read().await?;
            if pred(&v) {
                return Some(v);
            }
            self.backlog.push_back(v);
        }
    }

    /// Is the connection closed by the relay (within the timeout)?
    pub async fn is_closed(&mut self) -> bool {
        loop {
            match tokio::time::timeout(self.timeout, self.stream.next()).await {
                Ok(None) | Ok(Some(Err(_))) | Ok(Some(Ok(Message::Close(_)))) => return true,
                Ok(Some(Ok(_))) => continue,
                Err(_) => return false,
            }
        }
    }

    /// Send EVENT and wait for its OK: `(accepted, message)`.
    /// Send every event without waiting, then collect the OKs in any order:
    /// id → (accepted, message). Stops early when the connection drops (the map then
    /// lacks the unanswered ids).
    pub async fn burst(
        &mut self,
        events: &[Event],
    ) -> std::collections::HashMap<String, (bool, String)> {
        let mut oks = std::collections::HashMap::new();
        for event in events {
            if self.send(&json!(["EVENT", event])).await.is_err() {
                break;
            }
        }
        while oks.len() < events.len() {
            let Some(msg) = self.recv().await else { break };
            if msg[0] == "OK" {
                let id = msg[1].as_str().unwrap_or_default().to_owned();
                let accepted = msg[2].as_bool().unwrap_or(false);
                let message = msg[3].as_str().unwrap_or_default().to_owned();
                oks.insert(id, (accepted, message));
            }
        }
        oks
    }

    pub async fn publish(&mut self, event: &Event) -> (bool, String) {
        self.send(&json!(["EVENT", event]))
            .await
            .expect("send EVENT");
        self.wait_ok(&event.id).await
    }

    /// Wait for the OK naming `id`.
    pub async fn wait_ok(&mut self, id: &str) -> (bool, String) {
        let id = id.to_owned();
        let ok = self
            .recv_where(|v| v[0] == "OK" && v[1] == id.as_str())
            .await
            .expect("OK arrives");
        (
            ok[2].as_bool().unwrap_or(false),
            ok[3].as_str().unwrap_or("").to_owned(),
        )
    }

    /// NIP-42: answer the challenge as `keys`; returns the OK `(accepted, message)`.
    pub async fn auth(&mut self, keys: &Keys) -> (bool, String) {
        // The challenge is the first frame; read until it arrives.
        while self.challenge.is_none() {
            match self.read_any().await {
                Some(v) if v[0] == "AUTH" => {}
                Some(v) => self.backlog.push_back(v),
                None => break,
            }
        }
        let challenge = self.challenge.clone().unwrap_or_default();
        let relay = format!("ws://{}/", self.host);
        let event = keys.sign(
            22_242,
            vec![
                vec!["relay".into(), relay],
                vec!["challenge".into(), challenge],
            ],
            "",
            super::now(),
        );
        self.send(&json!(["AUTH", event])).await.expect("send AUTH");
        self.wait_ok(&event.id).await
    }

    /// REQ and collect stored events until EOSE. `Err` carries a CLOSED message.
    /// Use a fresh `sub_id` when an earlier subscription of that id may still be
    /// delivering live events.
    pub async fn req(&mut self, sub_id: &str, filters: Vec<Value>) -> Result<Vec<Event>, String> {
        let answer = self.req_answer(sub_id, filters).await?;
        match answer.closed {
            None => Ok(answer.events),
            Some(text) => Err(text),
        }
    }

    /// REQ and collect stored events until EOSE or CLOSED, keeping both: an anonymous
    /// reader's answer may be events and then `CLOSED auth-required:`. `Err` when the
    /// connection ends (or nothing arrives in time) first.
    pub async fn req_answer(
        &mut self,
        sub_id: &str,
        filters: Vec<Value>,
    ) -> Result<ReqAnswer, String> {
        let mut msg = vec![json!("REQ"), json!(sub_id)];
        msg.extend(filters);
        self.send(&Value::Array(msg)).await.expect("send REQ");
        let mut events = Vec::new();
        let sub = sub_id.to_owned();
        loop {
            let v = self
                .recv_where(|v| {
                    v[1] == sub.as_str() && (v[0] == "EVENT" || v[0] == "EOSE" || v[0] == "CLOSED")
                })
                .await
                .ok_or_else(|| "connection closed before EOSE".to_owned())?;
            match v[0].as_str() {
                Some("EVENT") => {
                    events.push(serde_json::from_value(v[2].clone()).map_err(|e| e.to_string())?)
                }
                Some("EOSE") => {
                    return Ok(ReqAnswer {
                        events,
                        closed: None,
                    })
                }
                _ => {
                    return Ok(ReqAnswer {
                        events,
                        closed: Some(v[2].as_str().unwrap_or("").to_owned()),
                    })
                }
            }
        }
    }

    /// Wait for the relay to close the connection: its close frame's code and reason
    /// (`None`: no close frame within the timeout, or the connection just dropped).
    /// Other messages are skipped.
    pub async fn close_frame(&mut self) -> Option<(u16, String)> {
        loop {
            let next = tokio::time::timeout(self.timeout, self.stream.next()).await;
            match next.ok()?? {
                Ok(Message::Close(frame)) => {
                    return frame.map(|f| (u16::from(f.code), f.reason.to_string()))
                }
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }

    /// NIP-45 COUNT: `Ok` is the answer's object (`{"count": n}`), `Err` a CLOSED
    /// message, or a note that nothing answered within the timeout.
    pub async fn count(&mut self, query_id: &str, filters: Vec<Value>) -> Result<Value, String> {
        let mut msg = vec![json!("COUNT"), json!(query_id)];
        msg.extend(filters);
        self.send(&Value::Array(msg)).await.expect("send COUNT");
        let id = query_id.to_owned();
        let v = self
            .recv_where(|v| v[1] == id.as_str() && (v[0] == "COUNT" || v[0] == "CLOSED"))
            .await
            .ok_or_else(|| "no COUNT or CLOSED answer in time".to_owned())?;
        match v[0].as_str() {
            Some("COUNT") => Ok(v[2].clone()),
            _ => Err(v[2].as_str().unwrap_or("").to_owned()),
        }
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }

    /// Close without reading what the relay sent, but let the relay finish the closing
    /// handshake: unread bytes are drained, so the socket ends with FIN, not a reset
    /// (a reset would discard what the relay had not read yet).
    pub async fn leave(mut self) {
        let _ = self.stream.close(None).await;
        let drained = async { while let Some(Ok(_)) = self.stream.next().await {} };
        let _ = tokio::time::timeout(self.timeout, drained).await;
    }
}
