//! What one connection has queued for its client, bounded in messages and in bytes (per
//! connection and for the whole process), and the response body that hands it to the
//! socket.
//!
//! Every queued message holds permits for its bytes from two semaphores (this
//! connection's, the process's). The relay writes the WebSocket's response body itself
//! ([`OutboundBody`]): actix pulls one encoded message at a time from it, only while its
//! own write buffer (32 KiB) has room, and a message's permits are returned when actix
//! pulls the next one — by then it has copied the message into that buffer. So every
//! byte stays counted until it is on its way to the socket: memory held for clients that
//! do not read is bounded by `max_outbound_bytes` each (plus the one message being
//! written) and `max_outbound_bytes_total` together. (actix-ws's own body buffers a
//! 32-message channel per connection outside any such count; the relay does not use it.)
//!
//! The stall rule: a live message that finds no room, or a REQ answer that waits longer
//! than `outbound_stall_secs` for room, marks the client too slow; so does queued output
//! that the socket does not take for that long (the connection's heartbeat checks
//! [`Outbound::taken`] and [`Outbound::pending`]). The connection is then closed.

use super::refusals::{NextRead, RefusalBudget};
use crate::queue;
use actix_codec::Encoder;
use actix_http::ws::{Codec, Message};
use actix_web::web::{Bytes, BytesMut};
use actix_ws::CloseReason;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The queue's side of one connection (cheap to clone: the EVENT runner answers through
/// it).
#[derive(Clone)]
pub(super) struct Outbound {
    queue: queue::Sender<Item>,
    conn_bytes: Arc<Semaphore>,
    relay_bytes: Arc<Semaphore>,
    /// Charge per message is capped here, so one message larger than the whole budget
    /// can still be sent (alone).
    max_bytes: usize,
    stall: Duration,
    /// Raised when the client is too slow; the connection task closes on it.
    pub too_slow: Arc<Notify>,
    flow: Arc<Flow>,
    /// What this connection's refusals have cost (see [`Outbound::refuse`]).
    refusals: Arc<RefusalBudget>,
}

/// How far the socket has got: written by the body as it hands messages out, read by
/// the connection's heartbeat.
#[derive(Default)]
struct Flow {
    /// Messages queued and not yet taken by actix.
    pending: AtomicUsize,
    /// Messages actix has taken, ever.
    taken: AtomicU64,
}

enum Item {
    Text(String, [OwnedSemaphorePermit; 2]),
    Ping,
    Pong(Bytes),
    Close(Option<CloseReason>),
}

