//! A bounded queue from tasks to one receiver that holds no memory while it is empty.
//!
//! Every open WebSocket owns two queues: its outbound messages (`http/ws/outbound.rs`)
//! and its live deliveries (`live/fanout.rs`). tokio's mpsc channel allocates a block of
//! 32 slots and a cache-padded channel header when it is created and keeps them for its
//! life — for these two, 2–3 KB per connection before a message was ever sent, held by
//! connections whose queues are empty nearly all day. This queue is a deque behind a
//! mutex, allocated at the first message and given back once drained, and a semaphore
//! counting its room. It keeps the contract the relay relies on from tokio's bounded
//! mpsc: `try_send` fails when full or when the receiver is gone; a reserved slot waits
//! for room; taking an item spends the task's cooperative budget; `recv` is
//! cancel-safe and yields `None` once every sender is gone and the queue is empty;
//! dropping the receiver drops what was queued (and with it whatever the items hold)
//! and fails every sender from then on.

use futures_util::task::AtomicWaker;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use tokio::sync::{SemaphorePermit, TryAcquireError};

/// Slots a drained queue keeps: none. Even the deque's smallest buffer (4 slots, 224
/// bytes of outbound messages) kept by every connection that was ever sent something
/// was a measurable part of what an idle connection costs (docs/benchmarks.md "Idle
/// connections"); allocating it again for the next message is cheap beside sending it.
const KEEP: usize = 0;

struct Shared<T> {
    items: Mutex<VecDeque<T>>,
    /// Free slots; closed when the receiver is gone.
    room: tokio::sync::Semaphore,
    receiver: AtomicWaker,
    senders: AtomicUsize,
}

impl<T> Shared<T> {
    fn items(&self) -> MutexGuard<'_, VecDeque<T>> {
        // Plain data: a panic elsewhere while holding the lock leaves nothing half done.
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queue `item` in a slot already taken, unless the receiver is gone (then it is
    /// dropped: nobody will take it).
    fn push(&self, item: T) {
        let mut items = self.items();
        // Checked under the lock the receiver clears the queue under, after closing:
        // an item is either cleared by it or never queued.
        if self.room.is_closed() {
            drop(items);
            drop(item);
            return;
        }
        items.push_back(item);
        drop(items);
        self.receiver.wake();
    }
}

/// A queue holding at most `capacity` items (at least one).
pub(crate) fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        items: Mutex::new(VecDeque::new()),
        room: tokio::sync::Semaphore::new(capacity.max(1)),
        receiver: AtomicWaker::new(),
        senders: AtomicUsize::new(1),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

/// Why [`Sender::try_send`] gave its item back.
#[derive(Debug)]
pub(crate) enum TrySendError<T> {
    Full(T),
    Closed(T),
}

pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last one: a receiver waiting on an empty queue learns it is over.
            self.shared.receiver.wake();
        }
    }
}

impl<T> Sender<T> {
    /// Queue `item` now if there is room.
    pub(crate) fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        match self.shared.room.try_acquire() {
            Ok(slot) => {
                slot.forget();
                self.shared.push(item);
                Ok(())
            }
            Err(TryAcquireError::NoPermits) => Err(TrySendError::Full(item)),
            Err(TryAcquireError::Closed) => Err(TrySendError::Closed(item)),
        }
    }

    /// Wait for a slot; `None` when the receiver is gone.
    pub(crate) async fn reserve(&self) -> Option<Slot<'_, T>> {
        let slot = self.shared.room.acquire().await.ok()?;
        Some(Slot { sender: self, slot })
    }

    /// The receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.room.is_closed()
    }
}

/// Room for one item, taken by [`Sender::reserve`]; given back if dropped unused.
pub(crate) struct Slot<'a, T> {
    sender: &'a Sender<T>,
    slot: SemaphorePermit<'a>,
}

impl<T> Slot<'_, T> {
    pub(crate) fn send(self, item: T) {
        self.slot.forget();
        self.sender.shared.push(item);
    }
}

pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next item; `None` once every sender is gone and nothing is queued.
    ///
    /// Each item taken spends the task's cooperative budget, as tokio's own channels do:
    /// a task draining a full queue yields to the others on its worker every so often.
    /// Without that, a connection moving a backlog of live deliveries into its outbound
    /// queue never let the task that writes that queue to the socket run, and filled it
    /// (the client was closed "too slow" while it read as fast as it could).
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let budget = std::task::ready!(tokio::task::coop::poll_proceed(cx));
        let received = self.poll_take(cx);
        if received.is_ready() {
            budget.made_progress();
        }
        received
    }

    fn poll_take(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(item) = self.pop() {
            return Poll::Ready(Some(item));
        }
        self.shared.receiver.register(cx.waker());
        // Again after registering: a push or the last sender's drop in between woke a
        // waker that may not have been this one.
        if let Some(item) = self.pop() {
            return Poll::Ready(Some(item));
        }
        if self.shared.senders.load(Ordering::Acquire) == 0 {
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    /// [`Receiver::poll_recv`] as a future (cancel-safe: an item is only taken when
    /// returned).
    pub(crate) async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn pop(&self) -> Option<T> {
        let mut items = self.shared.items();
        let item = items.pop_front()?;
        if items.is_empty() && items.capacity() > KEEP {
            *items = VecDeque::new();
        }
        drop(items);
        self.shared.room.add_permits(1);
        Some(item)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // Close first, then clear: a sender pushing after the clear sees it closed.
        self.shared.room.close();
        let queued = std::mem::take(&mut *self.shared.items());
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_in_order_and_ends_when_every_sender_is_gone() {
        let (tx, mut rx) = channel::<u32>(2);
        let tx2 = tx.clone();
        tx.try_send(1).expect("room");
        tx2.try_send(2).expect("room");
        assert!(matches!(tx.try_send(3), Err(TrySendError::Full(3))));
        assert_eq!(rx.recv().await, Some(1));
        tx.try_send(3).expect("room again");
        drop(tx);
        drop(tx2);
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_reserved_slot_waits_for_room() {
        let (tx, mut rx) = channel::<u32>(1);
        tx.try_send(1).expect("room");
        let waiting = tokio::spawn(async move {
            let slot = tx.reserve().await.expect("receiver alive");
            slot.send(2);
        });
        assert_eq!(rx.recv().await, Some(1));
        waiting.await.expect("sender task");
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn dropping_the_receiver_drops_the_queue_and_fails_senders() {
        let (tx, rx) = channel::<Arc<()>>(4);
        let held = Arc::new(());
        tx.try_send(held.clone()).expect("room");
        assert_eq!(Arc::strong_count(&held), 2);
        let waiter = {
            let tx = tx.clone();
            tx.try_send(held.clone()).expect("room");
            tx.try_send(held.clone()).expect("room");
            tx.try_send(held.clone()).expect("room");
            tokio::spawn(async move { tx.reserve().await.is_none() })
        };
        // The waiter runs until it waits for room.
        tokio::task::yield_now().await;
        drop(rx);
        assert_eq!(Arc::strong_count(&held), 1, "queued items dropped");
        assert!(waiter.await.expect("waiter"), "a waiting sender fails");
        assert!(tx.is_closed());
        assert!(matches!(tx.try_send(held), Err(TrySendError::Closed(_))));
    }

    /// A task taking item after item from a full queue yields within its cooperative
    /// budget, so the other tasks of its worker run meanwhile (`poll_recv`).
    #[tokio::test]
    async fn a_long_drain_lets_other_tasks_run() {
        let (tx, mut rx) = channel::<u32>(1000);
        for i in 0..1000 {
            tx.try_send(i).expect("room");
        }
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
        let mut taken = 0;
        while taken < 1000 && !ran.load(Ordering::SeqCst) {
            rx.recv().await.expect("item");
            taken += 1;
        }
        assert!(
            taken < 1000,
            "the other task never ran while 1000 items were taken"
        );
    }

    #[tokio::test]
    async fn a_drained_queue_gives_its_buffer_back() {
        let (tx, mut rx) = channel::<u64>(100);
        for i in 0..100 {
            tx.try_send(i).expect("room");
        }
        assert!(rx.shared.items().capacity() >= 100);
        for _ in 0..100 {
            rx.recv().await.expect("item");
        }
        assert_eq!(
            rx.shared.items().capacity(),
            0,
            "a drained queue keeps no buffer"
        );
        // And one message later, the same again.
        tx.try_send(1).expect("room");
        rx.recv().await.expect("item");
        assert_eq!(rx.shared.items().capacity(), 0);
    }
}
