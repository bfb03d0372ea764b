//! Who a read is for: the client whose lane [`Store::read`](super::Store::read) files it
//! in, so the read threads can serve clients in turn (`read_lanes.rs`).
//!
//! Set once at the edges — the WebSocket connection's task and every HTTP request
//! (`http/server.rs`) — as a tokio task-local, and brought up to date when the client
//! authenticates; the ~40 places that call `Store::read` (core's and plugins') need not
//! know. A read made outside any client's task (background work, start-up) has the
//! background lane, which no per-client bound applies to.

use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The lane a read waits in: one per authenticated pubkey (all its connections and
/// requests together), else one per WebSocket connection or HTTP request; reads with no
/// client share the background lane.
///
/// Not by address before authentication: clients behind one NAT (or every local test
/// client) would share a lane and its bound. A WebSocket connection reads one message
/// at a time, so an anonymous connection never has more than one read in flight.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadClient {
    /// Reads the relay makes for itself.
    Background,
    /// A NIP-42 / NIP-98 authenticated pubkey.
    Pubkey(Arc<str>),
    /// A client that has not authenticated: one connection or request.
    Anonymous(u64),
}

/// Numbers anonymous lanes.
static NEXT_ANONYMOUS: AtomicU64 = AtomicU64::new(1);

impl ReadClient {
    /// A lane of its own for a new connection or request that has not authenticated.
    pub fn anonymous() -> ReadClient {
        ReadClient::Anonymous(NEXT_ANONYMOUS.fetch_add(1, Ordering::Relaxed))
    }

    /// The lane of an authenticated `pubkey`.
    pub fn pubkey(pubkey: &str) -> ReadClient {
        ReadClient::Pubkey(Arc::from(pubkey))
    }

    /// Run `task` with every read it makes filed in `client`'s lane.
    pub fn serve<F: Future>(self, task: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(RefCell::new(self), task)
    }

    /// From now on, the current task's reads are `client`'s (a connection that has just
    /// authenticated). Outside [`ReadClient::serve`] this does nothing.
    pub fn switch_to(client: ReadClient) {
        let _ = CURRENT.try_with(|current| *current.borrow_mut() = client);
    }

    /// The lane of a read made now (to carry into work the current task hands on: an
    /// HTTP answer's later pages, read as actix pulls the body).
    pub fn current() -> ReadClient {
        CURRENT
            .try_with(|current| current.borrow().clone())
            .unwrap_or(ReadClient::Background)
    }
}

tokio::task_local! {
    static CURRENT: RefCell<ReadClient>;
}

#[cfg(test)]
mod tests {
    use super::ReadClient;

    /// A task's reads are its client's, and its new identity's after it changes; outside
    /// any client's task they are the background's.
    #[tokio::test]
    async fn the_task_carries_its_client() {
        assert_eq!(ReadClient::current(), ReadClient::Background);
        let anonymous = ReadClient::anonymous();
        assert_ne!(anonymous, ReadClient::anonymous());
        anonymous
            .clone()
            .serve(async move {
                assert_eq!(ReadClient::current(), anonymous);
                ReadClient::switch_to(ReadClient::pubkey("ab"));
                assert_eq!(ReadClient::current(), ReadClient::pubkey("ab"));
            })
            .await;
        assert_eq!(ReadClient::current(), ReadClient::Background);
    }
}
