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
//!
//! On PostgreSQL every statement is a network round trip, so an event job
//! ([`Writer::submit_event`]) tells the writer which event it stores. A run of
//! consecutive *independent* event jobs (no replaceable slot to settle, nothing deleted,
//! no reference to an event later in the run; the caller vouches for its follow-up
//! writes) becomes a group: its events are inserted with two statements
//! (`group_insert.rs`), then each job's follow-up runs in order. Any other job runs in
//! its place in the queue, so the order of effects is the order of submission. The
//! replay after a failure runs every job alone, exactly as on SQLite.

use super::checkpoint::Checkpointer;
use super::conn::{Backend, Conn};
use super::events::{insert_event, InsertOutcome};
use super::group_insert::insert_group;
use super::group_writes::GroupWrites;
use super::pool::{OwnedConn, Pool};
use super::StoreError;
use crate::error::Reason;
use crate::metrics::WriterMetrics;
use crate::stored::StoredEvent;
use diesel::{Connection, PgConnection};
use std::any::Any;
use std::collections::HashSet;
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
/// What follows an event's insert, given its outcome.
type FollowUp =
    Box<dyn Fn(&mut Conn<'_>, InsertOutcome, &mut GroupWrites) -> Result<AnyBox, Reason> + Send>;

type Reply = oneshot::Sender<Result<AnyBox, Reason>>;

/// One job's work.
enum Work {
    /// Any writes.
    Any(Job),
    /// Store `event`, then run `then` with the outcome.
    Event {
        event: Arc<StoredEvent>,
        /// May be inserted in one statement with neighbouring independent events.
        independent: bool,
        then: FollowUp,
    },
}

struct Request {
    work: Work,
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
                move || serve(pool, rx, checkpointer.as_deref(), &metrics)
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

/// The answer of a queued job ([`Writer::queue_event`]), arriving after its commit.
pub(crate) struct Answer<R> {
    answer: oneshot::Receiver<Result<AnyBox, Reason>>,
    _type: std::marker::PhantomData<fn() -> R>,
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

fn serve(
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
        let (size, started) = (jobs.len(), std::time::Instant::now());
        let committed = match held.as_mut() {
            Some(OwnedConn::Sqlite(c)) => commit_batch(
                &mut **c,
                |c| Conn::Sqlite(c),
                |c, jobs, results| run_in_turn(&mut Conn::Sqlite(c), jobs, results),
                jobs,
            ),
            Some(OwnedConn::Pg(c)) => commit_batch(&mut **c, |c| Conn::Pg(c), run_grouped, jobs),
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

/// Run `jobs` in one transaction and answer after the commit. Optimistically the jobs
/// run back to back; if one fails, that transaction is rolled back and the batch runs
/// again with each job in its own savepoint, so a failing job rolls back alone.
/// Returns whether a transaction committed.
fn commit_batch<C: Connection>(
    conn: &mut C,
    wrap: impl Fn(&mut C) -> Conn<'_>,
    optimistic: impl Fn(&mut C, &[Request], &mut Vec<Result<AnyBox, Reason>>) -> Result<(), Reason>,
    jobs: Vec<Request>,
) -> bool {
    let mut results: Vec<Result<AnyBox, Reason>> = Vec::with_capacity(jobs.len());
    let optimistic =
        conn.transaction::<(), Reason, _>(|conn| optimistic(conn, &jobs, &mut results));
    let committed = match optimistic {
        Ok(()) => Ok(()),
        // The database said "not now" (a statement or lock timeout, a lost connection):
        // not one job's fault, and replaying job by job would meet it again once per
        // job. Nothing was committed; every job of the batch gets the retryable answer.
        Err(Reason::Unavailable(text)) => {
            tracing::warn!(cause = %text, jobs = jobs.len(), "storage batch rolled back");
            for request in jobs {
                let _ = request.reply.send(Err(Reason::Unavailable(text.clone())));
            }
            return false;
        }
        Err(_) => {
            results.clear();
            conn.transaction::<(), diesel::result::Error, _>(|conn| {
                for request in &jobs {
                    results.push(
                        conn.transaction::<AnyBox, Reason, _>(|c| run(&mut wrap(c), &request.work)),
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

/// One job alone.
fn run(conn: &mut Conn<'_>, work: &Work) -> Result<AnyBox, Reason> {
    match work {
        Work::Any(job) => job(conn),
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

/// Every job in turn (SQLite: statements are in-process calls, nothing to group).
fn run_in_turn(
    conn: &mut Conn<'_>,
    jobs: &[Request],
    results: &mut Vec<Result<AnyBox, Reason>>,
) -> Result<(), Reason> {
    for request in jobs {
        results.push(Ok(run(conn, &request.work)?));
    }
    Ok(())
}

/// PostgreSQL: jobs in order, each run of independent event jobs inserted as a group.
fn run_grouped(
    conn: &mut PgConnection,
    jobs: &[Request],
    results: &mut Vec<Result<AnyBox, Reason>>,
) -> Result<(), Reason> {
    let mut rest = jobs;
    while !rest.is_empty() {
        let group = group_len(rest);
        if group < 2 {
            results.push(Ok(run(&mut Conn::Pg(conn), &rest[0].work)?));
            rest = &rest[1..];
            continue;
        }
        let (now, later) = rest.split_at(group);
        let members: Vec<(&StoredEvent, &FollowUp)> = now
            .iter()
            .filter_map(|request| match &request.work {
                Work::Event { event, then, .. } => Some((&**event, then)),
                Work::Any(_) => None,
            })
            .collect();
        let events: Vec<&StoredEvent> = members.iter().map(|(event, _)| *event).collect();
        let outcomes = insert_group(conn, &events)?;
        let mut writes = GroupWrites::deferred();
        for ((_, then), outcome) in members.iter().zip(outcomes) {
            results.push(Ok(then(&mut Conn::Pg(conn), outcome, &mut writes)?));
        }
        // Before the next job: it may read what the group's follow-ups wrote.
        writes.flush(conn)?;
        rest = later;
    }
    Ok(())
}

/// How many leading jobs of `jobs` form one group: independent event jobs, up to the
/// first whose event an earlier member names in an `e` tag (that earlier member's
/// follow-up must not find it stored yet, as it would not one job at a time), or that
/// names an earlier member itself (its follow-up reads that member's rows, which the
/// group writes only after every follow-up: `GroupWrites`).
fn group_len(jobs: &[Request]) -> usize {
    let mut named: HashSet<(i64, &str)> = HashSet::new();
    let mut members: HashSet<(i64, &str)> = HashSet::new();
    for (len, request) in jobs.iter().enumerate() {
        let Work::Event {
            event,
            independent: true,
            ..
        } = &request.work
        else {
            return len;
        };
        let community = event.community_id;
        if named.contains(&(community, event.event.id.as_str()))
            || event
                .event
                .tag_values("e")
                .any(|id| members.contains(&(community, id)))
        {
            return len;
        }
        named.extend(event.event.tag_values("e").map(|id| (community, id)));
        members.insert((community, event.event.id.as_str()));
    }
    jobs.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;

    fn event_job(event: buzz_nostr::event::Event, independent: bool) -> Request {
        let (reply, _answer) = oneshot::channel();
        Request {
            work: Work::Event {
                event: Arc::new(StoredEvent {
                    channel: event.channel_id().map(str::to_owned),
                    event,
                    community_id: 1,
                    received_at: 0,
                }),
                independent,
                then: Box::new(|_, _, _| Ok(Box::new(()) as AnyBox)),
            },
            reply,
        }
    }

    fn any_job() -> Request {
        let (reply, _answer) = oneshot::channel();
        Request {
            work: Work::Any(Box::new(|_| Ok(Box::new(()) as AnyBox))),
            reply,
        }
    }

    /// A group ends before a job that is not an independent event, before an event an
    /// earlier member names (that member's follow-up must not find it stored yet), and
    /// before an event that names an earlier member (it must find that member's rows).
    #[test]
    fn groups_stop_where_one_at_a_time_would_differ() {
        let keys = Keys::generate();
        let note = |i: i64| keys.sign(1, vec![], &format!("note {i}"), 1_000 + i);
        let (a, b, c) = (note(1), note(2), note(3));
        let names_c = keys.sign(1, vec![vec!["e".into(), c.id.clone()]], "re", 1_000);

        let jobs = vec![
            event_job(a.clone(), true),
            event_job(b.clone(), true),
            any_job(),
            event_job(c.clone(), true),
        ];
        assert_eq!(group_len(&jobs), 2);
        assert_eq!(group_len(&jobs[2..]), 0);

        let jobs = vec![event_job(a.clone(), true), event_job(b.clone(), false)];
        assert_eq!(group_len(&jobs), 1);

        // `names_c` comes first and names `c`: `c` starts the next group.
        let jobs = vec![
            event_job(names_c.clone(), true),
            event_job(a.clone(), true),
            event_job(c.clone(), true),
            event_job(b.clone(), true),
        ];
        assert_eq!(group_len(&jobs), 2);
        assert_eq!(group_len(&jobs[2..]), 2);

        // Naming an event earlier in the group ends it too: the earlier member's rows
        // (its thread row, say) are written only after the group's follow-ups.
        let jobs = vec![
            event_job(c, true),
            event_job(names_c, true),
            event_job(a, true),
        ];
        assert_eq!(group_len(&jobs), 1);
        assert_eq!(group_len(&jobs[1..]), 2);
    }
}
