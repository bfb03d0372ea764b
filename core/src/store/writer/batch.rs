//! How a batch of jobs commits: back to back in one transaction, rerun with a savepoint
//! per job only when one fails (never when the database said "not now"); on PostgreSQL
//! runs of independent event jobs inserted as one group.

use super::super::change_mark::note_rewrite;
use super::super::conn::Conn;
use super::super::group_insert::insert_group;
use super::super::group_writes::GroupWrites;
use super::super::StoreError;
use super::groups::group_len;
use super::jobs::{run, AnyBox, FollowUp, Request, Work};
use crate::error::Reason;
use crate::stored::StoredEvent;
use diesel::{Connection, PgConnection};

/// Run `jobs` in one transaction and answer after the commit. Optimistically the jobs
/// run back to back; if one fails, that transaction is rolled back and the batch runs
/// again with each job in its own savepoint, so a failing job rolls back alone.
/// `after_commit` runs once the transaction committed, before any job is answered.
/// A batch with a job that may do more than append an independent event is counted as a
/// rewrite in its transaction (`change_mark.rs`). Returns whether a transaction committed.
pub(super) fn commit_batch<C: Connection>(
    conn: &mut C,
    wrap: impl Fn(&mut C) -> Conn<'_>,
    optimistic: impl Fn(&mut C, &[Request], &mut Vec<Result<AnyBox, Reason>>) -> Result<(), Reason>,
    after_commit: impl FnOnce(&mut Conn<'_>),
    jobs: Vec<Request>,
) -> bool {
    let mut results: Vec<Result<AnyBox, Reason>> = Vec::with_capacity(jobs.len());
    let rewrites = jobs.iter().any(|request| request.work.may_rewrite());
    let optimistic = conn.transaction::<(), Reason, _>(|conn| {
        if rewrites {
            note_rewrite(&mut wrap(conn))?;
        }
        optimistic(conn, &jobs, &mut results)
    });
    let committed = match optimistic {
        Ok(()) => Ok(()),
        // The database said "not now" (a statement or lock timeout, a lost connection):
        // not one job's fault, and rerunning job by job would meet it again once per
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
                if rewrites {
                    note_rewrite(&mut wrap(conn))?;
                }
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
            after_commit(&mut wrap(conn));
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

/// Every job in turn (SQLite: statements are in-process calls, nothing to group).
pub(super) fn run_in_turn(
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
pub(super) fn run_grouped(
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
                Work::Any(_) | Work::OwnRows(_) => None,
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
