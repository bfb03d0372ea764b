//! `POST /query`'s event answer as a streamed JSON array, never held whole.
//!
//! An answer may be `max_limit` events of up to `max_message_bytes` each — hundreds of
//! megabytes — and many requests run at once. So core's matches are read a page at a
//! time (`max_outbound_bytes` of them), each page's bytes are reserved in the process's
//! outbound budget (the one WebSocket queues share, `max_outbound_bytes_total`) before
//! it is read, and a page's reservation is returned when actix pulls the next chunk (it
//! has copied the page into its write buffer by then). A client that stops reading
//! stops the pulls: after `outbound_stall_secs` without one, the connection is aborted
//! (`socket.rs`) and the reservation returned.
//!
//! The first page is read before the status is sent, so "busy" and storage failures are
//! a proper 503. A failure after that ends the body without its closing bracket and
//! chunk, which every HTTP client reports as an error: a failed answer never reads as a
//! shorter one.

use super::socket::SocketHandle;
use crate::error::Reason;
use crate::query_service::StoredAnswer;
use crate::store::ReadClient;
use actix_web::web::Bytes;
use actix_web::HttpResponse;
use buzz_nostr::event::Event;
use futures_util::stream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bounds an answer streams under.
pub(super) struct AnswerBounds {
    /// The process's outbound byte budget.
    pub budget: Arc<Semaphore>,
    /// Bytes per page.
    pub page_bytes: usize,
    /// How long a page may wait for room, and the client may go without pulling.
    pub stall: Duration,
}

/// Stream core's matches, then the plugins' `extra` events, as one JSON array.
pub(super) async fn events(
    mut stored: StoredAnswer,
    extra: Vec<Event>,
    bounds: AnswerBounds,
    socket: Option<SocketHandle>,
) -> Result<HttpResponse, Reason> {
    let mut started = false;
    let first = next_chunk(&mut stored, &bounds, true, &mut started).await?;
    let pulls = Arc::new(Pulls::default());
    if let Some(socket) = socket {
        actix_web::rt::spawn(watch(pulls.clone(), socket, bounds.stall));
    }
    let state = Streaming {
        stored,
        extra: Some(extra),
        bounds,
        first: Some(first),
        held: None,
        pulls: PullGuard(pulls),
        started,
        failed: false,
        client: ReadClient::current(),
    };
    let body = stream::unfold(state, |mut st| async move {
        st.held = None;
        if st.failed {
            return None;
        }
        st.pulls.0.count.fetch_add(1, Ordering::Relaxed);
        let chunk = match st.first.take() {
            Some(first) => Ok(first),
            // actix pulls the body outside the request's task: the later pages are
            // still read in the requester's lane.
            None => st.client.clone().serve(st.next()).await?,
        };
        match chunk {
            Ok(Chunk { bytes, permit }) => {
                st.held = permit;
                Some((Ok::<Bytes, std::io::Error>(bytes), st))
            }
            Err(reason) => {
                tracing::warn!(error = %reason, "POST /query answer failed after its status");
                st.failed = true;
                Some((Err(std::io::Error::other(reason.to_string())), st))
            }
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .streaming(body))
}

/// One piece of the body and the budget it holds until the next pull.
struct Chunk {
    bytes: Bytes,
    permit: Option<OwnedSemaphorePermit>,
}

struct Streaming {
    stored: StoredAnswer,
    /// The plugins' events, not yet sent.
    extra: Option<Vec<Event>>,
    bounds: AnswerBounds,
    first: Option<Chunk>,
    /// The reservation of the chunk pulled last.
    held: Option<OwnedSemaphorePermit>,
    pulls: PullGuard,
    /// Whether an event has been written (the next one needs a comma).
    started: bool,
    /// A chunk failed: the body ends there, unclosed.
    failed: bool,
    /// Whose reads the pages are.
    client: ReadClient,
}

impl Streaming {
    /// The chunk after the first; `None` when the array is closed.
    async fn next(&mut self) -> Option<Result<Chunk, Reason>> {
        if self.stored.next_page_bytes(self.bounds.page_bytes) > 0 {
            let chunk = next_chunk(&mut self.stored, &self.bounds, false, &mut self.started);
            return Some(chunk.await);
        }
        let extra = self.extra.take()?;
        let mut bytes = Vec::new();
        write_events(&mut bytes, &extra, &mut self.started);
        bytes.push(b']');
        Some(Ok(Chunk {
            bytes: bytes.into(),
            permit: None,
        }))
    }
}

/// The next page of `stored` as JSON, its bytes reserved before it is read. The first
/// chunk opens the array; a chunk's leading comma joins it to the previous page.
async fn next_chunk(
    stored: &mut StoredAnswer,
    bounds: &AnswerBounds,
    open: bool,
    started: &mut bool,
) -> Result<Chunk, Reason> {
    let cost = stored.next_page_bytes(bounds.page_bytes);
    let permit = if cost == 0 {
        None
    } else {
        let n = u32::try_from(cost.min(bounds.page_bytes)).unwrap_or(u32::MAX);
        let wait = bounds.budget.clone().acquire_many_owned(n);
        match tokio::time::timeout(bounds.stall, wait).await {
            Ok(Ok(permit)) => Some(permit),
            _ => {
                return Err(Reason::Unavailable(
                    "busy: the relay's outbound budget is in use (max_outbound_bytes_total); \
                     retry shortly"
                        .into(),
                ))
            }
        }
    };
    let page = stored
        .next_page(bounds.page_bytes)
        .await?
        .unwrap_or_default();
    let mut bytes = Vec::with_capacity(cost + 1);
    if open {
        bytes.push(b'[');
    }
    write_events(&mut bytes, &page, started);
    Ok(Chunk {
        bytes: bytes.into(),
        permit,
    })
}

/// Append `events` to the array, each after a comma once one has been written.
fn write_events(out: &mut Vec<u8>, events: &[Event], started: &mut bool) {
    for event in events {
        if *started {
            out.push(b',');
        }
        // Serializing a plain struct into memory cannot fail.
        let _ = serde_json::to_writer(&mut *out, event);
        *started = true;
    }
}

/// How often actix has pulled the body, and whether it is over.
#[derive(Default)]
struct Pulls {
    count: AtomicU64,
    done: AtomicBool,
}

/// Marks the answer over when the body is dropped (sent, or its connection gone).
struct PullGuard(Arc<Pulls>);

impl Drop for PullGuard {
    fn drop(&mut self) {
        self.0.done.store(true, Ordering::Relaxed);
    }
}

/// Abort the connection if the body goes `stall` without a pull while unfinished.
async fn watch(pulls: Arc<Pulls>, socket: SocketHandle, stall: Duration) {
    let mut seen = pulls.count.load(Ordering::Relaxed);
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = socket.gone() => return,
            _ = tokio::time::sleep((stall / 2).max(Duration::from_millis(100))) => {}
        }
        if pulls.done.load(Ordering::Relaxed) {
            return;
        }
        let now = pulls.count.load(Ordering::Relaxed);
        if now != seen {
            (seen, since) = (now, tokio::time::Instant::now());
        } else if since.elapsed() >= stall {
            tracing::debug!("POST /query answer not read for the stall limit; aborting");
            socket.abort();
            return;
        }
    }
}
