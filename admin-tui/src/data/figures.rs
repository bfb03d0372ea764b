//! One relay process's live figures, read from its `GET /metrics` text (the same
//! endpoint operators' Prometheus scrapes), and the rates and latency quantiles the
//! Overview shows, computed between two scrapes.

use prometheus_parse::{Scrape, Value};
use std::collections::BTreeMap;
use std::time::Instant;

/// What one scrape says, summed over the labels the Overview does not split by.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub connections: f64,
    pub events_in: f64,
    pub queries: f64,
    pub writer_queue: f64,
    /// Cumulative `(upper bound seconds, count)` of ingest latency.
    pub ingest_buckets: Vec<(f64, f64)>,
    pub query_buckets: Vec<(f64, f64)>,
    /// Refusals by NIP-01 prefix (all paths).
    pub errors: BTreeMap<String, f64>,
    /// Policy calls by `(entry point, verdict)`.
    pub policy: BTreeMap<(String, String), f64>,
    /// Rate-limit denials by entry point.
    pub rate_limited: BTreeMap<String, f64>,
    /// Plugin refusals by `(plugin, hook)`.
    pub plugin_rejections: BTreeMap<(String, String), f64>,
    /// Policy script sets loaded so far (grows with each successful reload).
    pub policy_generation: f64,
    /// Unix seconds of the last successful policy load (0: none / policies off).
    pub policy_loaded_at: f64,
    /// Policy reloads that failed (the last good scripts stayed).
    pub policy_failed_reloads: f64,
}

/// A process's figures with what changed since the previous scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    pub figures: Figures,
    pub events_per_sec: f64,
    pub queries_per_sec: f64,
    /// What happened since the previous scrape (`None` on a process's first scrape: the
    /// rates above are then 0 because nothing is known yet, and charts leave them out).
    pub interval: Option<Interval>,
    /// Latency quantiles, seconds (`None`: nothing observed).
    pub ingest_p50: Option<f64>,
    pub ingest_p99: Option<f64>,
    pub query_p50: Option<f64>,
    pub query_p99: Option<f64>,
}

fn label(sample: &prometheus_parse::Sample, name: &str) -> String {
    sample.labels.get(name).unwrap_or("").to_owned()
}

fn scalar(value: &Value) -> f64 {
    match value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        _ => 0.0,
    }
}

impl Figures {
    /// Parse a scrape's text. A text that is not Prometheus/OpenMetrics is an error.
    pub fn parse(text: &str) -> Result<Figures, String> {
        let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
            .map_err(|e| format!("not a metrics text: {e}"))?;
        let mut f = Figures::default();
        let mut seen = false;
        for s in &scrape.samples {
            let v = scalar(&s.value);
            match s.metric.as_str() {
                "buzz_connections" => f.connections += v,
                "buzz_ingest_events_total" => f.events_in += v,
                "buzz_queries_total" => f.queries += v,
                "buzz_writer_queue_depth" => f.writer_queue += v,
                "buzz_policy_generation" => f.policy_generation = v,
                "buzz_policy_last_load_timestamp_seconds" => f.policy_loaded_at = v,
                "buzz_policy_failed_reloads_total" => f.policy_failed_reloads = v,
                "buzz_errors_total" => *f.errors.entry(label(s, "prefix")).or_default() += v,
                "buzz_policy_decisions_total" => {
                    *f.policy
                        .entry((label(s, "entry_point"), label(s, "verdict")))
                        .or_default() += v
                }
                "buzz_policy_rate_limited_total" => {
                    *f.rate_limited.entry(label(s, "entry_point")).or_default() += v
                }
                "buzz_plugin_rejections_total" => {
                    *f.plugin_rejections
                        .entry((label(s, "plugin"), label(s, "hook")))
                        .or_default() += v
                }
                "buzz_ingest_seconds" | "buzz_query_seconds" => {
                    if let Value::Histogram(buckets) = &s.value {
                        let list = buckets.iter().map(|b| (b.less_than, b.count)).collect();
                        if s.metric == "buzz_ingest_seconds" {
                            f.ingest_buckets = list;
                        } else {
                            f.query_buckets = list;
                        }
                    }
                }
                _ => continue,
            }
            seen = true;
        }
        if !seen {
            return Err("no buzz_ figures in the text (is this a Buzz relay's /metrics?)".into());
        }
        Ok(f)
    }
}

