//! The two wire surfaces a window query can travel on, used exactly as any Nostr client
//! would: `POST /query` with a NIP-98 `Authorization` header, or a WebSocket `REQ` after
//! NIP-42 `AUTH`. Nothing here knows about windows.

use anyhow::{anyhow, bail, Context};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long one answer may take before the page is abandoned (NIP-CW: clients MUST
/// bound the wait).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Which surface to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// NIP-98 authenticated `POST /query`.
    Http,
    /// NIP-42 authenticated WebSocket `REQ`.
    WebSocket,
}

impl std::str::FromStr for Transport {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Transport> {
        match s {
            "http" => Ok(Transport::Http),
            "ws" | "websocket" => Ok(Transport::WebSocket),
            other => bail!("unknown transport {other:?} (use http or ws)"),
        }
    }
}

/// A connection to one relay over one surface.
pub(crate) enum Wire {
    Http {
        client: reqwest::Client,
        query_url: String,
        keys: Keys,
    },
    WebSocket {
        stream: Box<WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>>,
        next_sub: u64,
    },
}

impl Wire {
    /// `base` is `http(s)://host[:port]` without a trailing slash.
    pub(crate) async fn open(
        base: &str,
        keys: &Keys,
        transport: Transport,
    ) -> anyhow::Result<Wire> {
        match transport {
            Transport::Http => Ok(Wire::Http {
                client: reqwest::Client::new(),
                query_url: format!("{base}/query"),
                keys: keys.clone(),
            }),
            Transport::WebSocket => {
                let ws_url = if let Some(rest) = base.strip_prefix("https://") {
                    format!("wss://{rest}/")
                } else if let Some(rest) = base.strip_prefix("http://") {
                    format!("ws://{rest}/")
                } else {
                    bail!("relay url must start with http:// or https://, got {base}")
                };
                let (stream, _) = tokio_tungstenite::connect_async(ws_url.as_str())
                    .await
                    .with_context(|| format!("connecting to {ws_url}"))?;
                let mut wire = Wire::WebSocket {
                    stream: Box::new(stream),
                    next_sub: 0,
                };
                wire.authenticate(&ws_url, keys).await?;
                Ok(wire)
            }
        }
    }

    /// NIP-42: wait for the challenge, answer it, require `OK true`.
    async fn authenticate(&mut self, relay_url: &str, keys: &Keys) -> anyhow::Result<()> {
        let Wire::WebSocket { stream, .. } = self else {
            return Ok(());
        };
        let challenge = loop {
            let msg = next_json(stream).await?;
            if msg[0] == "AUTH" {
                break msg[1]
                    .as_str()
                    .ok_or_else(|| anyhow!("AUTH challenge is not a string: {msg}"))?
                    .to_owned();
            }
        };
        let auth = keys.sign(
            22_242,
            vec![
                vec!["relay".into(), relay_url.into()],
                vec!["challenge".into(), challenge],
            ],
            "",
            unix_now(),
        );
        stream
            .send(Message::text(json!(["AUTH", auth]).to_string()))
            .await?;
        loop {
            let msg = next_json(stream).await?;
            if msg[0] == "OK" && msg[1] == auth.id.as_str() {
                if msg[2] == true {
                    return Ok(());
                }
                bail!("relay refused AUTH: {}", msg[3]);
            }
        }
    }

    /// One query: the events of the answer, or the relay's refusal as an error.
    pub(crate) async fn query(&mut self, filters: &[Value]) -> anyhow::Result<Vec<Event>> {
        match self {
            Wire::Http {
                client,
                query_url,
                keys,
            } => {
                let body = Value::Array(filters.to_vec()).to_string();
                let nonce = uuid::Uuid::new_v4().simple().to_string();
                let auth = authorization_header(
                    keys,
                    "POST",
                    query_url,
                    Some(body.as_bytes()),
                    unix_now(),
                    Some(&nonce),
                );
                let resp = client
                    .post(query_url.as_str())
                    .header("authorization", auth)
                    .header("content-type", "application/json")
                    .body(body)
                    .timeout(ANSWER_TIMEOUT)
                    .send()
                    .await
                    .with_context(|| format!("POST {query_url}"))?;
                let status = resp.status();
                let text = resp.text().await?;
                if !status.is_success() {
                    bail!("POST /query answered {status}: {text}");
                }
                serde_json::from_str(&text).context("POST /query answer is not an event array")
            }
            Wire::WebSocket { stream, next_sub } => {
                *next_sub += 1;
                let sub = format!("window-{next_sub}");
                let mut req = vec![json!("REQ"), json!(sub)];
                req.extend(filters.iter().cloned());
                stream
                    .send(Message::text(Value::Array(req).to_string()))
                    .await?;
                let mut events = Vec::new();
                // A page is complete only with EOSE; a CLOSED or a dropped connection
                // means the whole batch is discarded.
                loop {
                    let msg = next_json(stream).await?;
                    if msg[1] != sub.as_str() {
                        continue;
                    }
                    match msg[0].as_str() {
                        Some("EVENT") => events.push(
                            serde_json::from_value(msg[2].clone())
                                .context("EVENT does not carry a valid event")?,
                        ),
                        Some("EOSE") => break,
                        Some("CLOSED") => bail!("relay closed the subscription: {}", msg[2]),
                        _ => {}
                    }
                }
                // Window pages are one-shot: free the subscription slot.
                stream
                    .send(Message::text(json!(["CLOSE", sub]).to_string()))
                    .await?;
                Ok(events)
            }
        }
    }
}

/// Next JSON text frame, within the answer timeout.
async fn next_json(
    stream: &mut WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>,
) -> anyhow::Result<Value> {
    loop {
        let frame = tokio::time::timeout(ANSWER_TIMEOUT, stream.next())
            .await
            .map_err(|_| anyhow!("no answer within {ANSWER_TIMEOUT:?}"))?
            .ok_or_else(|| anyhow!("relay closed the connection"))??;
        match frame {
            Message::Text(text) => {
                return serde_json::from_str(&text).context("relay sent invalid JSON")
            }
            Message::Close(_) => bail!("relay closed the connection"),
            _ => continue,
        }
    }
}

/// The relay's NIP-11 document (`GET /` with `Accept: application/nostr+json`).
pub(crate) async fn nip11(base: &str) -> anyhow::Result<Value> {
    let resp = reqwest::Client::new()
        .get(format!("{base}/"))
        .header("accept", "application/nostr+json")
        .timeout(ANSWER_TIMEOUT)
        .send()
        .await
        .with_context(|| format!("GET {base}/"))?;
    let status = resp.status();
    if !status.is_success() {
        bail!("NIP-11 request answered {status}");
    }
    resp.json().await.context("NIP-11 document is not JSON")
}
