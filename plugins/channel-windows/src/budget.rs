//! Thread-window resource budgets (NIP-CW "Resource Limits and Recovery").
//!
//! One [`Meter`] is shared by every thread-window filter of a query, so four windows
//! together get the same allowance as one. Work is charged as it is read — every raw
//! row, including probes and tombstones, before it is reconstructed — and the first
//! charge over a limit fails the whole query with `503` (`Reason::Unavailable`): a
//! partial page would be indistinguishable from a complete one.

use buzz_core::error::Reason;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The allowance of one query's thread windows. [`Default`] is Buzz's documented
/// allowance; tests construct smaller ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadBudgets {
    /// Auxiliary-closure SQL statements.
    pub aux_scans: u64,
    /// Raw reply and auxiliary rows read, probes and tombstones included.
    pub raw_rows: u64,
    /// Stored `content` plus serialized `tags` bytes of those rows.
    pub payload_bytes: u64,
    /// Serialized bytes of the events answered (rows, aux and bounds).
    pub output_bytes: u64,
    /// Wall time for all thread windows of the query, access refresh included.
    pub deadline: Duration,
}

impl Default for ThreadBudgets {
    fn default() -> Self {
        ThreadBudgets {
            aux_scans: 64,
            raw_rows: 8_192,
            payload_bytes: 8 * 1024 * 1024,
            output_bytes: 8 * 1024 * 1024,
            deadline: Duration::from_secs(8),
        }
    }
}

/// What one query's thread windows have used so far. Atomic because the reads run on
/// the blocking pool while the async side charges output; never contended in practice.
#[derive(Debug)]
pub(crate) struct Meter {
    limits: ThreadBudgets,
    deadline: Instant,
    scans: AtomicU64,
    rows: AtomicU64,
    payload: AtomicU64,
    output: AtomicU64,
}

fn exhausted(what: &str) -> Reason {
    Reason::Unavailable(format!(
        "thread window {what} budget exhausted; lower limit, split the query or drop include_aux"
    ))
}

/// Add `amount` to `counter`; fail when the total passes `limit`.
fn charge(counter: &AtomicU64, amount: u64, limit: u64, what: &str) -> Result<(), Reason> {
    let total = counter
        .fetch_add(amount, Ordering::Relaxed)
        .saturating_add(amount);
    if total > limit {
        Err(exhausted(what))
    } else {
        Ok(())
    }
}

impl Meter {
    pub(crate) fn start(limits: ThreadBudgets) -> Meter {
        Meter {
            limits,
            deadline: Instant::now() + limits.deadline,
            scans: AtomicU64::new(0),
            rows: AtomicU64::new(0),
            payload: AtomicU64::new(0),
            output: AtomicU64::new(0),
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Fail once the deadline has passed.
    pub(crate) fn on_time(&self) -> Result<(), Reason> {
        if Instant::now() > self.deadline {
            Err(Self::timed_out())
        } else {
            Ok(())
        }
    }

    pub(crate) fn timed_out() -> Reason {
        Reason::Unavailable("thread window deadline passed; retry with backoff".into())
    }

    /// One auxiliary SQL statement is about to run.
    pub(crate) fn aux_scan(&self) -> Result<(), Reason> {
        self.on_time()?;
        charge(&self.scans, 1, self.limits.aux_scans, "aux scan")
    }

    /// One raw row was read, carrying `payload` bytes of content plus tags.
    pub(crate) fn raw_row(&self, payload: usize) -> Result<(), Reason> {
        charge(&self.rows, 1, self.limits.raw_rows, "row")?;
        charge(
            &self.payload,
            payload as u64,
            self.limits.payload_bytes,
            "payload",
        )
    }

    /// Rows still allowed: a scan asks for one more than this, so reading it proves the
    /// budget is exceeded without reading the rest.
    pub(crate) fn rows_left(&self) -> u64 {
        self.limits
            .raw_rows
            .saturating_sub(self.rows.load(Ordering::Relaxed))
    }

    /// `bytes` of serialized output are about to be answered.
    pub(crate) fn output(&self, bytes: usize) -> Result<(), Reason> {
        charge(
            &self.output,
            bytes as u64,
            self.limits.output_bytes,
            "output",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_budget_fails_on_the_first_charge_over_it() {
        let meter = Meter::start(ThreadBudgets {
            aux_scans: 1,
            raw_rows: 2,
            payload_bytes: 10,
            output_bytes: 5,
            deadline: Duration::from_secs(60),
        });
        assert!(meter.aux_scan().is_ok());
        assert!(matches!(meter.aux_scan(), Err(Reason::Unavailable(_))));
        assert!(meter.raw_row(4).is_ok());
        assert_eq!(meter.rows_left(), 1);
        assert!(matches!(meter.raw_row(7), Err(Reason::Unavailable(_))));
        assert!(matches!(meter.raw_row(0), Err(Reason::Unavailable(_))));
        assert!(meter.output(5).is_ok());
        assert!(matches!(meter.output(1), Err(Reason::Unavailable(_))));
        let late = Meter::start(ThreadBudgets {
            deadline: Duration::ZERO,
            ..ThreadBudgets::default()
        });
        std::thread::sleep(Duration::from_millis(2));
        assert!(matches!(late.on_time(), Err(Reason::Unavailable(_))));
    }
}
