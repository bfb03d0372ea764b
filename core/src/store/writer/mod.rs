//! The group-committing writer.
//!
//! One thread owns the only writing connection. It takes every job queued at that moment
//! (up to [`MAX_BATCH`]), runs them in one transaction, commits once, and only then
//! answers each job. Jobs first run back to back; if one fails, the batch is rerun
//! with a savepoint per job so that the failing job rolls back alone (savepoints cost
//! two statements per job, which the common all-succeed batch does without). A failing
//! commit fails every job of the batch. Answering after the commit is what lets
//! the relay say `OK true` only for durable events. On SQLite the writer only appends to
//! the WAL; copying it back into the database runs on a thread of its own
//! (`checkpoint.rs`), which each commit wakes.
//!
//! On PostgreSQL every statement is a network round trip, so an event job
//! ([`Writer::submit_event`]) tells the writer which event it stores. A run of
//! consecutive *independent* event jobs (no replaceable slot to settle, nothing deleted,
//! no reference to an event later in the run; the caller vouches for its follow-up
//! writes) becomes a group: its events are inserted with two statements
//! (`group_insert.rs`), then each job's follow-up runs in order. Any other job runs in
//! its place in the queue, so the order of effects is the order of submission. The
//! rerun after a failure runs every job alone, exactly as on SQLite.
//!
//! This file is the queue and the thread; `jobs.rs` the type-erased jobs and their
//! answers, `batch.rs` how a batch commits (and is rerun when a job fails), `groups.rs`
//! which consecutive event jobs PostgreSQL inserts together.

mod batch;
mod groups;
mod jobs;
mod metrics;

use super::change_mark::ChangeCounter;
use super::checkpoint::Checkpointer;
use super::conn::{Backend, Conn};
use super::events::InsertOutcome;
use super::group_writes::GroupWrites;
use super::pool::{OwnedConn, Pool};
use super::StoreError;
use crate::error::Reason;
use crate::stored::StoredEvent;
use batch::{commit_batch, run_grouped, run_in_turn};
use jobs::{AnyBox, FollowUp, Job, Request, Work};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

pub(crate) use jobs::Answer;
pub use metrics::WriterMetrics;

/// Most jobs committed together.
const MAX_BATCH: usize = 512;
/// Jobs that may wait for the writer before submitters are slowed down.
const QUEUE_DEPTH: usize = 8_192;

pub(crate) struct Writer {
    /// `None` once shutdown began: later writes are refused, queued ones still finish.
    sender: RwLock<Option<mpsc::Sender<Request>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// SQLite only: WAL checkpoints off the writer's path.
    checkpointer: Option<Arc<Checkpointer>>,
    /// Queue depth and batch sizes, registered by the relay's `Metrics`.
    metrics: WriterMetrics,
}

impl Writer {
    /// `changes` is moved after every commit that may have changed events, before its
    /// answers leave.
    pub(crate) fn start(pool: Pool, changes: Arc<ChangeCounter>) -> Result<Writer, StoreError> {
        let spawn_error = |what: &str, e: std::io::Error| {
            StoreError::Connect(format!("spawning the {what} thread: {e}"))
        };
        let checkpointer = match pool.backend() {
            Backend::Sqlite => Some(Arc::new(
                Checkpointer::start(pool.clone()).map_err(|e| spawn_error("checkpoint", e))?,
            )),
            Backend::Postgres => None,
        };
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let metrics = WriterMetrics::default();
        let thread = std::thread::Builder::new()
            .name("buzz-store-writer".into())
            .spawn({
                let checkpointer = checkpointer.clone();
                let metrics = metrics.clone();
                move || serve(pool, rx, checkpointer.as_deref(), &metrics, &changes)
            })
            .map_err(|e| {
                if let Some(checkpointer) = &checkpointer {
                    checkpointer.stop();
                }
                spawn_error("writer", e)
            })?;
        Ok(Writer {
            sender: RwLock::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            checkpointer,
            metrics,
        })
    }

    pub(crate) fn metrics(&self) -> &WriterMetrics {
        &self.metrics
    }

    pub(crate) async fn submit<R, F>(&self, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        let job: Job = Box::new(move |conn| f(conn).map(|r| Box::new(r) as AnyBox));
        self.queue(Work::Any(job)).await
    }

