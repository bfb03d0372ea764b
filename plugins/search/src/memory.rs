//! [`RankMemory`]: the bytes of candidate text all searches being ranked in this relay
//! process may hold together (`rank_memory_bytes`). Ranking reads bodies a page at a
//! time; each page reserves its bytes — known from the sizes the index walk read —
//! *before* it is read, and gives them back once its documents are scored. A page that
//! finds no room within [`WAIT`] is refused with `error:` having read nothing, so many
//! searches at once hold at most this much between them.

use buzz_core::error::Reason;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a page waits for other searches to give their bytes back.
pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// The process's ranking memory; clones share it.
#[derive(Clone)]
pub(crate) struct RankMemory {
    bytes: Arc<Semaphore>,
    total: u32,
}

/// Bytes reserved for one page; given back when dropped.
pub(crate) struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
}

impl RankMemory {
    /// `total` bytes (validated to fit in a `u32`).
    pub(crate) fn new(total: usize) -> RankMemory {
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        RankMemory {
            bytes: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Reserve `bytes` (at most the whole budget: one page alone is always admitted),
    /// waiting at most `wait`.
    pub(crate) async fn reserve(
        &self,
        bytes: usize,
        wait: Duration,
    ) -> Result<Reservation, Reason> {
        let want = u32::try_from(bytes).unwrap_or(u32::MAX).min(self.total);
        if want == 0 {
            return Ok(Reservation { _permit: None });
        }
        match tokio::time::timeout(wait, self.bytes.clone().acquire_many_owned(want)).await {
            Ok(Ok(permit)) => Ok(Reservation {
                _permit: Some(permit),
            }),
            // The semaphore is never closed; a closed one is as full as can be.
            Ok(Err(_)) | Err(_) => Err(Reason::Unavailable(format!(
                "busy: searches being ranked on this relay process hold their limit of {} \
                 bytes (rank_memory_bytes); retry shortly",
                self.total
            ))),
        }
    }

    /// Bytes not reserved right now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.bytes.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::RankMemory;
    use std::time::Duration;

    #[tokio::test]
    async fn pages_past_the_total_wait_then_fail_and_bytes_come_back() {
        let memory = RankMemory::new(1_000);
        let first = memory.reserve(700, Duration::ZERO).await.expect("room");
        assert_eq!(memory.free(), 300);
        let refused = memory
            .reserve(400, Duration::from_millis(20))
            .await
            .err()
            .expect("no room");
        let text = refused.wire_text();
        assert!(
            text.starts_with("error: busy") && text.contains("rank_memory_bytes"),
            "{text}"
        );
        assert_eq!(memory.free(), 300);
        drop(first);
        assert_eq!(memory.free(), 1_000);
        // More than the whole budget is charged the whole budget: alone, it is admitted.
        let all = memory.reserve(5_000, Duration::ZERO).await.expect("alone");
        assert_eq!(memory.free(), 0);
        drop(all);
        assert_eq!(memory.free(), 1_000);
    }
}