impl Outbound {
    /// The queue, and the response body that drains it. `incoming` is actix-ws's own
    /// response body: it is never polled, but the stream of client messages ends when it
    /// is dropped, so it must live exactly as long as the connection — inside the body
    /// actix holds.
    pub(super) fn new<B: 'static>(
        max_messages: usize,
        max_bytes: usize,
        relay_bytes: Arc<Semaphore>,
        stall: Duration,
        refusals_per_sec: u32,
        incoming: B,
    ) -> (Outbound, OutboundBody<B>) {
        let (queue, rx) = queue::channel(max_messages);
        let flow = Arc::new(Flow::default());
        let out = Outbound {
            queue,
            conn_bytes: Arc::new(Semaphore::new(max_bytes)),
            relay_bytes,
            max_bytes,
            stall,
            too_slow: Arc::new(Notify::new()),
            flow: flow.clone(),
            refusals: Arc::new(RefusalBudget::new(refusals_per_sec)),
        };
        let body = OutboundBody {
            rx,
            codec: Codec::new(),
            handed: None,
            flow,
            closed: false,
            _incoming: incoming,
        };
        (out, body)
    }

    fn charge(&self, text: &str) -> u32 {
        u32::try_from(text.len().clamp(1, self.max_bytes)).unwrap_or(u32::MAX)
    }

    fn enqueue(&self, item: Item) -> Result<(), queue::TrySendError<Item>> {
        // Counted before the send, so the body never sees a message it has not counted.
        self.flow.pending.fetch_add(1, Ordering::Relaxed);
        self.queue.try_send(item).inspect_err(|_| {
            self.flow.pending.fetch_sub(1, Ordering::Relaxed);
        })
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
            Ok(permits) => self.enqueue(Item::Text(text, permits)).is_ok(),
            Err(_) => false,
        };
        if !queued && !self.queue.is_closed() {
            self.too_slow.notify_one();
        }
    }

    /// Queue a refusal (`NOTICE`, `CLOSED`, `OK false`, `NEG-ERR`) like [`Outbound::send`],
    /// charged to the connection's refusal budget: the one way refusals reach the client,
    /// from the connection task and its EVENT task alike.
    pub(super) fn refuse(&self, text: String) {
        self.send(text);
        self.refusals.charge(std::time::Instant::now());
    }

    /// Whether the connection may read its next message now, by its refusal budget.
    pub(super) fn next_read(&self) -> NextRead {
        self.refusals.next_read(std::time::Instant::now())
    }

    /// Queue part of an answer the client asked for (a REQ's events, its EOSE), waiting
    /// for room: one answer may be larger than the bounds. Waiting longer than the stall
    /// limit makes the client too slow. `false`: stop answering.
    pub(super) async fn send_answer(&self, text: String) -> bool {
        let mut nothing = Reserved::default();
        self.send_reserved(text, &mut nothing).await
    }

    /// Room for a page of an answer, taken before the page is read from the store, so
    /// the events in memory are counted too, not only the queued messages: a client
    /// that does not read holds at most `max_outbound_bytes` in all. Waits like
    /// [`Outbound::send_answer`]; `None`: stop answering.
    pub(super) async fn reserve(&self, bytes: usize) -> Option<Reserved> {
        let n = u32::try_from(bytes.clamp(1, self.max_bytes)).unwrap_or(u32::MAX);
        let take = async {
            let conn = self.conn_bytes.clone().acquire_many_owned(n).await.ok()?;
            let relay = self.relay_bytes.clone().acquire_many_owned(n).await.ok()?;
            Some(Reserved(Some([conn, relay])))
        };
        self.within_stall(take).await
    }

    /// [`Outbound::reserve`] without waiting (`None`: no room now), for a page read on a
    /// store thread, which must not wait on the client.
    pub(super) fn try_reserve(&self, bytes: usize) -> Option<Reserved> {
        let n = u32::try_from(bytes.clamp(1, self.max_bytes)).unwrap_or(u32::MAX);
        let conn = self.conn_bytes.clone().try_acquire_many_owned(n).ok()?;
        let relay = self.relay_bytes.clone().try_acquire_many_owned(n).ok()?;
        Some(Reserved(Some([conn, relay])))
    }

    /// [`Outbound::send_answer`] for a message of a page reserved with
    /// [`Outbound::reserve`]: its charge comes out of the reservation, and only what the
    /// page's estimate fell short by is waited for.
    pub(super) async fn send_reserved(&self, text: String, reserved: &mut Reserved) -> bool {
        let n = self.charge(&text);
        let queue = async {
            let permits = match reserved.take(n) {
                Some(permits) => permits,
                None => {
                    // The estimate fell short: keep what is left and wait for the rest.
                    let held = reserved.0.take();
                    let have = held.as_ref().map_or(0, |[c, _]| c.num_permits());
                    let more = n - u32::try_from(have).unwrap_or(n).min(n);
                    let mut conn = self
                        .conn_bytes
                        .clone()
                        .acquire_many_owned(more)
                        .await
                        .ok()?;
                    let mut relay = self
                        .relay_bytes
                        .clone()
                        .acquire_many_owned(more)
                        .await
                        .ok()?;
                    if let Some([c, r]) = held {
                        conn.merge(c);
                        relay.merge(r);
                    }
                    [conn, relay]
                }
            };
            let slot = self.queue.reserve().await?;
            self.flow.pending.fetch_add(1, Ordering::Relaxed);
            slot.send(Item::Text(text, permits));
            Some(())
        };
        self.within_stall(queue).await.is_some()
    }

    /// Waiting for room longer than the stall limit makes the client too slow.
    async fn within_stall<T>(
        &self,
        wait: impl std::future::Future<Output = Option<T>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.stall, wait).await {
            Ok(done) => done, // `None`: the body is gone, the connection is closing anyway.
            Err(_) => {
                self.too_slow.notify_one();
                None
            }
        }
    }

    /// Queue a ping (the heartbeat); dropped when the queue is full, which the other
    /// rules deal with.
    pub(super) fn ping(&self) {
        let _ = self.enqueue(Item::Ping);
    }

    /// Answer a client's ping (dropped, like a ping, when the queue is full).
    pub(super) fn pong(&self, payload: Bytes) {
        let _ = self.enqueue(Item::Pong(payload));
    }

    /// Queue the close frame: the body ends after it. `false` when there is no room (the
    /// client is not reading; the connection is then aborted instead).
    pub(super) fn close(&self, reason: Option<CloseReason>) -> bool {
        self.enqueue(Item::Close(reason)).is_ok()
    }

    /// How many messages the socket has taken so far.
    pub(super) fn taken(&self) -> u64 {
        self.flow.taken.load(Ordering::Relaxed)
    }

    /// How many queued messages the socket has not taken yet.
    pub(super) fn pending(&self) -> usize {
        self.flow.pending.load(Ordering::Relaxed)
    }
}

