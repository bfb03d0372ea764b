use super::{LiveBus, LIVE_BUFFER};
use crate::error::Reason;
use crate::event::{Event, StoredEvent};
use futures_util::StreamExt;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// Fan-out through Redis pub/sub: publishing goes to Redis only, and one task per process
/// relays what Redis delivers into the local broadcast, so every process (this one
/// included) sees each event exactly once.
pub struct RedisBus {
    conn: redis::aio::ConnectionManager,
    channel: String,
    local: broadcast::Sender<Arc<StoredEvent>>,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    community_id: i64,
    channel: Option<String>,
    received_at: i64,
    event: Event,
}

impl RedisBus {
    /// Connect, and start the task that listens on `<prefix>:live`.
    pub async fn start(client: redis::Client, prefix: &str) -> anyhow::Result<RedisBus> {
        let conn = redis::aio::ConnectionManager::new(client.clone()).await?;
        let channel = format!("{prefix}:live");
        let (local, _) = broadcast::channel(LIVE_BUFFER);
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(&channel).await?;
        tokio::spawn(listen(client, pubsub, channel.clone(), local.clone()));
        Ok(RedisBus {
            conn,
            channel,
            local,
        })
    }
}

async fn listen(
    client: redis::Client,
    mut pubsub: redis::aio::PubSub,
    channel: String,
    local: broadcast::Sender<Arc<StoredEvent>>,
) {
    loop {
        {
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                let payload: Vec<u8> = match msg.get_payload() {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(error = %e, "unreadable live message from redis");
                        continue;
                    }
                };
                match serde_json::from_slice::<Wire>(&payload) {
                    Ok(w) => {
                        let _ = local.send(Arc::new(StoredEvent {
                            event: w.event,
                            channel: w.channel,
                            community_id: w.community_id,
                            received_at: w.received_at,
                        }));
                    }
                    Err(e) => tracing::warn!(error = %e, "malformed live message from redis"),
                }
            }
        }
        tracing::warn!("redis live subscription ended; reconnecting");
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            match client.get_async_pubsub().await {
                Ok(mut p) => {
                    if p.subscribe(&channel).await.is_ok() {
                        pubsub = p;
                        break;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "redis reconnect failed"),
            }
        }
    }
}

#[async_trait::async_trait]
impl LiveBus for RedisBus {
    async fn publish(&self, event: Arc<StoredEvent>) -> Result<(), Reason> {
        let wire = Wire {
            community_id: event.community_id,
            channel: event.channel.clone(),
            received_at: event.received_at,
            event: event.event.clone(),
        };
        let payload = serde_json::to_vec(&wire).map_err(|e| Reason::Internal(e.into()))?;
        let mut conn = self.conn.clone();
        conn.publish::<_, _, ()>(&self.channel, payload)
            .await
            .map_err(|e| {
                Reason::Internal(anyhow::Error::new(e).context("publishing live event to redis"))
            })
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.local.subscribe()
    }
}