/// The `q` quantile of a cumulative histogram (bucket upper bound where it is reached);
/// `None` when it holds no observation.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.iter().map(|(_, c)| *c).fold(0.0, f64::max);
    if total <= 0.0 {
        return None;
    }
    let want = total * q;
    buckets.iter().find(|(_, c)| *c >= want).map(|(le, _)| *le)
}

/// What a process did between two scrapes, for the Overview's charts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Interval {
    pub secs: f64,
    /// Refusals per second by NIP-01 prefix (prefixes with none left out).
    pub errors_per_sec: BTreeMap<String, f64>,
    /// Cumulative `(upper bound seconds, count)` of the latencies observed in it.
    pub ingest_buckets: Vec<(f64, f64)>,
    pub query_buckets: Vec<(f64, f64)>,
}

/// Bucket counts observed since `before` (the whole history when there is none).
fn since(now: &[(f64, f64)], before: Option<&[(f64, f64)]>) -> Vec<(f64, f64)> {
    match before {
        Some(old) if old.len() == now.len() => now
            .iter()
            .zip(old)
            .map(|((le, c), (_, o))| (*le, (c - o).max(0.0)))
            .collect(),
        _ => now.to_vec(),
    }
}

impl Live {
    /// Figures of a scrape taken at `at`, compared with the previous one.
    pub fn from(figures: Figures, at: Instant, previous: Option<&(Figures, Instant)>) -> Live {
        let (events_per_sec, queries_per_sec) = match previous {
            Some((old, then)) => {
                let secs = at.duration_since(*then).as_secs_f64().max(0.001);
                (
                    ((figures.events_in - old.events_in) / secs).max(0.0),
                    ((figures.queries - old.queries) / secs).max(0.0),
                )
            }
            None => (0.0, 0.0),
        };
        let interval =
            previous.map(|(old, then)| interval(&figures, old, at.duration_since(*then)));
        let recent = |now: &Vec<(f64, f64)>, old: Option<&Vec<(f64, f64)>>| {
            let window = since(now, old.map(Vec::as_slice));
            // Nothing happened since the last scrape: show the whole history's.
            if quantile(&window, 1.0).is_some() {
                window
            } else {
                now.clone()
            }
        };
        let ingest = recent(
            &figures.ingest_buckets,
            previous.map(|(f, _)| &f.ingest_buckets),
        );
        let query = recent(
            &figures.query_buckets,
            previous.map(|(f, _)| &f.query_buckets),
        );
        Live {
            events_per_sec,
            queries_per_sec,
            ingest_p50: quantile(&ingest, 0.5),
            ingest_p99: quantile(&ingest, 0.99),
            query_p50: quantile(&query, 0.5),
            query_p99: quantile(&query, 0.99),
            interval,
            figures,
        }
    }
}

/// The change from `old` to `now` over `elapsed`. A counter that went down (the process
/// restarted) counts from zero rather than negative; histograms whose buckets changed
/// shape count as nothing observed.
fn interval(now: &Figures, old: &Figures, elapsed: std::time::Duration) -> Interval {
    let secs = elapsed.as_secs_f64().max(0.001);
    let errors_per_sec = now
        .errors
        .iter()
        .filter_map(|(prefix, n)| {
            let before = old.errors.get(prefix).copied().unwrap_or(0.0);
            let grown = if *n >= before { n - before } else { *n };
            (grown > 0.0).then(|| (prefix.clone(), grown / secs))
        })
        .collect();
    let delta = |now: &[(f64, f64)], old: &[(f64, f64)]| {
        if now.len() == old.len() && now.iter().zip(old).all(|(a, b)| a.0 == b.0) {
            since(now, Some(old))
        } else {
            Vec::new()
        }
    };
    Interval {
        secs,
        errors_per_sec,
        ingest_buckets: delta(&now.ingest_buckets, &old.ingest_buckets),
        query_buckets: delta(&now.query_buckets, &old.query_buckets),
    }
}

