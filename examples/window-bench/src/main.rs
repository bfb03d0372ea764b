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
//! straight through the relay's store as the rows ingest stores, thread metadata
//! included, in bulk (`seed.rs`).
//!
//! ```text
//! cargo run --release -p buzz-window-bench -- [--small 10000] [--large 1000000]
//!     [--thread-replies 10000] [--iterations 200] [--database-url URL]...
//! ```
//!
//! `--database-url` may be given several times: each storage is seeded and measured in
//! turn, and a table puts their head-page figures side by side. `sqlite` is SQLite in a
//! temporary directory (the default); `sqlite://PATH` is used as given;
//! `postgres://…` is an admin URL: a scratch database is created there and dropped
//! afterwards.
//!
//! Statistics: the relay never runs `ANALYZE` itself. On PostgreSQL the bench runs it
//! after seeding (what autovacuum's auto-analyze does in production, and what an
//! operator must do after a bulk import or with autovacuum off); `--skip-analyze`
//! measures without. SQLite is measured as the relay leaves it (no `ANALYZE`).

mod measure;
mod seed;
#[cfg(test)]
mod seed_check;

use anyhow::{bail, Context};
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, BenchStorage, HttpClient, WsClient};
use buzz_nostr::keys::Keys;
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
    /// `sqlite` (temporary), sqlite://PATH, or a PostgreSQL admin URL (a scratch
    /// database is made); repeat to measure several storages in one run.
    #[arg(long)]
    database_url: Vec<String>,
    /// Do not run ANALYZE on PostgreSQL after seeding (planner without statistics).
    #[arg(long)]
    skip_analyze: bool,
    /// Keep the scratch PostgreSQL database after the run (to EXPLAIN its queries).
    #[arg(long)]
    keep_database: bool,
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

/// One storage's head-page figures, for the closing table.
struct HeadFigures {
    backend: String,
    small: Latency,
    large: Latency,
}

impl HeadFigures {
    fn ratio(&self) -> (f64, f64) {
        (
            self.large.p50.as_secs_f64() / self.small.p50.as_secs_f64(),
            self.large.p99.as_secs_f64() / self.small.p99.as_secs_f64(),
        )
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.small < 10 || args.large < 10 || args.limit == 0 {
        bail!("--small and --large need at least 10 events, --limit at least 1");
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    let urls: Vec<Option<&str>> = if args.database_url.is_empty() {
        vec![None]
    } else {
        args.database_url
            .iter()
            .map(|url| (url != "sqlite").then_some(url.as_str()))
            .collect()
    };
    let mut figures = Vec::new();
    for url in urls {
        figures.push(run(&args, url).await?);
    }
    println!(
        "head page (limit {}, summaries + aux), {} vs {} events:",
        args.limit, args.small, args.large
    );
    println!(
        "  {:<10} {:>12} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "backend", "small p50", "small p99", "large p50", "large p99", "p50 x", "p99 x"
    );
    let mut missed = Vec::new();
    for f in &figures {
        let (ratio, ratio99) = f.ratio();
        println!(
            "  {:<10} {:>9.2} ms {:>9.2} ms {:>9.2} ms {:>9.2} ms {:>9.2} {:>9.2}   {}",
            f.backend,
            ms(f.small.p50),
            ms(f.small.p99),
            ms(f.large.p50),
            ms(f.large.p99),
            ratio,
            ratio99,
            if ratio <= TARGET_RATIO {
                "PASS"
            } else {
                "FAIL"
            }
        );
        if ratio > TARGET_RATIO {
            missed.push(format!("{} p50 ratio {ratio:.2}", f.backend));
        }
    }
    if !missed.is_empty() && args.require_target {
        bail!(
            "target missed (large/small p50 <= {TARGET_RATIO}): {}",
            missed.join(", ")
        );
    }
    Ok(())
}

/// Seed and measure one storage (`None`: SQLite in a temporary directory).
async fn run(args: &Args, database_url: Option<&str>) -> anyhow::Result<HeadFigures> {
    let mut storage = BenchStorage::new(database_url).await?;
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
    println!(
        "  seeded a thread of {} replies in {:.1} s",
        args.thread_replies,
        began.elapsed().as_secs_f64()
    );
    if backend == "postgres" && !args.skip_analyze {
        // The relay never runs ANALYZE: in production autovacuum's auto-analyze keeps
        // the statistics (it may be off on a test server), and after a bulk import the
        // operator runs it. Without statistics the planner guesses at this size.
        let began = Instant::now();
        seeder.analyze().await?;
        println!(
            "  ANALYZE (run by this bench; the relay never runs it) in {:.1} s",
            began.elapsed().as_secs_f64()
        );
    } else if backend == "postgres" {
        println!("  no ANALYZE (--skip-analyze): planner statistics as autovacuum left them");
    } else {
        println!("  no ANALYZE: SQLite as the relay leaves it");
    }

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
    let head_figures = HeadFigures {
        backend: backend.to_owned(),
        small: small_head,
        large: large_head,
    };
    let (ratio, ratio99) = head_figures.ratio();
    println!(
        "  ratio large/small: p50 {ratio:.2}, p99 {ratio99:.2}   target p50 <= {TARGET_RATIO}: {}",
        if ratio <= TARGET_RATIO {
            "PASS"
        } else {
            "FAIL"
        }
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
    if args.keep_database {
        if let Some(url) = storage.keep_database() {
            println!("  kept the scratch database: {url}");
        }
    }
    Ok(head_figures)
}
