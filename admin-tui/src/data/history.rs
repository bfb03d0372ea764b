//! The last minutes of each relay process, for the Overview's charts: a bounded ring of
//! what every scrape said (or that it failed), kept by the refresher across refreshes,
//! and the series a chart draws from it — one point per column of the width it gets,
//! for one process or summed over all of them.
//!
//! Nothing is invented: a column no scrape covers is empty, a column a failed scrape
//! covers is marked stale, and a sum over processes says when one of them was missing.

use super::figures::{merge_buckets, quantile, Interval, Live};
use std::collections::{BTreeSet, VecDeque};
use std::ops::Range;
use std::time::{Duration, Instant};

/// How far back a history reaches (the charts' width in time).
pub const WINDOW: Duration = Duration::from_secs(300);
/// Samples kept per process whatever the window: `r` pressed in a loop refreshes faster
/// than every 2 s, and memory must not follow.
pub const MAX_SAMPLES: usize = 1024;

/// What one successful scrape said, as far as the charts go.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub connections: f64,
    pub events_per_sec: f64,
    pub queries_per_sec: f64,
    /// `None` on a process's first scrape: its rates are not known yet.
    pub interval: Option<Interval>,
}

impl From<&Live> for Reading {
    fn from(live: &Live) -> Reading {
        Reading {
            connections: live.figures.connections,
            events_per_sec: live.events_per_sec,
            queries_per_sec: live.queries_per_sec,
            interval: live.interval.clone(),
        }
    }
}

/// One scrape: its time and what it said (`None`: it failed, the process is stale).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at: Instant,
    pub reading: Option<Reading>,
}

/// One process's samples, oldest first, bounded by a time window and a count.
#[derive(Debug, Clone)]
pub struct History {
    samples: VecDeque<Sample>,
    window: Duration,
    cap: usize,
}

impl Default for History {
    fn default() -> Self {
        History::new(WINDOW, MAX_SAMPLES)
    }
}

impl History {
    pub fn new(window: Duration, cap: usize) -> History {
        History {
            samples: VecDeque::new(),
            window,
            cap: cap.max(1),
        }
    }

    /// Record one scrape taken at `at`: its figures, or `None` when it failed. A sample
    /// older than the newest one is dropped (the series assume time order); the oldest
    /// go once the window or the count is exceeded.
    pub fn record(&mut self, at: Instant, live: Option<&Live>) {
        if self.samples.back().is_some_and(|s| s.at > at) {
            return;
        }
        self.samples.push_back(Sample {
            at,
            reading: live.map(Reading::from),
        });
        while self.samples.len() > self.cap {
            self.samples.pop_front();
        }
        while self
            .samples
            .front()
            .is_some_and(|s| at.saturating_duration_since(s.at) > self.window)
        {
            self.samples.pop_front();
        }
    }

    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.samples.iter()
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn newest(&self) -> Option<Instant> {
        self.samples.back().map(|s| s.at)
    }

    /// Whether the newest scrape failed.
    pub fn is_stale(&self) -> bool {
        self.samples.back().is_some_and(|s| s.reading.is_none())
    }

    /// Age (before `end`) from which sample `i` speaks: a scrape says what happened since
    /// the one before it (whether that one answered or not), the first kept one since its
    /// own interval began.
    fn covers_from(&self, i: usize, end: Instant) -> Duration {
        let own = end.saturating_duration_since(self.samples[i].at);
        match i.checked_sub(1) {
            Some(before) => end.saturating_duration_since(self.samples[before].at),
            None => match self.samples[i]
                .reading
                .as_ref()
                .and_then(|r| r.interval.as_ref())
            {
                Some(interval) => own + Duration::from_secs_f64(interval.secs.max(0.0)),
                None => own,
            },
        }
    }

    /// For each of `columns` equal slices of `window` ending at `end`, the samples that
    /// speak for it: those taken in it, else the next one if its interval reaches into
    /// it, else none (no data).
    fn bins(&self, end: Instant, window: Duration, columns: usize) -> Vec<Range<usize>> {
        let mut bins = vec![0..0; columns];
        if columns == 0 {
            return bins;
        }
        let width = window.as_secs_f64() / columns as f64;
        // Column of an age (0 = the newest column's right edge), or none if too old.
        let column = |age: Duration| -> Option<usize> {
            let back = (age.as_secs_f64() / width).floor() as usize;
            (back < columns).then(|| columns - 1 - back)
        };
        let mut filled = vec![false; columns];
        for (i, sample) in self.samples.iter().enumerate() {
            if let Some(c) = column(end.saturating_duration_since(sample.at)) {
                if filled[c] {
                    bins[c].end = i + 1;
                } else {
                    bins[c] = i..i + 1;
                    filled[c] = true;
                }
            }
        }
        let mut next: Option<usize> = None;
        for c in (0..columns).rev() {
            if filled[c] {
                next = Some(bins[c].start);
                continue;
            }
            let newer_edge = Duration::from_secs_f64(width * (columns - 1 - c) as f64);
            if let Some(j) = next {
                if self.covers_from(j, end) > newer_edge {
                    bins[c] = j..j + 1;
                }
            }
        }
        bins
    }
}

