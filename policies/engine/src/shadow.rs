//! Shadow mode: a candidate rulebook runs beside the enforced one on live traffic and
//! decides nothing. Each disagreement is counted and logged, so an operator sees what a
//! rule change would do before switching.
//!
//! The candidate never runs on the request path: the enforced check hands a copy of the
//! request and its own outcome to one worker thread through a bounded queue and returns.
//! When the queue is full the comparison is skipped (and counted), never waited for. The
//! candidate is a full [`PolicyEngine`] with the same limits (instructions, memory, wall
//! time) and its own rate-limit counters, so it cannot spend the enforced script's.

use crate::engine::PolicyEngine;
use crate::error::PolicyError;
use crate::facts::{ReadRequest, WriteRequest};
use crate::verdict::Verdict;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Comparisons waiting for the worker; more are skipped.
const QUEUE: usize = 1024;

/// What a check decided, as compared: allow, a deny of some kind (the message is wording,
/// not a decision), or a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    Allow,
    Deny(crate::verdict::DenyKind),
    Failure,
}

impl Decision {
    fn of(result: &Result<Verdict, PolicyError>) -> Decision {
        match result {
            Ok(Verdict::Allow) => Decision::Allow,
            Ok(Verdict::Deny { kind, .. }) => Decision::Deny(*kind),
            Err(_) => Decision::Failure,
        }
    }
}

fn describe(result: &Result<Verdict, PolicyError>) -> String {
    match result {
        Ok(Verdict::Allow) => "allow".to_owned(),
        Ok(Verdict::Deny { kind, message }) => format!("deny {kind:?}: {message}"),
        Err(err) => format!("failure: {err}"),
    }
}

enum Job {
    Write(Box<WriteRequest>, String, Decision),
    Read(Box<ReadRequest>, String, Decision),
}

/// Counts since start.
#[derive(Debug, Default)]
pub(crate) struct ShadowStats {
    compared: AtomicU64,
    disagreed: AtomicU64,
    skipped: AtomicU64,
}

/// A point-in-time copy of [`ShadowStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShadowCounts {
    /// Checks the candidate also ran.
    pub compared: u64,
    /// Of those, how many decided differently.
    pub disagreed: u64,
    /// Checks not compared because the worker was behind.
    pub skipped: u64,
}

impl ShadowStats {
    pub(crate) fn counts(&self) -> ShadowCounts {
        ShadowCounts {
            compared: self.compared.load(Ordering::Relaxed),
            disagreed: self.disagreed.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }
}

/// The enforced engine's link to its candidate.
pub(crate) struct Shadow {
    jobs: SyncSender<Job>,
    stats: Arc<ShadowStats>,
}

impl Shadow {
    /// Start the worker for `candidate`; `label` names it in logs (e.g. the community).
    pub(crate) fn start(candidate: Arc<PolicyEngine>, label: String) -> std::io::Result<Shadow> {
        let (jobs, queue) = sync_channel(QUEUE);
        let stats = Arc::new(ShadowStats::default());
        let worker_stats = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("buzz-policy-shadow".to_owned())
            .spawn(move || work(candidate, queue, worker_stats, label))?;
        Ok(Shadow { jobs, stats })
    }

    pub(crate) fn stats(&self) -> &ShadowStats {
        &self.stats
    }

    pub(crate) fn offer_write(&self, req: &WriteRequest, enforced: &Result<Verdict, PolicyError>) {
        self.offer(Job::Write(
            Box::new(req.clone()),
            describe(enforced),
            Decision::of(enforced),
        ));
    }

    pub(crate) fn offer_read(&self, req: &ReadRequest, enforced: &Result<Verdict, PolicyError>) {
        self.offer(Job::Read(
            Box::new(req.clone()),
            describe(enforced),
            Decision::of(enforced),
        ));
    }

    fn offer(&self, job: Job) {
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Runs until the enforced engine (and with it the sender) is dropped.
fn work(
    candidate: Arc<PolicyEngine>,
    queue: Receiver<Job>,
    stats: Arc<ShadowStats>,
    label: String,
) {
    for job in queue {
        let (entry, subject, enforced_text, enforced, result) = match job {
            Job::Write(req, text, decision) => {
                let result = candidate.check_write(&req);
                (
                    "moderate+can_write",
                    format!("event {}", req.event.id),
                    text,
                    decision,
                    result,
                )
            }
            Job::Read(req, text, decision) => {
                let result = candidate.check_read(&req);
                (
                    "can_read",
                    format!("channel {}", req.channel.id),
                    text,
                    decision,
                    result,
                )
            }
        };
        stats.compared.fetch_add(1, Ordering::Relaxed);
        if Decision::of(&result) != enforced {
            stats.disagreed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                policies = %label,
                entry,
                subject = %subject,
                enforced = %enforced_text,
                shadow = %describe(&result),
                "shadow policy disagrees"
            );
        }
    }
}
