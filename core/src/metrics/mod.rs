//! What the relay counts, for Prometheus (`GET /metrics` on `[metrics] bind`, served by
//! `http/metrics.rs`) and `buzz-admin`'s Overview.
//!
//! One [`Metrics`] per relay (tests run many relays in one process, each with its own
//! figures). Components that exist before it (the store's writer, the access service)
//! own their handles, defined beside them ([`WriterMetrics`] in the store's writer,
//! [`PolicyMetrics`] in the access service, so neither imports this registry), and
//! [`Metrics::new`] registers those same handles, so nothing has to be wired twice.
//!
//! **Privacy rule:** labels are small closed sets — an outcome, an error prefix, an entry
//! point, a plugin or method name. No payload, pubkey, channel, event id or read
//! position is ever a label (`tests/metrics.rs` checks the whole scrape).

use crate::access::{PolicyLoads, PolicyMetrics};
use crate::error::Reason;
use crate::store::WriterMetrics;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Instant;

/// The content type of [`Metrics::encode`]'s text (OpenMetrics, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency buckets, seconds: 0.1 ms to about 6.5 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// A label set: fixed names, values from closed sets (never request data).
pub type Labels = Vec<(&'static str, &'static str)>;

fn one(name: &'static str, value: &'static str) -> Labels {
    vec![(name, value)]
}

fn two(n1: &'static str, v1: &'static str, n2: &'static str, v2: &'static str) -> Labels {
    vec![(n1, v1), (n2, v2)]
}

type Counters = Family<Labels, Counter>;

/// An event the ingest pipeline answered `OK true` for, as its `outcome` label counts it
/// (the pipeline says which; this registry sits below it and knows no pipeline type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingested {
    /// Stored (or, for ephemeral kinds, delivered).
    Accepted,
    /// Already stored: `OK true` with a `duplicate:` message.
    Duplicate,
}

/// Every figure of one relay process.
pub struct Metrics {
    registry: Registry,
    /// Open WebSocket connections.
    connections: Gauge,
    connections_opened: Counter,
    /// Events through the ingest pipeline by `outcome` (`accepted`, `duplicate`,
    /// `rejected`).
    ingest: Counters,
    ingest_seconds: Histogram,
    /// Queries by `outcome` (`ok`, `rejected`).
    queries: Counters,
    query_seconds: Histogram,
    /// Refusals by `path` (`ingest`, `query`, `nip86`) and `prefix` (NIP-01 prefix).
    errors: Counters,
    /// Plugin refusals by `plugin` and `hook`: `check_event` (`Plugin::reject_event`),
    /// `check_filter` (`Plugin::reject_filter`) — the hooks' former names, kept as label
    /// values so dashboards keep working.
    plugin_rejections: Counters,
    /// NIP-86 calls by `method` (unknown methods count as `unknown`) and `outcome`.
    nip86: Counters,
    /// Successful policy loads and reloads, read at scrape time from the source
    /// [`Metrics::observe_policy_loads`] names, with the last load's time and the
    /// failed reloads.
    policy_generation: Gauge,
    policy_loaded_at: Gauge,
    policy_failed_reloads: Counter,
    /// NIP-40-expired events the background purge deleted (`crate::expiry`).
    expired_purged: Counter,
    /// Plugins' own counts by `plugin` and `name` ([`Metrics::plugin_count`]).
    plugin_counts: Counters,
    loads_source: std::sync::OnceLock<Box<dyn Fn() -> PolicyLoads + Send + Sync>>,
}

