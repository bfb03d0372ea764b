//! Live fan-out: every accepted event is published once and delivered to every relay
//! process's matching subscriptions.
//!
//! Embedded mode uses an in-process broadcast ([`MemoryBus`]); with `storage.redis_url`
//! set, events travel through Redis pub/sub ([`RedisBus`]) so several relay processes act
//! as one.

mod fanout;
mod index;
mod memory;
mod redis_bus;

pub use fanout::{Delivery, Fanout, LiveInbox};
pub use index::{LiveCondition, SubKey, SubscriptionIndex};
pub use memory::MemoryBus;
pub use redis_bus::RedisBus;

use crate::error::Reason;
use crate::stored::StoredEvent;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Events buffered per subscriber (the fan-out dispatcher, and each connection's inbox)
/// before it counts as lagging (a connection is then disconnected).
pub const LIVE_BUFFER: usize = 8_192;

#[async_trait::async_trait]
pub trait LiveBus: Send + Sync + 'static {
    /// Deliver `event` to every process's subscribers.
    async fn publish(&self, event: Arc<StoredEvent>) -> Result<(), Reason>;
    /// `Ok` when a publish is expected to succeed; an error (`Reason::Unavailable`) when
    /// the bus is known to be down. Ingest asks before committing, so a write is refused
    /// rather than stored without live delivery. In-process buses are always ready.
    async fn ready(&self) -> Result<(), Reason> {
        Ok(())
    }
    /// Receive every event published by any process, from now on.
    fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>>;
}
