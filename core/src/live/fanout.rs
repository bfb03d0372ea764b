//! Live fan-out within one process: one dispatcher task receives every published event
//! from the [`LiveBus`] and hands it only to the connections whose subscriptions match,
//! found through the [`SubscriptionIndex`].
//!
//! Connections hold a [`LiveInbox`]: a bounded queue of [`Delivery`]s plus their
//! subscriptions' keys. The dispatcher never waits for a connection: one whose inbox is
//! full has fallen behind and its inbox is closed (the connection then ends).

use super::index::{LiveCondition, SubKey, SubscriptionIndex};
use super::{LiveBus, LIVE_BUFFER};
use crate::queue;
use crate::stored::StoredEvent;
use buzz_nostr::filter::Filter;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::broadcast;

/// An event for one connection, with the subscriptions it matched (empty for an event
/// every subscribed connection gets, see [`Fanout::start`]).
pub struct Delivery {
    pub event: Arc<StoredEvent>,
    pub subs: Vec<SubKey>,
}

/// The process's live subscriptions and the connections that own them.
pub struct Fanout {
    state: Mutex<Hub>,
    next_key: AtomicU64,
}

#[derive(Default)]
struct Hub {
    index: SubscriptionIndex,
    owner: HashMap<SubKey, u64>,
    /// Every connection's inbox and how many subscriptions it has open. Dropping a
    /// sender closes that inbox: how a connection learns it fell behind.
    conns: HashMap<u64, (queue::Sender<Delivery>, usize)>,
    /// Connections with an authenticated caller: they hear access changes even without
    /// a subscription (a ban closes them, `http/ws/live.rs`).
    authenticated: HashSet<u64>,
}

impl Hub {
    /// Does connection `conn` hear events sent to everyone (access changes)?
    fn hears_everything(&self, conn: u64, subscriptions: usize) -> bool {
        subscriptions > 0 || self.authenticated.contains(&conn)
    }
}

impl Fanout {
    /// Start the dispatcher on `bus`. Events for which `to_everyone` is true (access
    /// changes: every reader must re-check what it may see) go to every connection with
    /// a subscription or an authenticated caller, whether or not one matches. `before` sees each event before any
    /// connection does (the access cache records a change there, so a connection that
    /// re-checks on it can never read the state from before it).
    pub fn start(
        bus: &dyn LiveBus,
        to_everyone: fn(&StoredEvent) -> bool,
        before: Box<dyn Fn(&StoredEvent) + Send + Sync>,
    ) -> Arc<Fanout> {
        let fanout = Arc::new(Fanout {
            state: Mutex::new(Hub::default()),
            next_key: AtomicU64::new(1),
        });
        tokio::spawn(dispatch(
            bus.subscribe(),
            Arc::downgrade(&fanout),
            to_everyone,
            before,
        ));
        fanout
    }

    /// A new connection's inbox (it costs nothing until it subscribes).
    pub fn connect(self: &Arc<Self>) -> LiveInbox {
        let id = self.next_key.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = queue::channel(LIVE_BUFFER);
        self.hub().conns.insert(id, (tx, 0));
        LiveInbox {
            fanout: self.clone(),
            id,
            rx,
            subs: Vec::new(),
        }
    }

    /// Subscriptions open in this process.
    pub fn subscriptions(&self) -> usize {
        self.hub().index.len()
    }

    fn hub(&self) -> MutexGuard<'_, Hub> {
        // A panic while holding the lock leaves plain maps behind; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliver(&self, event: Arc<StoredEvent>, everyone: bool) {
        let mut hub = self.hub();
        let mut per_conn: HashMap<u64, Vec<SubKey>> = HashMap::new();
        if everyone {
            let hearing = hub
                .conns
                .iter()
                .filter(|(c, (_, n))| hub.hears_everything(**c, *n))
                .map(|(c, _)| (*c, Vec::new()));
            per_conn.extend(hearing.collect::<Vec<_>>());
        }
        for sub in hub.index.matching(&event.event) {
            if let Some(conn) = hub.owner.get(&sub) {
                per_conn.entry(*conn).or_default().push(sub);
            }
        }
        let mut behind = Vec::new();
        for (conn, subs) in per_conn {
            let Some((tx, _)) = hub.conns.get(&conn) else {
                continue;
            };
            let delivery = Delivery {
                event: event.clone(),
                subs,
            };
            if let Err(queue::TrySendError::Full(_)) = tx.try_send(delivery) {
                behind.push(conn);
            }
        }
        // Dropping the sender closes the inbox: the connection sees it fell behind.
        for conn in behind {
            hub.conns.remove(&conn);
        }
    }

    /// Every subscribed or authenticated connection may have missed events (an
    /// authenticated one, a ban).
    fn all_behind(&self) {
        let mut hub = self.hub();
        let authenticated = std::mem::take(&mut hub.authenticated);
        hub.conns
            .retain(|c, (_, n)| *n == 0 && !authenticated.contains(c));
        hub.authenticated = authenticated;
    }
}

