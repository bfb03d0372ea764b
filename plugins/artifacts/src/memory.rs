//! [`AnswerMemory`]: the bytes all artifact answers being built in this relay process may
//! hold together (`answer_memory_bytes`). A query reserves what its revisions will take
//! *before* reading a body, from sizes the database reports; it waits for room at most
//! until its budget runs out, then answers 503 having allocated nothing. So the bound is
//! on memory, not only on time: twelve clients asking for a 250 MB history at once hold
//! at most this much between them, never twelve answers.

use buzz_core::error::Reason;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The process's answer memory; clones share it.
#[derive(Clone)]
pub(crate) struct AnswerMemory {
    bytes: Arc<Semaphore>,
    total: u32,
}

/// Bytes reserved for one answer; given back when dropped.
pub(crate) struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
}

impl AnswerMemory {
    /// `total` bytes (validated to fit in a `u32`).
    pub(crate) fn new(total: usize) -> AnswerMemory {
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        AnswerMemory {
            bytes: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Reserve `bytes` (at most the whole budget: one answer alone is always admitted),
    /// waiting at most `wait` for answers being built to give theirs back.
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
                "artifact answers being built on this relay process hold their limit of {} \
                 bytes (answerMemoryBytes); this one needs {want}; retry shortly",
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
    use super::AnswerMemory;
    use std::time::Duration;

    #[tokio::test]
    async fn reservations_past_the_total_wait_then_fail_and_free_bytes_come_back() {
        let memory = AnswerMemory::new(1_000);
        let first = memory.reserve(700, Duration::ZERO).await.expect("room");
        assert_eq!(memory.free(), 300);
        // No room within the wait: 503 with the reason, nothing reserved.
        let refused = memory
            .reserve(400, Duration::from_millis(50))
            .await
            .err()
            .expect("no room");
        assert!(
            refused.to_string().starts_with("error: ")
                && refused.to_string().contains("answerMemoryBytes"),
            "{refused}"
        );
        assert_eq!(memory.free(), 300);
        // A waiter is admitted once the first answer gives its bytes back.
        let waiting = {
            let memory = memory.clone();
            tokio::spawn(async move { memory.reserve(400, Duration::from_secs(5)).await.is_ok() })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(first);
        assert!(waiting.await.expect("task"));
        assert_eq!(memory.free(), 1_000);
        // More than the whole budget is charged the whole budget: alone, it is admitted.
        let all = memory.reserve(5_000, Duration::ZERO).await.expect("alone");
        assert_eq!(memory.free(), 0);
        drop(all);
        assert_eq!(memory.free(), 1_000);
    }
}