/// Room taken for a page of an answer before it is read (see [`Outbound::reserve`]);
/// what its messages do not use goes back when it is dropped.
#[derive(Default)]
pub(super) struct Reserved(Option<[OwnedSemaphorePermit; 2]>);

impl Reserved {
    /// `n` bytes of the reservation, if it still holds them.
    fn take(&mut self, n: u32) -> Option<[OwnedSemaphorePermit; 2]> {
        let n = usize::try_from(n).ok()?;
        let [conn, relay] = self.0.as_mut()?;
        if conn.num_permits() < n {
            return None;
        }
        let taken = [conn.split(n)?, relay.split(n)?];
        if conn.num_permits() == 0 {
            self.0 = None;
        }
        Some(taken)
    }
}

/// The WebSocket response body: the connection's queue, one encoded frame per chunk.
pub(super) struct OutboundBody<B> {
    rx: queue::Receiver<Item>,
    codec: Codec,
    /// The permits of the message handed out last, returned at the next pull (actix
    /// has copied that message into its write buffer by then).
    handed: Option<[OwnedSemaphorePermit; 2]>,
    flow: Arc<Flow>,
    /// The close frame went out: the body is over.
    closed: bool,
    _incoming: B,
}

impl<B: Unpin> Stream for OutboundBody<B> {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.handed = None;
        if this.closed {
            return Poll::Ready(None);
        }
        let item = match this.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => item,
            // Every sender is gone: the connection is over.
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        this.flow.pending.fetch_sub(1, Ordering::Relaxed);
        this.flow.taken.fetch_add(1, Ordering::Relaxed);
        let message = match item {
            Item::Text(text, permits) => {
                this.handed = Some(permits);
                Message::Text(text.into())
            }
            Item::Ping => Message::Ping(Bytes::new()),
            Item::Pong(payload) => Message::Pong(payload),
            Item::Close(reason) => {
                this.closed = true;
                Message::Close(reason)
            }
        };
        let mut frame = BytesMut::new();
        if let Err(err) = this.codec.encode(message, &mut frame) {
            return Poll::Ready(Some(Err(std::io::Error::other(err))));
        }
        Poll::Ready(Some(Ok(frame.freeze())))
    }
}