/// What a chart shows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    /// Events received per second (every outcome).
    Events,
    Queries,
    /// Open connections (a gauge).
    Connections,
    /// Refusals per second with one NIP-01 prefix (`None`: all prefixes together, the
    /// chart shown while no prefix has any).
    Errors(Option<String>),
    IngestP99,
    QueryP99,
}

impl Metric {
    pub fn title(&self) -> String {
        match self {
            Metric::Events => "ingest events/s".into(),
            Metric::Queries => "queries/s".into(),
            Metric::Connections => "connections".into(),
            // The metric's label is the bare prefix; shown as clients read it.
            Metric::Errors(Some(prefix)) if prefix.ends_with(':') => format!("errors/s {prefix}"),
            Metric::Errors(Some(prefix)) => format!("errors/s {prefix}:"),
            Metric::Errors(None) => "errors/s".into(),
            Metric::IngestP99 => "ingest p99".into(),
            Metric::QueryP99 => "query p99".into(),
        }
    }

    /// Latencies are quantiles (merged from histograms); the rest add up.
    pub fn is_latency(&self) -> bool {
        matches!(self, Metric::IngestP99 | Metric::QueryP99)
    }

    /// The value one reading gives (`None`: not known from it).
    fn value(&self, r: &Reading) -> Option<f64> {
        match self {
            Metric::Connections => Some(r.connections),
            Metric::Events => r.interval.as_ref().map(|_| r.events_per_sec),
            Metric::Queries => r.interval.as_ref().map(|_| r.queries_per_sec),
            Metric::Errors(prefix) => r.interval.as_ref().map(|i| match prefix {
                Some(p) => i.errors_per_sec.get(p).copied().unwrap_or(0.0),
                None => i.errors_per_sec.values().sum(),
            }),
            Metric::IngestP99 | Metric::QueryP99 => None,
        }
    }

    fn buckets<'r>(&self, r: &'r Reading) -> Option<&'r [(f64, f64)]> {
        let interval = r.interval.as_ref()?;
        match self {
            Metric::IngestP99 => Some(&interval.ingest_buckets),
            Metric::QueryP99 => Some(&interval.query_buckets),
            _ => None,
        }
    }
}

/// One column of a chart.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Point {
    /// `None`: nothing known (no scrape covers it, or a latency with no observation).
    pub value: Option<f64>,
    /// A failed scrape covers it: alone (a gap) or, in a sum, for one of the processes
    /// (the value then misses that process).
    pub stale: bool,
}

/// A chart's data: one point per column, oldest first, and the newest value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub points: Vec<Point>,
    /// From each process's newest scrape (summed, or merged for latencies); processes
    /// whose newest scrape failed are left out and counted in `stale`.
    pub latest: Option<f64>,
    /// Processes whose newest scrape failed.
    pub stale: usize,
}

impl Series {
    /// The highest column, or the newest value if higher: a column is the mean of the
    /// scrapes in it, so a last scrape above its column's mean still fits under the max.
    pub fn max(&self) -> Option<f64> {
        self.points
            .iter()
            .filter_map(|p| p.value)
            .chain(self.latest)
            .filter(|v| v.is_finite())
            .fold(None, |m, v| Some(m.map_or(v, |m: f64| m.max(v))))
    }
}

/// The newest sample over all histories: the right edge every chart shares.
pub fn newest(histories: &[&History]) -> Option<Instant> {
    histories.iter().filter_map(|h| h.newest()).max()
}

/// The NIP-01 prefixes refused at least once within the histories.
pub fn prefixes(histories: &[&History]) -> BTreeSet<String> {
    histories
        .iter()
        .flat_map(|h| h.samples())
        .filter_map(|s| s.reading.as_ref()?.interval.as_ref())
        .flat_map(|i| i.errors_per_sec.keys().cloned())
        .collect()
}

/// The p99 of merged buckets; past the last finite bound it is that bound (a chart has
/// no room for infinity; the label says `>max`).
fn p99(buckets: &[(f64, f64)]) -> Option<f64> {
    let q = quantile(buckets, 0.99)?;
    if q.is_finite() {
        return Some(q);
    }
    buckets
        .iter()
        .map(|(le, _)| *le)
        .filter(|le| le.is_finite())
        .fold(None, |m, v| Some(m.map_or(v, |m: f64| m.max(v))))
}

