//! A connection's EVENTs in flight, run by one task per connection.
//!
//! Why one task and not one per EVENT: group commit answers a whole batch at once from
//! the writer thread. Every task it wakes on an actix worker costs that worker a remote
//! wake-up (a syscall each) and, since each answer was written on its own, a socket
//! write each. With all of a connection's EVENTs in one task, a batch wakes it once and
//! its OKs leave in one write. The task is separate from the connection task so that
//! EVENTs keep going while the connection serves a REQ. It starts with the connection's
//! first EVENT: most connections of a team chat only read, and an idle connection
//! should not hold a task and a queue it never uses.

use super::super::AppState;
use super::messages;
use super::outbound::Outbound;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use buzz_nostr::event::Event;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// One EVENT to run: as the connection knew its caller when the message arrived, and
/// the in-flight slot it holds until answered.
struct Submitted {
    ctx: ConnCtx,
    event: Event,
    slot: OwnedSemaphorePermit,
}

/// The connection's side: hands EVENTs to its runner task. The runner finishes what it
/// was handed (every EVENT gets its OK, if the client is still there) after the
/// connection drops this.
///
/// Only the queue: the relay state and the outbound queue it starts the runner with are
/// the connection's own, passed to [`EventRunner::submit`], not copies held in every
/// idle connection's task.
#[derive(Default)]
pub(super) struct EventRunner {
    /// The runner's queue, once the first EVENT started it.
    queue: Option<mpsc::UnboundedSender<Submitted>>,
}

impl EventRunner {
    /// Run `event` for `ctx`; its OK goes to the connection's outbound queue `out`. The
    /// first EVENT starts the runner task on the current worker. Unbounded queue: the
    /// connection's in-flight slots already bound what it holds.
    pub(super) fn submit(
        &mut self,
        state: &Arc<AppState>,
        out: &Outbound,
        ctx: ConnCtx,
        event: Event,
        slot: OwnedSemaphorePermit,
    ) {
        let queue = self.queue.get_or_insert_with(|| {
            let (queue, rx) = mpsc::unbounded_channel();
            actix_web::rt::spawn(run(state.clone(), out.clone(), rx));
            queue
        });
        if let Err(refused) = queue.send(Submitted { ctx, event, slot }) {
            // The runner is gone (it only ends after the connection): answer, never drop.
            let id = &refused.0.event.id;
            let reason = Reason::Internal(anyhow::anyhow!("event runner stopped"));
            out.refuse(messages::ok(id, false, &reason.wire_text()));
        }
    }
}

async fn run(state: Arc<AppState>, out: Outbound, mut queue: mpsc::UnboundedReceiver<Submitted>) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            // Answers first: they free slots the connection waits for.
            biased;
            Some(()) = running.next(), if !running.is_empty() => {}
            next = queue.recv() => match next {
                Some(submitted) => running.push(answer(&state, &out, submitted)),
                None => break,
            },
        }
    }
    // The connection is gone; what it handed over still runs to its end.
    while running.next().await.is_some() {}
}

/// One EVENT to its OK. A panic while running it (a bug) fails that EVENT alone, as a
/// task of its own would: the connection's other EVENTs share this task.
async fn answer(state: &AppState, out: &Outbound, submitted: Submitted) {
    let Submitted { ctx, event, slot } = submitted;
    let id = event.id.clone();
    let outcome = AssertUnwindSafe(state.ingest.submit(&ctx, event))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            tracing::error!(%id, "running an EVENT panicked");
            Err(Reason::Internal(anyhow::anyhow!(
                "running the event panicked"
            )))
        });
    match outcome {
        Ok(accepted) => out.send(messages::ok(&id, true, &accepted.message)),
        Err(reason) => out.refuse(messages::ok(&id, false, &reason.wire_text())),
    }
    drop(slot);
}