/// Add `more` to the cumulative histogram `into` (same buckets; another shape is left
/// out rather than mixed in).
pub fn merge_buckets(into: &mut Vec<(f64, f64)>, more: &[(f64, f64)]) {
    if into.is_empty() {
        into.extend_from_slice(more);
    } else if into.len() == more.len() && into.iter().zip(more).all(|(a, b)| a.0 == b.0) {
        for (a, b) in into.iter_mut().zip(more) {
            a.1 += b.1;
        }
    }
}

impl Live {
    /// Several processes' figures as one relay's: counts and rates added, histograms
    /// merged before their quantiles are taken (quantiles do not add). `None` when no
    /// process has answered yet.
    pub fn sum<'a>(lives: impl IntoIterator<Item = &'a Live>) -> Option<Live> {
        let mut total: Option<Live> = None;
        for l in lives {
            let Some(t) = total.as_mut() else {
                total = Some(l.clone());
                continue;
            };
            let (f, g) = (&mut t.figures, &l.figures);
            f.connections += g.connections;
            f.events_in += g.events_in;
            f.queries += g.queries;
            f.writer_queue += g.writer_queue;
            merge_buckets(&mut f.ingest_buckets, &g.ingest_buckets);
            merge_buckets(&mut f.query_buckets, &g.query_buckets);
            for (prefix, n) in &g.errors {
                *f.errors.entry(prefix.clone()).or_default() += n;
            }
            t.events_per_sec += l.events_per_sec;
            t.queries_per_sec += l.queries_per_sec;
            t.interval = match (t.interval.take(), &l.interval) {
                (Some(mut a), Some(b)) => {
                    a.secs = a.secs.max(b.secs);
                    for (prefix, n) in &b.errors_per_sec {
                        *a.errors_per_sec.entry(prefix.clone()).or_default() += n;
                    }
                    merge_buckets(&mut a.ingest_buckets, &b.ingest_buckets);
                    merge_buckets(&mut a.query_buckets, &b.query_buckets);
                    Some(a)
                }
                // A process seen once has no rates yet: neither has the sum.
                _ => None,
            };
        }
        let mut t = total?;
        // As for one process: the last interval's quantiles, else the whole history's.
        let pick = |recent: Option<&Vec<(f64, f64)>>, all: &Vec<(f64, f64)>| match recent {
            Some(r) if quantile(r, 1.0).is_some() => r.clone(),
            _ => all.clone(),
        };
        let ingest = pick(
            t.interval.as_ref().map(|i| &i.ingest_buckets),
            &t.figures.ingest_buckets,
        );
        let query = pick(
            t.interval.as_ref().map(|i| &i.query_buckets),
            &t.figures.query_buckets,
        );
        t.ingest_p50 = quantile(&ingest, 0.5);
        t.ingest_p99 = quantile(&ingest, 0.99);
        t.query_p50 = quantile(&query, 0.5);
        t.query_p99 = quantile(&query, 0.99);
        Some(t)
    }
}

/// Seconds as a short latency text (`0.4ms`, `12ms`, `1.2s`, `-`).
pub fn latency(secs: Option<f64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s.is_infinite() => ">max".into(),
        Some(s) if s < 0.001 => format!("{:.1}ms", s * 1000.0),
        Some(s) if s < 1.0 => format!("{:.0}ms", s * 1000.0),
        Some(s) => format!("{s:.1}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_bucket_that_reaches_them() {
        let b = [
            (0.001, 10.0),
            (0.01, 98.0),
            (0.1, 100.0),
            (f64::INFINITY, 100.0),
        ];
        assert_eq!(quantile(&b, 0.5), Some(0.01));
        assert_eq!(quantile(&b, 0.99), Some(0.1));
        assert_eq!(quantile(&[(0.1, 0.0)], 0.5), None);
        assert_eq!(latency(Some(0.0004)), "0.4ms");
        assert_eq!(latency(Some(0.012)), "12ms");
        assert_eq!(latency(None), "-");
    }

    #[test]
    fn text_that_is_not_a_relays_metrics_is_an_error() {
        assert!(Figures::parse("hello world").is_err());
        assert!(Figures::parse("other_metric 1\n").is_err());
    }
}