    /// [`Writer::submit`] for writes that change no `events` row.
    pub(crate) async fn submit_own_rows<R, F>(&self, f: F) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>) -> Result<R, Reason> + Send + 'static,
    {
        let job: Job = Box::new(move |conn| f(conn).map(|r| Box::new(r) as AnyBox));
        self.queue(Work::OwnRows(job)).await
    }

    /// Store `event`, then run `then` with the outcome, in the group transaction.
    /// `independent`: `then` changes no other event's rows and reads none but the ones
    /// the event names in its `e` tags, and the event settles no replaceable slot — so
    /// on PostgreSQL it may be inserted together with its neighbours.
    pub(crate) async fn submit_event<R, F>(
        &self,
        event: Arc<StoredEvent>,
        independent: bool,
        then: F,
    ) -> Result<R, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>, InsertOutcome, &mut GroupWrites) -> Result<R, Reason> + Send + 'static,
    {
        let then: FollowUp = Box::new(move |conn, outcome, writes| {
            then(conn, outcome, writes).map(|r| Box::new(r) as AnyBox)
        });
        let independent = independent && event.event.replace_key().is_none();
        self.queue(Work::Event {
            event,
            independent,
            then,
        })
        .await
    }

    /// [`Writer::submit_event`] in two steps: this returns once the job is in the
    /// writer's queue (after every job queued before it, before every job queued after),
    /// and the returned future is its answer. Imports queue many events in file order
    /// this way and collect the answers later, so group commits form behind them.
    pub(crate) async fn queue_event<R, F>(
        &self,
        event: Arc<StoredEvent>,
        independent: bool,
        then: F,
    ) -> Result<Answer<R>, Reason>
    where
        R: Send + 'static,
        F: Fn(&mut Conn<'_>, InsertOutcome, &mut GroupWrites) -> Result<R, Reason> + Send + 'static,
    {
        let then: FollowUp = Box::new(move |conn, outcome, writes| {
            then(conn, outcome, writes).map(|r| Box::new(r) as AnyBox)
        });
        let independent = independent && event.event.replace_key().is_none();
        let answer = self
            .enqueue(Work::Event {
                event,
                independent,
                then,
            })
            .await?;
        Ok(Answer {
            answer,
            _type: std::marker::PhantomData,
        })
    }

    async fn queue<R: Send + 'static>(&self, work: Work) -> Result<R, Reason> {
        Answer {
            answer: self.enqueue(work).await?,
            _type: std::marker::PhantomData,
        }
        .await
    }

    /// Put `work` in the queue; the receiver gets its answer after the commit.
    async fn enqueue(
        &self,
        work: Work,
    ) -> Result<oneshot::Receiver<Result<AnyBox, Reason>>, Reason> {
        let gone = || Reason::Unavailable("the relay is shutting down".into());
        let sender = self
            .sender
            .read()
            .map_err(|_| gone())?
            .clone()
            .ok_or_else(gone)?;
        let (reply, answer) = oneshot::channel();
        // Counted before sending: the writer may take the job (and count it out) at once.
        self.metrics.queue_depth.inc();
        if sender.send(Request { work, reply }).await.is_err() {
            self.metrics.queue_depth.dec();
            return Err(gone());
        }
        Ok(answer)
    }

    pub(crate) async fn shutdown(&self) {
        if let Ok(mut sender) = self.sender.write() {
            sender.take();
        }
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        let checkpointer = self.checkpointer.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(handle) = handle {
                let _ = handle.join();
            }
            // After the last commit: the final checkpoint sees every write.
            if let Some(checkpointer) = checkpointer {
                checkpointer.stop();
            }
        })
        .await;
    }
}

fn serve(
    pool: Pool,
    mut rx: mpsc::Receiver<Request>,
    checkpointer: Option<&Checkpointer>,
    metrics: &WriterMetrics,
    changes: &ChangeCounter,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // The writer keeps its connection between batches (warm statement cache); after a
    // failed commit it takes a fresh one, in case the old one is broken.
    let mut held: Option<OwnedConn> = None;
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
        metrics.queue_depth.dec_by(batch.len() as i64);
        if held.is_none() {
            match pool.take() {
                Ok(conn) => held = Some(conn),
                Err(err) => {
                    // Dropping the batch drops its reply senders: each submitter gets an
                    // internal error naming the stopped writer.
                    tracing::error!(error = %err, "storage writer could not get a connection");
                    batch.clear();
                    continue;
                }
            }
        }
        let jobs = std::mem::take(&mut batch);
        let (size, started) = (jobs.len(), std::time::Instant::now());
        // Every job but one that vouched for changing no event (`change_mark.rs`).
        let changes_events = jobs.iter().any(|r| !matches!(r.work, Work::OwnRows(_)));
        let after_commit = |conn: &mut Conn<'_>| {
            if changes_events {
                changes.committed(conn);
            }
        };
        let committed = match held.as_mut() {
            Some(OwnedConn::Sqlite(c)) => commit_batch(
                &mut **c,
                |c| Conn::Sqlite(c),
                |c, jobs, results| run_in_turn(&mut Conn::Sqlite(c), jobs, results),
                after_commit,
                jobs,
            ),
            Some(OwnedConn::Pg(c)) => {
                commit_batch(&mut **c, |c| Conn::Pg(c), run_grouped, after_commit, jobs)
            }
            None => false,
        };
        // For operators sizing a deployment: how full batches are and what one costs.
        tracing::debug!(
            jobs = size,
            micros = started.elapsed().as_micros() as u64,
            committed,
            "storage batch"
        );
        metrics.batch(size, committed);
        if !committed {
            held = None;
        } else if let Some(checkpointer) = checkpointer {
            checkpointer.committed();
        }
    }
    // Every sender is gone (shutdown, or the store was dropped): no more commits.
    if let Some(checkpointer) = checkpointer {
        checkpointer.finish();
    }
}
