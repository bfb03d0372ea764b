//! The writer's jobs, type-erased so one queue carries writes of every result type, and
//! the answer a submitter awaits, which gets its own type back.

use super::super::conn::Conn;
use super::super::events::{insert_event, InsertOutcome};
use super::super::group_writes::GroupWrites;
use super::super::StoreError;
use crate::error::Reason;
use crate::stored::StoredEvent;
use std::any::Any;
use std::sync::Arc;
use tokio::sync::oneshot;

pub(super) type AnyBox = Box<dyn Any + Send>;
/// `Fn`, not `FnOnce`: a batch whose optimistic run hits a failing job is run again,
/// job by job in savepoints.
pub(super) type Job = Box<dyn Fn(&mut Conn<'_>) -> Result<AnyBox, Reason> + Send>;
/// What follows an event's insert, given its outcome.
pub(super) type FollowUp =
    Box<dyn Fn(&mut Conn<'_>, InsertOutcome, &mut GroupWrites) -> Result<AnyBox, Reason> + Send>;

pub(super) type Reply = oneshot::Sender<Result<AnyBox, Reason>>;

/// One job's work.
pub(super) enum Work {
    /// Any writes.
    Any(Job),
    /// Writes of the caller's own tables only: no `events` row changes, so the commit
    /// leaves the change mark where it was (`change_mark.rs`).
    OwnRows(Job),
    /// Store `event`, then run `then` with the outcome.
    Event {
        event: Arc<StoredEvent>,
        /// May be inserted in one statement with neighbouring independent events.
        independent: bool,
        then: FollowUp,
    },
}

impl Work {
    /// Whether this job may change a stored event's rows, or who reads them, other than
    /// by appending one independent event (`change_mark.rs`: what a kept read can take
    /// in without being read again).
    pub(super) fn may_rewrite(&self) -> bool {
        match self {
            Work::Any(_) => true,
            Work::OwnRows(_) => false,
            Work::Event { independent, .. } => !independent,
        }
    }
}

pub(super) struct Request {
    pub(super) work: Work,
    pub(super) reply: Reply,
}

/// The answer of a queued job ([`Writer::queue_event`]), arriving after its commit.
pub(crate) struct Answer<R> {
    pub(super) answer: oneshot::Receiver<Result<AnyBox, Reason>>,
    pub(super) _type: std::marker::PhantomData<fn() -> R>,
}

impl<R: Send + 'static> std::future::Future for Answer<R> {
    type Output = Result<R, Reason>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.answer).poll(cx).map(|got| {
            let value = got.map_err(|_| Reason::Internal(StoreError::WriterGone.into()))??;
            value.downcast::<R>().map(|b| *b).map_err(|_| {
                Reason::Internal(anyhow::anyhow!("writer returned a value of the wrong type"))
            })
        })
    }
}

/// One job alone.
pub(super) fn run(conn: &mut Conn<'_>, work: &Work) -> Result<AnyBox, Reason> {
    match work {
        Work::Any(job) | Work::OwnRows(job) => job(conn),
        Work::Event { event, then, .. } => {
            let outcome = insert_event(
                conn,
                event.community_id,
                &event.event,
                event.channel.as_deref(),
                event.received_at,
            )?;
            then(conn, outcome, &mut GroupWrites::immediate())
        }
    }
}
