//! What one connection has queued for its client, bounded in messages and in bytes (per
//! connection and for the whole process), and the writer task that drains it.
//!
//! Every queued message holds permits for its bytes from two semaphores (this
//! connection's, the process's); they are returned when the writer has handed the
//! message to the socket. So memory held for clients that do not read is bounded by
//! `max_outbound_bytes` each and `max_outbound_bytes_total` together (plus actix-ws's own
//! 32-message channel per connection, which stalls the writer when full).
//!
//! The stall rule: a live message that finds no room, a REQ answer that waits longer
//! than `outbound_stall_secs` for room, or a write that does not complete within it
//! marks the client too slow, and the connection is closed.

use actix_ws::Session;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};

/// The queue's side of one connection (cheap to clone: the EVENT tasks answer through it).
#[derive(Clone)]
pub(super) struct Outbound {
    queue: mpsc::Sender<Item>,
    conn_bytes: Arc<Semaphore>,
    relay_bytes: Arc<Semaphore>,
    /// Charge per message is capped here, so one message larger than the whole budget
    /// can still be sent (alone).
    max_bytes: usize,
    stall: Duration,
    /// Raised when the client is too slow; the connection task closes on it.
    pub too_slow: Arc<Notify>,
    /// Milliseconds after `start` of the writer's last completed write.
    progress: Arc<AtomicU64>,
    start: Instant,
}

enum Item {
    Text(String, [OwnedSemaphorePermit; 2]),
    Ping,
}

impl Outbound {
    /// The queue for `session`, and its writer task.
    pub(super) fn start(
        session: Session,
        max_messages: usize,
        max_bytes: usize,
        relay_bytes: Arc<Semaphore>,
        stall: Duration,
    ) -> Outbound {
        let (queue, rx) = mpsc::channel(max_messages.max(1));
        let out = Outbound {
            queue,
            conn_bytes: Arc::new(Semaphore::new(max_bytes)),
            relay_bytes,
            max_bytes,
            stall,
            too_slow: Arc::new(Notify::new()),
            progress: Arc::new(AtomicU64::new(0)),
            start: Instant::now(),
        };
        // The writer gets no sender: the queue closes when the connection's last
        // `Outbound` is dropped, and the writer ends with it.
        let progress = Progress {
            stall,
            too_slow: out.too_slow.clone(),
            at: out.progress.clone(),
            start: out.start,
        };
        actix_web::rt::spawn(write_loop(session, rx, progress));
        out
    }

    fn charge(&self, text: &str) -> u32 {
        u32::try_from(text.len().clamp(1, self.max_bytes)).unwrap_or(u32::MAX)
    }

    /// Queue a message now (live events, OK, NOTICE, CLOSED); no room means the client
    /// is too slow and the connection is told to close.
    pub(super) fn send(&self, text: String) {
        let n = self.charge(&text);
        let permits = self
            .conn_bytes
            .clone()
            .try_acquire_many_owned(n)
            .and_then(|c| Ok([c, self.relay_bytes.clone().try_acquire_many_owned(n)?]));
        let queued = match permits {
            Ok(permits) => self.queue.try_send(Item::Text(text, permits)).is_ok(),
            Err(_) => false,
        };
        if !queued && !self.queue.is_closed() {
            self.too_slow.notify_one();
        }
    }

    /// Queue part of an answer the client asked for (a REQ's events, its EOSE), waiting
    /// for room: one answer may be larger than the bounds. Waiting longer than the stall
    /// limit makes the client too slow. `false`: stop answering.
    pub(super) async fn send_answer(&self, text: String) -> bool {
        let n = self.charge(&text);
        let queue = async {
            let conn = self.conn_bytes.clone().acquire_many_owned(n).await.ok()?;
            let relay = self.relay_bytes.clone().acquire_many_owned(n).await.ok()?;
            self.queue.send(Item::Text(text, [conn, relay])).await.ok()
        };
        match tokio::time::timeout(self.stall, queue).await {
            Ok(Some(())) => true,
            // The socket writer is gone: the connection is closing anyway.
            Ok(None) => false,
            Err(_) => {
                self.too_slow.notify_one();
                false
            }
        }
    }

    /// Queue a ping (the heartbeat); dropped when the queue is full, which the other
    /// rules deal with.
    pub(super) fn ping(&self) {
        let _ = self.queue.try_send(Item::Ping);
    }

    /// When the writer last completed a write.
    pub(super) fn last_progress(&self) -> Instant {
        self.start + Duration::from_millis(self.progress.load(Ordering::Relaxed))
    }
}

/// Drain the queue into the socket until either side is gone; a write that the client
/// does not let complete within the stall limit makes it too slow.
struct Progress {
    stall: Duration,
    too_slow: Arc<Notify>,
    at: Arc<AtomicU64>,
    start: Instant,
}

async fn write_loop(mut session: Session, mut rx: mpsc::Receiver<Item>, out: Progress) {
    while let Some(item) = rx.recv().await {
        let write = async {
            match item {
                // The permits drop with the message, after the socket took it.
                Item::Text(text, _permits) => session.text(text).await,
                Item::Ping => session.ping(b"").await,
            }
        };
        match tokio::time::timeout(out.stall, write).await {
            Ok(Ok(())) => {
                let ms = out.start.elapsed().as_millis();
                out.at
                    .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
            }
            Ok(Err(_)) => break,
            Err(_) => {
                out.too_slow.notify_one();
                break;
            }
        }
    }
}