/// Decrements the open-connection gauge when the connection ends.
pub struct ConnectionGuard(Gauge);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    pub fn new(writer: &WriterMetrics, policy: &PolicyMetrics) -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("buzz"),
            connections: Gauge::default(),
            connections_opened: Counter::default(),
            ingest: Counters::default(),
            ingest_seconds: latency(),
            queries: Counters::default(),
            query_seconds: latency(),
            errors: Counters::default(),
            plugin_rejections: Counters::default(),
            nip86: Counters::default(),
            policy_generation: Gauge::default(),
            policy_loaded_at: Gauge::default(),
            policy_failed_reloads: Counter::default(),
            expired_purged: Counter::default(),
            plugin_counts: Counters::default(),
            loads_source: std::sync::OnceLock::new(),
        };
        // Registering clones: every handle shares its value with the original.
        let r = &mut m.registry;
        r.register(
            "expired_purged",
            "NIP-40-expired events deleted from storage by the background purge",
            m.expired_purged.clone(),
        );
        r.register(
            "connections",
            "Open WebSocket connections",
            m.connections.clone(),
        );
        r.register(
            "connections_opened",
            "WebSocket connections accepted",
            m.connections_opened.clone(),
        );
        r.register(
            "ingest_events",
            "Events through the ingest pipeline, by outcome",
            m.ingest.clone(),
        );
        r.register(
            "ingest_seconds",
            "Time from receipt to answer of one event (durable when accepted)",
            m.ingest_seconds.clone(),
        );
        r.register(
            "queries",
            "Queries (REQ and POST /query), by outcome",
            m.queries.clone(),
        );
        r.register(
            "query_seconds",
            "Time to check a query and find its matches",
            m.query_seconds.clone(),
        );
        r.register(
            "errors",
            "Refusals by path and NIP-01 prefix",
            m.errors.clone(),
        );
        r.register(
            "plugin_rejections",
            "Refusals by plugin and hook",
            m.plugin_rejections.clone(),
        );
        r.register(
            "plugin_counts",
            "Plugins' own counts (uploads, bytes stored, refusals by reason…), by plugin and name",
            m.plugin_counts.clone(),
        );
        r.register(
            "nip86_requests",
            "NIP-86 management calls, by method and outcome",
            m.nip86.clone(),
        );
        r.register(
            "writer_queue_depth",
            "Write jobs waiting for the writer",
            writer.queue_depth.clone(),
        );
        r.register(
            "writer_batch_size",
            "Write jobs per batch (one transaction, one commit)",
            writer.batch_size.clone(),
        );
        r.register(
            "writer_batches",
            "Writer batches by outcome",
            writer.batches.clone(),
        );
        r.register(
            "policy_decisions",
            "Policy calls by entry point and verdict",
            policy.decisions.clone(),
        );
        r.register(
            "policy_generation",
            "Policy script sets loaded so far, all communities (grows with each successful reload)",
            m.policy_generation.clone(),
        );
        r.register(
            "policy_last_load_timestamp_seconds",
            "Unix time of the latest successful policy load or reload, any community",
            m.policy_loaded_at.clone(),
        );
        r.register(
            "policy_failed_reloads",
            "Policy reloads that failed and kept the last good scripts, all communities",
            m.policy_failed_reloads.clone(),
        );
        r.register(
            "policy_rate_limited",
            "Policy denials that were rate limits, by entry point",
            policy.rate_limited.clone(),
        );
        m
    }

    /// Where the policy figures are read at each scrape (the access service's script
    /// loads; a reload that failed keeps the generation and counts a failure, so a stuck
    /// generation after an edit means the edit did not load). Set once.
    pub fn observe_policy_loads(&self, source: impl Fn() -> PolicyLoads + Send + Sync + 'static) {
        let _ = self.loads_source.set(Box::new(source));
    }

    /// The text a scrape gets.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        if let Some(source) = self.loads_source.get() {
            let loads = source();
            self.policy_generation
                .set(i64::try_from(loads.generation).unwrap_or(i64::MAX));
            self.policy_loaded_at
                .set(i64::try_from(loads.loaded_at).unwrap_or(i64::MAX));
            // A counter only moves forward: add what failed since the last scrape.
            let seen = self.policy_failed_reloads.get();
            self.policy_failed_reloads
                .inc_by(loads.failed_reloads.saturating_sub(seen));
        }
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// A WebSocket connection opened; it counts as open until the guard drops.
    pub fn connection_opened(&self) -> ConnectionGuard {
        self.connections_opened.inc();
        self.connections.inc();
        ConnectionGuard(self.connections.clone())
    }

    /// One event's trip through the ingest pipeline.
    pub fn ingested(&self, started: Instant, outcome: Result<Ingested, &Reason>) {
        self.ingest_seconds.observe(started.elapsed().as_secs_f64());
        let label = match outcome {
            Ok(Ingested::Accepted) => "accepted",
            Ok(Ingested::Duplicate) => "duplicate",
            Err(reason) => {
                self.refused("ingest", reason);
                "rejected"
            }
        };
        self.ingest.get_or_create(&one("outcome", label)).inc();
    }

    /// One query's checks and key reads.
    pub fn queried<T>(&self, started: Instant, outcome: &Result<T, Reason>) {
        self.query_seconds.observe(started.elapsed().as_secs_f64());
        let label = match outcome {
            Ok(_) => "ok",
            Err(reason) => {
                self.refused("query", reason);
                "rejected"
            }
        };
        self.queries.get_or_create(&one("outcome", label)).inc();
    }

    /// A refusal on `path`, counted by its prefix.
    pub fn refused(&self, path: &'static str, reason: &Reason) {
        self.errors
            .get_or_create(&two("path", path, "prefix", reason.prefix()))
            .inc();
    }

    /// The purge deleted `n` expired events.
    pub fn expired_purged(&self, n: usize) {
        self.expired_purged.inc_by(n as u64);
    }

    /// Add `n` to a plugin's own count `name` (`buzz_plugin_counts_total{plugin, name}`).
    /// Both are fixed strings of the plugin's code, never request data.
    pub fn plugin_count(&self, plugin: &'static str, name: &'static str, n: u64) {
        self.plugin_counts
            .get_or_create(&two("plugin", plugin, "name", name))
            .inc_by(n);
    }

    /// A plugin hook refused.
    pub fn plugin_refused(&self, plugin: &'static str, hook: &'static str) {
        self.plugin_rejections
            .get_or_create(&two("plugin", plugin, "hook", hook))
            .inc();
    }

    /// One NIP-86 call (`method` from the closed list of supported ones, or `unknown`).
    pub fn nip86(&self, method: &'static str, outcome: &Result<(), &Reason>) {
        let label = match outcome {
            Ok(()) => "ok",
            Err(reason) => {
                self.refused("nip86", reason);
                reason.prefix()
            }
        };
        self.nip86
            .get_or_create(&two("method", method, "outcome", label))
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_appear_in_the_text_with_their_labels() {
        let writer = WriterMetrics::default();
        let policy = PolicyMetrics::default();
        let metrics = Metrics::new(&writer, &policy);
        let guard = metrics.connection_opened();
        writer.queue_depth.inc();
        writer.batch(3, true);
        policy.record("can_write", &Err(Reason::RateLimited("slow down".into())));
        metrics.refused("ingest", &Reason::Blocked("banned".into()));
        let text = metrics.encode().expect("encodes");
        for line in [
            "buzz_connections 1",
            "buzz_writer_queue_depth 1",
            "buzz_writer_batches_total{outcome=\"committed\"} 1",
            "buzz_policy_decisions_total{entry_point=\"can_write\",verdict=\"deny\"} 1",
            "buzz_policy_rate_limited_total{entry_point=\"can_write\"} 1",
            "buzz_errors_total{path=\"ingest\",prefix=\"blocked\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        drop(guard);
        let text = metrics.encode().expect("encodes");
        assert!(text.lines().any(|l| l == "buzz_connections 0"), "{text}");
    }
}
