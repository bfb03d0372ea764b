//! Measuring what a client sees: latency of one `POST /query` (NIP-98 signing,
//! verification, the query, JSON) and the bytes of its answer.

use anyhow::{bail, Context};
use buzz_core::testkit::percentile;
use buzz_core::testkit::HttpClient;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Latency percentiles of one request shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Latency {
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    /// Events in one answer (the same every time).
    pub(crate) events: usize,
}

/// One answered query: the events and the JSON body's size in bytes.
pub(crate) async fn query(
    http: &HttpClient,
    keys: &Keys,
    filters: &Value,
) -> anyhow::Result<(Vec<Event>, usize)> {
    let body = filters.to_string();
    let (status, answer) = http.post_signed(keys, "/query", body.as_bytes()).await;
    if status != 200 {
        bail!("POST /query answered {status}: {answer}");
    }
    // The relay writes compact JSON; re-serializing it gives the same length.
    let bytes = answer.to_string().len();
    let events = serde_json::from_value(answer).context("answer is not an event array")?;
    Ok((events, bytes))
}

/// Run `filters` `warmup + iterations` times; percentiles over the timed iterations.
pub(crate) async fn latency(
    http: &HttpClient,
    keys: &Keys,
    filters: &Value,
    warmup: usize,
    iterations: usize,
) -> anyhow::Result<Latency> {
    let mut events = 0;
    for _ in 0..warmup {
        events = query(http, keys, filters).await?.0.len();
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let (answer, _) = query(http, keys, filters).await?;
        samples.push(start.elapsed());
        events = answer.len();
    }
    samples.sort_unstable();
    Ok(Latency {
        p50: percentile(&samples, 50),
        p99: percentile(&samples, 99),
        events,
    })
}

/// Is this event a top-level message by its wire tags (no NIP-10 `reply` marker)?
fn is_top_level(event: &Event) -> bool {
    !event
        .tags
        .iter()
        .any(|t| t.len() >= 4 && t[0] == "e" && t[3] == "reply")
}

/// What a client without the extension downloads to show `rows` top-level messages:
/// it pages plain `kinds` + `#h` filters (newest first, `until` moving back) and sorts
/// threads out itself. Returns `(bytes, events downloaded, requests)`.
pub(crate) async fn plain_bytes_for(
    http: &HttpClient,
    keys: &Keys,
    channel: &str,
    rows: usize,
    page: u64,
) -> anyhow::Result<(usize, usize, usize)> {
    let (mut bytes, mut events, mut requests, mut top_level) = (0, 0, 0, 0);
    let mut until: Option<i64> = None;
    let mut seen = std::collections::HashSet::new();
    while top_level < rows {
        let mut filter = serde_json::json!({"kinds": [9], "#h": [channel], "limit": page});
        if let Some(u) = until {
            filter["until"] = serde_json::json!(u);
        }
        let (answer, size) = query(http, keys, &Value::Array(vec![filter])).await?;
        requests += 1;
        bytes += size;
        events += answer.len();
        let Some(oldest) = answer.last().map(|e| e.created_at) else {
            break;
        };
        for event in &answer {
            if seen.insert(event.id.clone()) && is_top_level(event) {
                top_level += 1;
            }
        }
        // Timestamp paging (all NIP-01 offers): the oldest second is asked for again.
        until = Some(oldest);
        if answer.len() < page as usize {
            break;
        }
    }
    Ok((bytes, events, requests))
}
