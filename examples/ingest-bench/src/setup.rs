//! Untimed preparation of channel workloads.

use crate::inprocess::Ws;
use buzz_core::testkit::now;
use buzz_nostr::keys::Keys;

use anyhow::{bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// Next JSON message from the relay.
async fn next(ws: &mut Ws) -> anyhow::Result<Value> {
    loop {
        match ws.next().await.context("relay closed during setup")?? {
            Message::Text(text) => return Ok(serde_json::from_str(&text)?),
            Message::Close(_) => bail!("relay closed during setup"),
            _ => continue,
        }
    }
}

/// Send `event` and require `OK true`.
async fn publish(ws: &mut Ws, event: &buzz_nostr::event::Event, what: &str) -> anyhow::Result<()> {
    ws.send(Message::text(json!(["EVENT", event]).to_string()))
        .await?;
    loop {
        let v = next(ws).await?;
        if v[0] == "OK" && v[1] == event.id.as_str() {
            if v[2] == true {
                return Ok(());
            }
            bail!("{what} refused: {}", v[3]);
        }
    }
}

/// NIP-42: answer the connection's challenge.
pub(super) async fn authenticate(ws: &mut Ws, keys: &Keys, relay_url: &str) -> anyhow::Result<()> {
    let challenge = loop {
        let v = next(ws).await?;
        if v[0] == "AUTH" {
            break v[1].as_str().unwrap_or_default().to_owned();
        }
    };
    let auth = keys.sign(
        22_242,
        vec![
            vec!["relay".into(), relay_url.into()],
            vec!["challenge".into(), challenge],
        ],
        "",
        now(),
    );
    ws.send(Message::text(json!(["AUTH", auth]).to_string()))
        .await?;
    loop {
        let v = next(ws).await?;
        if v[0] == "OK" && v[1] == auth.id.as_str() {
            if v[2] == true {
                return Ok(());
            }
            bail!("AUTH refused: {}", v[3]);
        }
    }
}

/// Create the open channel every publisher posts into.
pub(super) async fn create_channel(ws: &mut Ws, keys: &Keys, channel: &str) -> anyhow::Result<()> {
    let create = keys.sign(
        9_007,
        vec![
            vec!["h".into(), channel.into()],
            vec!["name".into(), "bench".into()],
        ],
        "",
        now(),
    );
    publish(ws, &create, "channel creation").await
}
