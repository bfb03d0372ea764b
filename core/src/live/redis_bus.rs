use super::{LiveBus, LIVE_BUFFER};
use crate::error::Reason;
use crate::redis_link::RedisLink;
use crate::stored::StoredEvent;
use buzz_nostr::event::Event;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// Fan-out through Redis pub/sub: publishing goes to Redis only, and one task per process
/// relays what Redis delivers into the local broadcast, so every process (this one
/// included) sees each event exactly once.
///
/// Every Redis operation has the link's deadline: publishing, subscribing and a PING on
/// the subscription every `deadline` (a subscription that stops answering is replaced,
/// since a stalled socket never reports an error by itself). While either side is down,
/// [`LiveBus::ready`] refuses, so writes fail closed before they commit.
pub struct RedisBus {
    link: Arc<RedisLink>,
    channel: String,
    local: broadcast::Sender<Arc<StoredEvent>>,
    /// Whether the subscription task is currently subscribed and answering.
    listening: Arc<AtomicBool>,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    community_id: i64,
    channel: Option<String>,
    received_at: i64,
    event: Event,
}

/// What clients see while live delivery through Redis is down.
const WHAT: &str = "live delivery";

impl RedisBus {
    /// Subscribe to `<prefix>:live` (within the link's deadline), and start the task that
    /// keeps listening, resubscribing by itself after a failure.
    pub async fn start(link: Arc<RedisLink>, prefix: &str) -> anyhow::Result<RedisBus> {
        let channel = format!("{prefix}:live");
        let (local, _) = broadcast::channel(LIVE_BUFFER);
        let pubsub = subscribe(link.client(), &channel, link.deadline()).await?;
        let listening = Arc::new(AtomicBool::new(true));
        tokio::spawn(listen(
            link.clone(),
            pubsub,
            channel.clone(),
            local.clone(),
            listening.clone(),
        ));
        Ok(RedisBus {
            link,
            channel,
            local,
            listening,
        })
    }
}

/// A pub/sub connection subscribed to `channel`, or why not within `deadline`.
async fn subscribe(
    client: &redis::Client,
    channel: &str,
    deadline: Duration,
) -> anyhow::Result<redis::aio::PubSub> {
    let attempt = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    match tokio::time::timeout(deadline, attempt).await {
        Ok(subscribed) => Ok(subscribed?),
        Err(_) => anyhow::bail!("no answer within {deadline:?}"),
    }
}

async fn listen(
    link: Arc<RedisLink>,
    mut pubsub: redis::aio::PubSub,
    channel: String,
    local: broadcast::Sender<Arc<StoredEvent>>,
    listening: Arc<AtomicBool>,
) {
    let deadline = link.deadline();
    loop {
        let Some(why) = relay_messages(pubsub, &local, &listening, deadline).await else {
            return; // the bus is gone
        };
        listening.store(false, Ordering::Relaxed);
        tracing::warn!(%why, "redis live subscription lost; resubscribing");
        loop {
            tokio::time::sleep(RESUBSCRIBE_PAUSE).await;
            if Arc::strong_count(&listening) == 1 {
                return; // the bus is gone
            }
            match subscribe(link.client(), &channel, deadline).await {
                Ok(p) => {
                    pubsub = p;
                    listening.store(true, Ordering::Relaxed);
                    tracing::info!("redis live subscription restored");
                    break;
                }
                Err(e) => tracing::warn!(error = %e, "redis live resubscription failed"),
            }
        }
    }
}

/// Pause between resubscription attempts.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(250);

/// Forward messages into `local` until the subscription ends or stops answering a PING
/// within `deadline`; returns why it stopped, or `None` once the bus was dropped.
async fn relay_messages(
    pubsub: redis::aio::PubSub,
    local: &broadcast::Sender<Arc<StoredEvent>>,
    listening: &Arc<AtomicBool>,
    deadline: Duration,
) -> Option<String> {
    let (mut sink, mut messages) = pubsub.split();
    let mut heartbeat = tokio::time::interval(deadline);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = messages.next() => {
                let Some(msg) = msg else { return Some("subscription closed".to_owned()) };
                deliver(&msg, local);
            }
            _ = heartbeat.tick() => {
                if Arc::strong_count(listening) == 1 {
                    return None;
                }
                match tokio::time::timeout(deadline, sink.ping::<redis::Value>()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Some(format!("ping failed: {e}")),
                    Err(_) => return Some(format!("no answer to ping within {deadline:?}")),
                }
            }
        }
    }
}

fn deliver(msg: &redis::Msg, local: &broadcast::Sender<Arc<StoredEvent>>) {
    let payload: Vec<u8> = match msg.get_payload() {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "unreadable live message from redis");
            return;
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
        let mut publish = redis::cmd("PUBLISH");
        publish.arg(&self.channel).arg(payload);
        self.link.run::<()>(WHAT, &publish).await
    }

    async fn ready(&self) -> Result<(), Reason> {
        if !self.listening.load(Ordering::Relaxed) {
            return Err(Reason::Unavailable(format!(
                "{WHAT} unavailable, try again"
            )));
        }
        if self.link.is_healthy() {
            return Ok(());
        }
        // The last operation failed: probe before letting a write commit.
        self.link.run::<()>(WHAT, &redis::cmd("PING")).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.local.subscribe()
    }
}
