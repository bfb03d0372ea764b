//! The access service's figures: policy decisions it counts as it makes them, and the
//! policy engines' loads read at scrape time; registered by the relay's `Metrics`
//! (`crate::metrics`), which sits above the access service.

use crate::error::Reason;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Counters by a label set of fixed names and closed values (`crate::metrics::Labels`).
type Counters = Family<Vec<(&'static str, &'static str)>, Counter>;

/// Policy decisions; the access service owns them (`access/mod.rs`).
#[derive(Clone, Debug, Default)]
pub struct PolicyMetrics {
    /// Calls by `entry_point` (`can_read`, `can_write`) and `verdict` (`allow`, `deny`,
    /// `error`).
    pub decisions: Counters,
    /// Denials that were rate limits, by `entry_point`.
    pub rate_limited: Counters,
}

impl PolicyMetrics {
    /// Count one policy call's outcome.
    pub fn record(&self, entry_point: &'static str, outcome: &Result<(), Reason>) {
        let verdict = match outcome {
            Ok(()) => "allow",
            Err(Reason::PolicyFailure(_)) => "error",
            Err(_) => "deny",
        };
        self.decisions
            .get_or_create(&vec![("entry_point", entry_point), ("verdict", verdict)])
            .inc();
        if matches!(outcome, Err(Reason::RateLimited(_))) {
            self.rate_limited
                .get_or_create(&vec![("entry_point", entry_point)])
                .inc();
        }
    }
}

/// The policy engines' load figures, read at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyLoads {
    /// Successful loads and reloads, summed over communities.
    pub generation: u64,
    /// Unix seconds of the latest successful load (0: policies disabled).
    pub loaded_at: u64,
    /// Reloads that failed, summed over communities.
    pub failed_reloads: u64,
}
