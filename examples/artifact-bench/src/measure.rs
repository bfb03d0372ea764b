//! What a client sees: `POST /query` latency percentiles, and racing edits over
//! `POST /events`.

use anyhow::bail;
use buzz_core::testkit::percentile;
use buzz_core::testkit::HttpClient;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use futures_util::future::join_all;
use serde_json::Value;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Latency {
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) events: usize,
}

pub(crate) async fn query(
    http: &HttpClient,
    keys: &Keys,
    filters: &Value,
) -> anyhow::Result<usize> {
    let (status, answer) = http
        .post_signed(keys, "/query", filters.to_string().as_bytes())
        .await;
    if status != 200 {
        bail!("POST /query answered {status}: {answer}");
    }
    Ok(answer.as_array().map_or(0, Vec::len))
}

/// `warmup` untimed then `iterations` timed runs of `filters`.
pub(crate) async fn latency(
    http: &HttpClient,
    keys: &Keys,
    filters: &Value,
    warmup: usize,
    iterations: usize,
) -> anyhow::Result<Latency> {
    let mut events = 0;
    for _ in 0..warmup {
        events = query(http, keys, filters).await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        events = query(http, keys, filters).await?;
        samples.push(start.elapsed());
    }
    samples.sort_unstable();
    Ok(Latency {
        p50: percentile(&samples, 50),
        p99: percentile(&samples, 99),
        events,
    })
}

/// Racing edits: each round every writer submits its own edit naming the current
/// revision at once. Returns (rounds, submissions, elapsed); fails on any round without
/// exactly one winner.
pub(crate) async fn race(
    http: &HttpClient,
    writers: &[Keys],
    mut current: Event,
    rounds: usize,
    next: impl Fn(&Keys, &Event, usize) -> Event,
) -> anyhow::Result<(usize, usize, Duration)> {
    let start = Instant::now();
    let mut submissions = 0;
    for round in 0..rounds {
        let edits: Vec<Event> = writers
            .iter()
            .enumerate()
            .map(|(i, k)| next(k, &current, round * writers.len() + i))
            .collect();
        let answers = join_all(writers.iter().zip(&edits).map(|(keys, event)| async move {
            let body = serde_json::to_vec(event).unwrap_or_default();
            http.post_signed(keys, "/events", &body).await
        }))
        .await;
        submissions += edits.len();
        let mut winners: Vec<Event> = Vec::new();
        for ((status, body), event) in answers.into_iter().zip(edits) {
            match status {
                200 => winners.push(event),
                409 => {}
                other => bail!("round {round}: {other} {body}"),
            }
        }
        if winners.len() != 1 {
            bail!("round {round}: {} winners", winners.len());
        }
        current = winners.remove(0);
    }
    Ok((rounds, submissions, start.elapsed()))
}
