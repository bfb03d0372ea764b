//! The group-committing writer.
//!
//! One thread owns the only writing connection. It takes every job queued at that moment
//! (up to [`MAX_BATCH`]), runs them in one transaction, commits once, and only then
//! answers each job. Jobs first run back to back; if one fails, the batch is replayed
//! with a savepoint per job so that the failing job rolls back alone (savepoints cost
//! two statements per job, which the common all-succeed batch does without). A failing
//! commit fails every job of the batch. Answering after the commit is what lets
//! the relay say `OK true` only for durable events. On SQLite the writer only appends to
//! the WAL; copying it back into the database runs on a thread of its own
//! (`checkpoint.rs`), which each commit wakes.

use super::checkpoint::Checkpointer;
use super::conn::{Backend, Conn};
use super::pool::{OwnedConn, Pool};
use super::StoreError;
use crate::error::Reason;
use crate::metrics::WriterMetrics;
use diesel::Connection;
use std::any::Any;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

/// Most jobs committed together.
const MAX_BATCH: usize = 512;
/// Jobs that may wait for the writer before submitters are slowed down.
const QUEUE_DEPTH: usize = 8_192;

type AnyBox = Box<dyn Any + Send>;
/// `Fn`, not `FnOnce`: a batch whose optimistic run hits a failing job is run again,
/// job by job in savepoints.
type Job = Box<dyn Fn(&mut Conn<'_>) -> Result<AnyBox, Reason> + Send>;

type Reply = oneshot::Sender<Result<AnyBox, Reason>>;

struct Request {
    job: Job,
    reply: Reply,
}

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
    pub(crate) fn start(pool: Pool) -> Result<Writer, StoreError> {
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
                move || run(pool, rx, checkpointer.as_deref(), &metrics)
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
        let gone = || Reason::Unavailable("the relay is shutting down".into());
        let sender = self
            .sender
            .read()
            .map_err(|_| gone())?
            .clone()
            .ok_or_else(gone)?;
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| f(conn).map(|r| Box::new(r) as AnyBox));
        // Counted before sending: the writer may take the job (and count it out) at once.
        self.metrics.queue_depth.inc();
        if sender.send(Request { job, reply }).await.is_err() {
            self.metrics.queue_depth.dec();
            return Err(gone());
        }
        let value = answer
            .await
            .map_err(|_| Reason::Internal(StoreError::WriterGone.into()))??;
        value.downcast::<R>().map(|b| *b).map_err(|_| {
            Reason::Internal(anyhow::anyhow!("writer returned a value of the wrong type"))
        })
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

fn run(
    pool: Pool,
    mut rx: mpsc::Receiver<Request>,
    checkpointer: Option<&Checkpointer>,
    metrics: &WriterMetrics,
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
        let size = jobs.len();
        let committed = match held.as_mut() {
            Some(OwnedConn::Sqlite(c)) => commit_batch(&mut **c, |c| Conn::Sqlite(c), jobs),
            Some(OwnedConn::Pg(c)) => commit_batch(&mut **c, |c| Conn::Pg(c), jobs),
            None => false,
        };
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

/// Run `jobs` in one transaction and answer after the commit. Optimistically the jobs
/// run back to back; if one fails, that transaction is rolled back and the batch runs
/// again with each job in its own savepoint, so a failing job rolls back alone.
/// Returns whether a transaction committed.
fn commit_batch<C: Connection>(
    conn: &mut C,
    wrap: impl Fn(&mut C) -> Conn<'_>,
    jobs: Vec<Request>,
) -> bool {
    let mut results: Vec<Result<AnyBox, Reason>> = Vec::with_capacity(jobs.len());
    let optimistic = conn.transaction::<(), Reason, _>(|conn| {
        for request in &jobs {
            results.push(Ok((request.job)(&mut wrap(conn))?));
        }
        Ok(())
    });
    let committed = match optimistic {
        Ok(()) => Ok(()),
        Err(_) => {
            results.clear();
            conn.transaction::<(), diesel::result::Error, _>(|conn| {
                for request in &jobs {
                    results.push(
                        conn.transaction::<AnyBox, Reason, _>(|c| (request.job)(&mut wrap(c))),
                    );
                }
                Ok(())
            })
        }
    };
    match committed {
        Ok(()) => {
            for (request, result) in jobs.into_iter().zip(results) {
                let _ = request.reply.send(result);
            }
            true
        }
        Err(err) => {
            let err = StoreError::Db(err);
            let cause = format!("commit failed: {err}");
            tracing::error!(%cause, jobs = jobs.len(), "storage batch rolled back");
            let transient = err.transient();
            for request in jobs {
                let reason = match transient {
                    Some(text) => Reason::Unavailable(text.to_owned()),
                    None => Reason::Internal(anyhow::anyhow!(cause.clone())),
                };
                let _ = request.reply.send(Err(reason));
            }
            false
        }
    }
}
