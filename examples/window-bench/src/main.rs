//! `window-bench`: does a NIP-CW window cost the same on a big channel as on a small one,
//! and what does it save a client?
//!
//! Figures, one run, all over `POST /query` against a real relay on 127.0.0.1:0:
//! 1. head page (limit 50, summaries + aux) p50/p99 on a channel of `--small` events and
//!    on one of `--large` events; target: large/small p50 ≤ 1.5 (cost must not grow
//!    with channel size);
//! 2. thread page (limit 50) p50/p99 on a thread of `--thread-replies` replies;
//! 3. bytes a client downloads to show 50 top-level rows when 90% of events are replies:
//!    the window vs plain NIP-01 `kinds` + `#h` paging.
//!
//! Channels are seeded with real signed events (threads of 1 root + 9 replies) written
//! straight through the relay's store with their thread metadata (`seed.rs`).
//!
//! ```text
//! cargo run --release -p buzz-window-bench -- [--small 10000] [--large 1000000]
//!     [--thread-replies 10000] [--iterations 200] [--database-url URL]
//! ```
//!
//! `--database-url postgres://…` is an admin URL: a scratch database is created there
//! and dropped afterwards. `sqlite://PATH` is used as given. Default: SQLite in a
//! temporary directory.

mod measure;
mod seed;

use anyhow::{bail, Context};
use buzz_core::keys::Keys;
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, BenchStorage, HttpClient, WsClient};
use clap::Parser;
use measure::{latency, plain_bytes_for, query, Latency};
use seed::Seeder;
use serde_json::{json, Value};
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "window-bench",
    about = "NIP-CW window cost vs channel size, and bytes saved"
)]
struct Args {
    /// Events in the small channel.
    #[arg(long, default_value_t = 10_000)]
    small: usize,
    /// Events in the large channel.
    #[arg(long, default_value_t = 1_000_000)]
    large: usize,
    /// Replies in the long thread.
    #[arg(long, default_value_t = 10_000)]
    thread_replies: usize,
    /// Timed requests per figure (after 20 warm-up requests).
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// Rows per page.
    #[arg(long, default_value_t = 50)]
    limit: u64,
    /// sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
    /// Exit non-zero when the large/small ratio target is missed.
    #[arg(long)]
    require_target: bool,
}