async fn dispatch(
    mut rx: broadcast::Receiver<Arc<StoredEvent>>,
    fanout: Weak<Fanout>,
    to_everyone: fn(&StoredEvent) -> bool,
    before: Box<dyn Fn(&StoredEvent) + Send + Sync>,
) {
    loop {
        let received = rx.recv().await;
        let Some(fanout) = fanout.upgrade() else {
            return;
        };
        match received {
            Ok(event) => {
                before(&event);
                let everyone = to_everyone(&event);
                fanout.deliver(event, everyone);
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "live fan-out fell behind the bus");
                fanout.all_behind();
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// One connection's live subscriptions and the events they matched.
pub struct LiveInbox {
    fanout: Arc<Fanout>,
    id: u64,
    rx: queue::Receiver<Delivery>,
    /// A list, not a set: a connection holds a few subscriptions (at most
    /// `limits.max_subscriptions`), and a set's table took several times the bytes.
    subs: Vec<SubKey>,
}

impl LiveInbox {
    /// Make `filters` live; deliveries name the returned key.
    pub fn add(&mut self, filters: &[Filter]) -> SubKey {
        self.add_conditioned(filters, &[])
    }

    /// Make core's `filters` and plugins' `conditioned` filters live as one
    /// subscription; deliveries name the returned key.
    pub fn add_conditioned(
        &mut self,
        filters: &[Filter],
        conditioned: &[(Filter, LiveCondition)],
    ) -> SubKey {
        let key = self.fanout.next_key.fetch_add(1, Ordering::Relaxed);
        let mut hub = self.fanout.hub();
        hub.index.insert_conditioned(key, filters, conditioned);
        hub.owner.insert(key, self.id);
        if let Some((_, n)) = hub.conns.get_mut(&self.id) {
            *n += 1;
        }
        self.subs.reserve_exact(1);
        self.subs.push(key);
        key
    }

    /// Stop delivering for `key`.
    pub fn remove(&mut self, key: SubKey) {
        let Some(at) = self.subs.iter().position(|k| *k == key) else {
            return;
        };
        self.subs.swap_remove(at);
        if self.subs.is_empty() {
            self.subs = Vec::new();
        }
        let mut hub = self.fanout.hub();
        hub.index.remove(key);
        hub.owner.remove(&key);
        if let Some((_, n)) = hub.conns.get_mut(&self.id) {
            *n = n.saturating_sub(1);
        }
    }

    /// The caller authenticated: access changes reach this connection from now on,
    /// subscribed or not.
    pub fn authenticated(&mut self) {
        self.fanout.hub().authenticated.insert(self.id);
    }

    /// No subscription is open.
    pub fn is_idle(&self) -> bool {
        self.subs.is_empty()
    }

    /// The next delivery; `None` when the connection fell behind (the dispatcher closed
    /// its inbox).
    pub async fn recv(&mut self) -> Option<Delivery> {
        self.rx.recv().await
    }
}

impl Drop for LiveInbox {
    fn drop(&mut self) {
        let mut hub = self.fanout.hub();
        for key in self.subs.drain(..) {
            hub.index.remove(key);
            hub.owner.remove(&key);
        }
        hub.conns.remove(&self.id);
        hub.authenticated.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::memory::MemoryBus;
    use buzz_nostr::keys::Keys;
    use std::sync::atomic::AtomicBool;

    /// `before` has run for an event by the time any connection can receive it: the
    /// access cache is told of a change before a connection re-checks on it.
    #[tokio::test]
    async fn before_sees_each_event_before_any_connection() {
        let bus = MemoryBus::default();
        let seen = Arc::new(AtomicBool::new(false));
        let flag = seen.clone();
        let fanout = Fanout::start(
            &bus,
            |_| false,
            Box::new(move |_| {
                // Give the connection every chance to run first if it could.
                std::thread::sleep(std::time::Duration::from_millis(20));
                flag.store(true, Ordering::SeqCst);
            }),
        );
        let mut inbox = fanout.connect();
        let filter = Filter::parse(&serde_json::json!({"kinds": [1]})).expect("filter");
        inbox.add(&[filter]);
        let event = Keys::generate().sign(1, vec![], "hi", 1_700_000_000);
        bus.publish(Arc::new(StoredEvent {
            event,
            channel: None,
            community_id: 1,
            received_at: 0,
        }))
        .await
        .expect("publish");
        let delivery = inbox.recv().await.expect("delivered");
        assert!(seen.load(Ordering::SeqCst), "delivered before `before` ran");
        assert_eq!(delivery.subs.len(), 1);
    }
}
