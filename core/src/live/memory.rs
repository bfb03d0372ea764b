use super::{LiveBus, LIVE_BUFFER};
use crate::error::Reason;
use crate::stored::StoredEvent;
use std::sync::Arc;
use tokio::sync::broadcast;

/// In-process fan-out for the embedded single-process mode.
pub struct MemoryBus {
    sender: broadcast::Sender<Arc<StoredEvent>>,
}

impl Default for MemoryBus {
    fn default() -> Self {
        MemoryBus {
            sender: broadcast::channel(LIVE_BUFFER).0,
        }
    }
}

#[async_trait::async_trait]
impl LiveBus for MemoryBus {
    async fn publish(&self, event: Arc<StoredEvent>) -> Result<(), Reason> {
        // No subscriber is not an error: nobody is listening right now.
        let _ = self.sender.send(event);
        Ok(())
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.sender.subscribe()
    }
}
