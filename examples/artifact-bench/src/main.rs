//! `artifact-bench`: does a current-state artifact query cost the same over many
//! artifacts as over few, and how many racing edits does the compare-and-swap settle?
//!
//! Figures, one run, over `POST /query` / `POST /events` against a real relay on
//! 127.0.0.1:0:
//! 1. current-state query with 2 predicates (`#type` + `#assignee`, one page of
//!    `--limit`) across 50 channels, p50/p99 at `--small` artifacts and again after
//!    growing to `--large`; target: large/small p50 ≤ 1.5;
//! 2. racing edits: `--writers` writers each submit an edit of the same artifact at once,
//!    `--rounds` rounds (exactly one winner each): rounds/s and submissions/s.
//!
//! Artifacts are created through the real ingest path (pipelined WebSocket).
//!
//! ```text
//! cargo run --release -p buzz-artifact-bench -- [--small 10000] [--large 100000]
//!     [--channels 50] [--iterations 200] [--writers 16] [--rounds 200] [--database-url URL]
//! ```

mod measure;
mod seed;

use anyhow::{bail, Context};
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, BenchStorage, HttpClient, WsClient};
use buzz_nostr::keys::Keys;
use clap::Parser;
use measure::{latency, Latency};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(
    name = "artifact-bench",
    about = "NIP-AR current-state query cost vs size, racing edits"
)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    small: usize,
    #[arg(long, default_value_t = 100_000)]
    large: usize,
    #[arg(long, default_value_t = 50)]
    channels: usize,
    /// People artifacts are assigned to (round-robin).
    #[arg(long, default_value_t = 20)]
    assignees: usize,
    /// Page size of the measured query.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    #[arg(long, default_value_t = 16)]
    writers: usize,
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
    /// Exit non-zero when the large/small ratio target is missed.
    #[arg(long)]
    require_target: bool,
}

const WARMUP: usize = 20;
const TARGET_RATIO: f64 = 1.5;

fn print_latency(what: &str, l: &Latency) {
    println!(
        "  {what:<48} p50 {:>7.2} ms   p99 {:>7.2} ms   ({} events per answer)",
        l.p50.as_secs_f64() * 1e3,
        l.p99.as_secs_f64() * 1e3,
        l.events
    );
}

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.small == 0 || args.large <= args.small || args.channels == 0 || args.writers < 2 {
        bail!("need 0 < --small < --large, --channels ≥ 1, --writers ≥ 2");
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let backend = storage.backend;
    // The owner creates 50 channels: as a community owner, past the hourly creation
    // limit the default policy puts on everyone else.
    let owner = Keys::generate();
    let mut settings = storage.settings.clone();
    for community in &mut settings.communities {
        community.owners.push(owner.pubkey().to_owned());
    }
    let relay = RelayBuilder::new(settings)
        .without_signal_handlers()
        .plugin(buzz_core::plugin::PluginEntry::of::<
            buzz_artifacts::ArtifactsPlugin,
        >())
        .start()
        .await
        .context("starting the relay")?;
    let host = format!("localhost:{}", relay.addr.port());
    println!("relay on {} ({backend})", relay.addr);

    let mut ws = WsClient::connect(relay.addr, &host).await?;
    if !ws.auth(&owner).await.0 {
        bail!("AUTH refused");
    }
    let mut channels = Vec::new();
    for i in 0..args.channels {
        let id = uuid::Uuid::new_v4().to_string();
        let create = owner.sign(
            9007,
            vec![tag("h", &id), tag("name", &format!("c{i}"))],
            "",
            now(),
        );
        let (ok, msg) = ws.publish(&create).await;
        if !ok {
            bail!("creating a channel: {msg}");
        }
        channels.push(id);
    }
    let people: Vec<Keys> = (0..args.assignees).map(|_| Keys::generate()).collect();
    let assignees: Vec<String> = people.iter().map(|k| k.pubkey().to_owned()).collect();
    let reader = &people[0];
    let http = HttpClient::new(relay.addr, &host);
    let filter = json!([{"artifact": "current", "#type": ["buzz.task"],
        "#assignee": [reader.pubkey()], "limit": args.limit}]);

    println!(
        "figures ({} timed requests each, after {WARMUP} warm-up):",
        args.iterations
    );
    let began = std::time::Instant::now();
    seed::artifacts(&mut ws, &owner, &channels, &assignees, 0, args.small).await?;
    println!(
        "  seeded {} artifacts in {:.1} s",
        args.small,
        began.elapsed().as_secs_f64()
    );
    relay
        .services
        .store
        .analyze()
        .await
        .map_err(|r| anyhow::anyhow!("{r}"))?;
    let small = latency(&http, reader, &filter, WARMUP, args.iterations).await?;
    print_latency(
        &format!("current, 2 predicates, {} artifacts", args.small),
        &small,
    );
    let began = std::time::Instant::now();
    seed::artifacts(
        &mut ws,
        &owner,
        &channels,
        &assignees,
        args.small,
        args.large - args.small,
    )
    .await?;
    println!(
        "  seeded {} more in {:.1} s",
        args.large - args.small,
        began.elapsed().as_secs_f64()
    );
    relay
        .services
        .store
        .analyze()
        .await
        .map_err(|r| anyhow::anyhow!("{r}"))?;
    let large = latency(&http, reader, &filter, WARMUP, args.iterations).await?;
    print_latency(
        &format!("current, 2 predicates, {} artifacts", args.large),
        &large,
    );
    let ratio = large.p50.as_secs_f64() / small.p50.as_secs_f64();
    let ratio99 = large.p99.as_secs_f64() / small.p99.as_secs_f64();
    let pass = ratio <= TARGET_RATIO;
    println!(
        "  ratio large/small: p50 {ratio:.2}, p99 {ratio99:.2}   target p50 <= {TARGET_RATIO}: {}",
        if pass { "PASS" } else { "FAIL" }
    );

    // Racing edits on one artifact.
    let writers: Vec<Keys> = (0..args.writers).map(|_| Keys::generate()).collect();
    let first = owner.sign(
        45_010,
        vec![
            tag("ar", "1"),
            tag("d", &uuid::Uuid::new_v4().to_string()),
            tag("h", &channels[0]),
            tag("type", "buzz.task"),
            tag("title", "contended"),
            tag("op", "create"),
        ],
        "{}",
        now(),
    );
    let (ok, msg) = ws.publish(&first).await;
    if !ok {
        bail!("contended artifact: {msg}");
    }
    let d = first.tag_value("d").unwrap_or_default().to_owned();
    let home = channels[0].clone();
    let next = |keys: &Keys, current: &buzz_nostr::event::Event, n: usize| {
        keys.sign(
            45_010,
            vec![
                tag("ar", "1"),
                tag("d", &d),
                tag("h", &home),
                tag("type", "buzz.task"),
                tag("title", "contended"),
                tag("op", "update"),
                tag("prev", &current.id),
            ],
            &format!("{{\"n\":{n}}}"),
            now(),
        )
    };
    let (rounds, submissions, elapsed) =
        measure::race(&http, &writers, first, args.rounds, next).await?;
    let secs = elapsed.as_secs_f64();
    println!(
        "racing edits: {} writers x {rounds} rounds, exactly one winner each: {:.0} rounds/s \
         (accepted edits/s), {:.0} submissions/s, {:.2} ms per round",
        args.writers,
        rounds as f64 / secs,
        submissions as f64 / secs,
        secs * 1e3 / rounds as f64
    );
    relay.stop().await?;
    if !pass && args.require_target {
        bail!("target missed: large/small p50 ratio {ratio:.2} > {TARGET_RATIO}");
    }
    Ok(())
}