const WARMUP: usize = 20;
const TARGET_RATIO: f64 = 1.5;

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_latency(what: &str, l: &Latency) {
    println!(
        "  {what:<44} p50 {:>7.2} ms   p99 {:>7.2} ms   ({} events per answer)",
        ms(l.p50),
        ms(l.p99),
        l.events
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.small < 10 || args.large < 10 || args.limit == 0 {
        bail!("--small and --large need at least 10 events, --limit at least 1");
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));

    // Storage.
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let backend = storage.backend;
    let settings = storage.settings.clone();
    let relay = RelayBuilder::new(settings)
        .without_signal_handlers()
        .plugin(buzz_core::plugin::PluginEntry::of::<
            buzz_channel_windows::ChannelWindowsPlugin,
        >())
        .start()
        .await
        .context("starting the relay")?;
    let host = format!("localhost:{}", relay.addr.port());
    println!("relay on {} ({backend})", relay.addr);

    // Three open channels, created over the wire.
    let owner = Keys::generate();
    let mut ws = WsClient::connect(relay.addr, &host).await?;
    if !ws.auth(&owner).await.0 {
        bail!("AUTH refused");
    }
    let mut channels = Vec::new();
    for name in ["small", "large", "thread"] {
        let id = uuid::Uuid::new_v4().to_string();
        let create = owner.sign(
            9007,
            vec![
                vec!["h".into(), id.clone()],
                vec!["name".into(), name.into()],
            ],
            "",
            now(),
        );
        let (ok, msg) = ws.publish(&create).await;
        if !ok {
            bail!("creating channel {name}: {msg}");
        }
        channels.push(id);
    }
    let (small, large, thread) = (&channels[0], &channels[1], &channels[2]);

    let store = relay.services.store.clone();
    let community_id = store
        .ensure_community("localhost", "Local")
        .await
        .map_err(|r| anyhow::anyhow!("community: {r}"))?;
    let seeder = Seeder {
        store,
        community_id,
        authors: (0..24).map(|_| Keys::generate()).collect(),
    };
    // Old enough that every seeded second is in the past.
    let start = now() - 2 * (args.large.max(args.small) + args.thread_replies) as i64 - 3_600;
    for (channel, events) in [(small, args.small), (large, args.large)] {
        let began = Instant::now();
        seeder.channel(channel, events, start).await?;
        println!(
            "  seeded {events} events ({}% replies) in {:.1} s",
            seed::REPLIES_PER_ROOT * 10,
            began.elapsed().as_secs_f64()
        );
    }
    let began = Instant::now();
    let root = seeder.thread(thread, args.thread_replies, start).await?;
    if backend == "postgres" {
        // What autovacuum would do in production (it may be off on a test server):
        // without statistics the planner guesses, and guesses badly at this size.
        seeder.analyze().await?;
    }
    println!(
        "  seeded a thread of {} replies in {:.1} s",
        args.thread_replies,
        began.elapsed().as_secs_f64()
    );

    let reader = Keys::generate();
    let http = HttpClient::new(relay.addr, &host);
    let head = |channel: &str| -> Value {
        json!([{"top_level": true, "#h": [channel], "kinds": [9], "limit": args.limit,
            "include_summaries": true, "include_aux": true}])
    };
    println!(
        "figures ({} timed requests each, after {WARMUP} warm-up):",
        args.iterations
    );
    let small_head = latency(&http, &reader, &head(small), WARMUP, args.iterations).await?;
    print_latency(
        &format!("head page, {} events channel", args.small),
        &small_head,
    );
    let large_head = latency(&http, &reader, &head(large), WARMUP, args.iterations).await?;
    print_latency(
        &format!("head page, {} events channel", args.large),
        &large_head,
    );
    let ratio = large_head.p50.as_secs_f64() / small_head.p50.as_secs_f64();
    let ratio99 = large_head.p99.as_secs_f64() / small_head.p99.as_secs_f64();
    let pass = ratio <= TARGET_RATIO;
    println!(
        "  ratio large/small: p50 {ratio:.2}, p99 {ratio99:.2}   target p50 <= {TARGET_RATIO}: {}",
        if pass { "PASS" } else { "FAIL" }
    );
    let thread_page = json!([{"thread_window": true, "#h": [thread], "#e": [root], "kinds": [9],
        "limit": args.limit}]);
    let thread_latency = latency(&http, &reader, &thread_page, WARMUP, args.iterations).await?;
    print_latency(
        &format!("thread page, {} replies thread", args.thread_replies),
        &thread_latency,
    );

    // Bytes to show `limit` top-level rows when 90% of the events are replies.
    let window_rows_only = json!([{"top_level": true, "#h": [small], "kinds": [9],
        "limit": args.limit}]);
    let (events, rows_bytes) = query(&http, &reader, &window_rows_only).await?;
    let (summarized, summary_bytes) = query(
        &http,
        &reader,
        &json!([{"top_level": true, "#h": [small], "kinds": [9], "limit": args.limit,
            "include_summaries": true}]),
    )
    .await?;
    let (plain_bytes, plain_events, requests) =
        plain_bytes_for(&http, &reader, small, args.limit as usize, 500).await?;
    println!(
        "bytes to show {} top-level rows (90% of events are replies):",
        args.limit
    );
    println!(
        "  window, rows + bounds:              {rows_bytes:>9} bytes ({} events, 1 request)",
        events.len()
    );
    println!(
        "  window, rows + summaries + bounds:  {summary_bytes:>9} bytes ({} events, 1 request)",
        summarized.len()
    );
    println!(
        "  plain NIP-01 kinds + #h paging:     {plain_bytes:>9} bytes ({plain_events} events, {requests} requests of limit 500)"
    );
    println!(
        "  plain / window (with summaries):    {:>9.1}x",
        plain_bytes as f64 / summary_bytes as f64
    );
    relay.stop().await?;
    if !pass && args.require_target {
        bail!("target missed: large/small p50 ratio {ratio:.2} > {TARGET_RATIO}");
    }
    Ok(())
}
