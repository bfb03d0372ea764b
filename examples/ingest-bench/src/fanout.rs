//! `fanout-bench`: what many large live subscriptions cost each publish (issue 10,
//! item 2).
//!
//! A real relay (SQLite in a temp dir) on 127.0.0.1:0; `--subscribers` connections each
//! open `--subs` subscriptions of one `--ids`-id filter (ids that never match) plus one
//! that matches every published event, and read everything they get. One publisher then
//! sends `--events` kind-1 events one at a time; the figure is EVENT → OK latency (p50,
//! p99, max), and this process's RSS before and after the subscriptions opened.
//!
//! ```text
//! cargo run --release -p buzz-ingest-bench --bin fanout-bench -- --subscribers 20 --subs 7 --ids 1000
//! cargo run --release -p buzz-ingest-bench --bin fanout-bench -- --subscribers 0   # baseline
//! ```

use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use clap::Parser;
use serde_json::json;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "fanout-bench",
    about = "Publish latency with many large subscriptions"
)]
struct Args {
    /// Subscribed connections.
    #[arg(long, default_value_t = 20)]
    subscribers: usize,
    /// Large subscriptions per connection.
    #[arg(long, default_value_t = 7)]
    subs: usize,
    /// Ids in each large subscription's filter.
    #[arg(long, default_value_t = 1_000)]
    ids: usize,
    /// Events published (one at a time).
    #[arg(long, default_value_t = 500)]
    events: usize,
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "fanout-bench",
        |s| {
            s.server.workers = 0;
            s.limits.max_subscriptions = s.limits.max_subscriptions.max(args.subs + 1);
        },
        Vec::new(),
    )
    .await
    .ok_or_else(|| anyhow::anyhow!("relay did not start"))?;
    let before = rss_mb();
    let mut readers = Vec::new();
    for c in 0..args.subscribers {
        let mut ws = relay.ws().await;
        for s in 0..args.subs {
            let ids: Vec<String> = (0..args.ids)
                .map(|i| format!("{:032x}{:032x}", c * 1_000 + s, i))
                .collect();
            ws.req(&format!("big{s}"), vec![json!({"ids": ids, "limit": 0})])
                .await
                .map_err(|e| anyhow::anyhow!("subscription refused: {e}"))?;
        }
        ws.req("all", vec![json!({"kinds": [1], "limit": 0})])
            .await
            .map_err(|e| anyhow::anyhow!("subscription refused: {e}"))?;
        ws.timeout = Duration::from_secs(600);
        // Read everything, so the relay never waits on us.
        readers.push(tokio::spawn(
            async move { while ws.recv().await.is_some() {} },
        ));
    }
    let subscribed = rss_mb();
    let keys = Keys::generate();
    let mut publisher = relay.ws().await;
    let mut latencies = Vec::with_capacity(args.events);
    for i in 0..args.events {
        let event = keys.sign(1, vec![], &format!("bench {i}"), now());
        let start = Instant::now();
        let (ok, message) = publisher.publish(&event).await;
        latencies.push(start.elapsed());
        anyhow::ensure!(ok, "event {i} refused: {message}");
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    println!(
        "{} connections × {} subscriptions of {} ids (+1 matching): {} publishes",
        args.subscribers, args.subs, args.ids, args.events
    );
    println!(
        "publish → OK: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3
    );
    println!(
        "RSS: {before:.0} MB before subscribing, {subscribed:.0} MB with the subscriptions open (+{:.0} MB), {:.0} MB after publishing",
        subscribed - before,
        rss_mb()
    );
    for reader in readers {
        reader.abort();
    }
    relay.stop().await;
    Ok(())
}