/// `metric` over `histories` (one process, or every process summed) in `columns`
/// columns covering `window` up to `end`. Per process a column is the mean of the
/// readings that speak for it; the sum adds those means; a latency merges every
/// reading's histogram before taking its p99.
pub fn series(
    histories: &[&History],
    metric: &Metric,
    end: Instant,
    window: Duration,
    columns: usize,
) -> Series {
    let bins: Vec<Vec<Range<usize>>> = histories
        .iter()
        .map(|h| h.bins(end, window, columns))
        .collect();
    let mut points = Vec::with_capacity(columns);
    for c in 0..columns {
        let mut point = Point::default();
        let mut merged = Vec::new();
        for (h, bins) in histories.iter().zip(&bins) {
            let samples = bins[c].clone().map(|i| &h.samples[i]);
            let (mut sum, mut n) = (0.0, 0usize);
            for sample in samples {
                let Some(reading) = &sample.reading else {
                    point.stale = true;
                    continue;
                };
                if metric.is_latency() {
                    if let Some(b) = metric.buckets(reading) {
                        merge_buckets(&mut merged, b);
                    }
                } else if let Some(v) = metric.value(reading) {
                    sum += v;
                    n += 1;
                }
            }
            if n > 0 {
                point.value = Some(point.value.unwrap_or(0.0) + sum / n as f64);
            }
        }
        if metric.is_latency() {
            point.value = p99(&merged);
        }
        points.push(point);
    }
    let mut latest = None;
    let mut stale = 0;
    let mut merged = Vec::new();
    for h in histories {
        match h.samples.back().map(|s| s.reading.as_ref()) {
            Some(None) => stale += 1,
            Some(Some(reading)) if metric.is_latency() => {
                if let Some(b) = metric.buckets(reading) {
                    merge_buckets(&mut merged, b);
                }
            }
            Some(Some(reading)) => {
                if let Some(v) = metric.value(reading) {
                    latest = Some(latest.unwrap_or(0.0) + v);
                }
            }
            None => {}
        }
    }
    if metric.is_latency() {
        latest = quantile(&merged, 0.99);
    }
    Series {
        points,
        latest,
        stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(connections: f64) -> Live {
        Live {
            figures: super::super::figures::Figures {
                connections,
                ..Default::default()
            },
            events_per_sec: 0.0,
            queries_per_sec: 0.0,
            interval: None,
            ingest_p50: None,
            ingest_p99: None,
            query_p50: None,
            query_p99: None,
        }
    }

    #[test]
    fn a_history_keeps_only_its_window() {
        let t0 = Instant::now();
        let mut h = History::new(Duration::from_secs(10), 1000);
        for s in 0..=30 {
            h.record(t0 + Duration::from_secs(s), Some(&live(s as f64)));
        }
        assert_eq!(h.len(), 11, "seconds 20..=30");
        assert_eq!(
            h.samples().next().map(|s| s.at),
            Some(t0 + Duration::from_secs(20))
        );
    }

    #[test]
    fn a_history_keeps_at_most_its_count() {
        let t0 = Instant::now();
        let mut h = History::new(WINDOW, MAX_SAMPLES);
        for ms in 0..(3 * MAX_SAMPLES as u64) {
            h.record(t0 + Duration::from_millis(ms), None);
        }
        assert_eq!(h.len(), MAX_SAMPLES);
        assert_eq!(
            h.samples().next().map(|s| s.at),
            Some(t0 + Duration::from_millis(2 * MAX_SAMPLES as u64))
        );
    }

    #[test]
    fn an_older_sample_is_not_recorded_after_a_newer_one() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut h = History::default();
        h.record(t0, Some(&live(1.0)));
        h.record(t0 - Duration::from_secs(1), Some(&live(2.0)));
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn a_column_is_the_mean_of_its_scrapes_and_the_max_holds_the_newest() {
        let t0 = Instant::now();
        let mut h = History::default();
        h.record(t0, Some(&live(1.0)));
        h.record(t0 + Duration::from_millis(500), Some(&live(3.0)));
        let s = series(
            &[&h],
            &Metric::Connections,
            t0 + Duration::from_millis(500),
            Duration::from_secs(10),
            5,
        );
        assert_eq!(s.points[4].value, Some(2.0));
        assert_eq!((s.latest, s.max()), (Some(3.0), Some(3.0)));
    }

    #[test]
    fn columns_between_scrapes_take_the_next_scrape_and_a_failure_is_a_gap() {
        let t0 = Instant::now();
        let mut h = History::default();
        // A gauge scraped every 4 s, drawn 1 column per second over 12 s.
        h.record(t0, Some(&live(1.0)));
        h.record(t0 + Duration::from_secs(4), Some(&live(2.0)));
        h.record(t0 + Duration::from_secs(8), None);
        h.record(t0 + Duration::from_secs(12), Some(&live(3.0)));
        let s = series(
            &[&h],
            &Metric::Connections,
            t0 + Duration::from_secs(12),
            Duration::from_secs(12),
            12,
        );
        let values: Vec<Option<f64>> = s.points.iter().map(|p| p.value).collect();
        let stale: Vec<bool> = s.points.iter().map(|p| p.stale).collect();
        // Column c covers (c, c+1] seconds after t0; t0's own scrape is just outside.
        let mut want = vec![Some(2.0); 4];
        want.extend([None; 4]);
        want.extend([Some(3.0); 4]);
        assert_eq!(values, want);
        let mut want = vec![false; 4];
        want.extend([true; 4]);
        want.extend([false; 4]);
        assert_eq!(stale, want);
        assert_eq!(s.latest, Some(3.0));
    }
}
