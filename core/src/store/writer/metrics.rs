//! The writer's figures, owned by the writer and registered by the relay's `Metrics`
//! (`crate::metrics`), which sits above the store.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

/// Counters by a label set of fixed names and closed values (`crate::metrics::Labels`).
type Counters = Family<Vec<(&'static str, &'static str)>, Counter>;

/// The group-committing writer's figures; the writer owns them (`writer/mod.rs`).
#[derive(Clone, Debug)]
pub struct WriterMetrics {
    /// Jobs submitted and not yet taken into a batch.
    pub queue_depth: Gauge,
    /// Jobs per committed or failed batch.
    pub batch_size: Histogram,
    /// Batches by `outcome` (`committed`, `failed`).
    pub batches: Counters,
}

impl Default for WriterMetrics {
    fn default() -> Self {
        WriterMetrics {
            queue_depth: Gauge::default(),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 10)),
            batches: Counters::default(),
        }
    }
}

impl WriterMetrics {
    pub fn batch(&self, jobs: usize, committed: bool) {
        self.batch_size.observe(jobs as f64);
        let outcome = if committed { "committed" } else { "failed" };
        self.batches
            .get_or_create(&vec![("outcome", outcome)])
            .inc();
    }
}
