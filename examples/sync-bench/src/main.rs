//! `sync-bench`: an offline client catching up with a large channel. The relay holds a
//! channel of `--messages` messages (100,000); the client holds all but `--missing-pct`
//! percent (1%) — once lacking the newest ones (a client that was away), once lacking as
//! many scattered evenly through the channel (the hard case for range-based
//! reconciliation: nearly every range differs somewhere). Two ways to catch up, each
//! over a fresh authenticated WebSocket, each run `--runs` times:
//!
//! - **NIP-77**: `NEG-OPEN` with the client's fingerprint, `NEG-MSG` rounds until the
//!   client knows which ids it lacks, then one `REQ` by id for those (500 ids per
//!   subscription, the relay's `max_limit`);
//! - **full REQ**: what a client without sync does — page the whole channel with `REQ`
//!   (`limit` 500, `until` the oldest seen minus one).
//!
//! Printed: bytes on the wire each way (WebSocket text payloads), wall time, and the
//! relay's CPU: the process's CPU time during the reconciliation (from `NEG-OPEN` to the
//! last relay `NEG-MSG`) minus the client thread's own. The client runs on its own OS
//! thread and runtime, the relay on the main runtime. Messages are seeded through the
//! store's bulk insert (ingest's own insert; no thread metadata, which neither read
//! uses), signed on every core.
//!
//! ```sh
//! cargo run --release -p buzz-sync-bench -- --messages 100000 --missing-pct 1
//! cargo run --release -p buzz-sync-bench -- --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

use anyhow::Context;
use buzz_core::plugin::{PluginCatalog, PluginEntry};
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::BenchStorage;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use clap::Parser;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

mod catch_up;
mod client;
mod seed;

use catch_up::{catch_up_by_sync, full_download};
use client::Counted;
use seed::{create_channel, seed};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "sync-bench", about = "NIP-77 catch-up vs a full REQ download")]
struct Args {
    /// Messages in the channel.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Percent of them the client lacks (spread evenly).
    #[arg(long, default_value_t = 1.0)]
    missing_pct: f64,
    /// Timed runs of each way.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Storage: sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
}

/// Kernel clock ticks per second of `/proc` CPU times (`CLK_TCK`, 100 on Linux).
/// Ids per REQ (the relay's default `max_limit`) and messages per page.
pub(crate) const PAGE: usize = 500;
pub(crate) const HOST: &str = "localhost";

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let catalog = PluginCatalog::new().with(PluginEntry::of::<buzz_sync::SyncPlugin>());
    let relay = RelayBuilder::new(storage.settings.clone())
        .catalog(catalog)
        .without_signal_handlers()
        .start()
        .await
        .context("relay starts")?;
    let keys = Keys::generate();
    let started = Instant::now();
    let channel = create_channel(relay.addr, &keys).await?;
    let events = seed(&relay, &keys, &channel, args.messages).await?;
    eprintln!(
        "seeded {} messages on {} in {:.1?}",
        events.len(),
        storage.backend,
        started.elapsed()
    );
    let lacking = ((events.len() as f64 * args.missing_pct / 100.0).round() as usize).max(1);
    // An offline client lacks what arrived while it was away: the newest messages.
    let newest = Holding::split(&events, |i| i >= events.len() - lacking);
    // The hard case for range-based reconciliation: the same number, spread evenly, so
    // nearly every range differs somewhere.
    let every = (events.len() / lacking).max(1);
    let scattered = Holding::split(&events, |i| i % every == 0);
    let (addr, runs, total) = (relay.addr, args.runs, events.len());
    // The client on a thread of its own, so its CPU can be told from the relay's.
    let client = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(measure(
            addr,
            keys,
            channel,
            [newest, scattered],
            total,
            runs,
        ))
    });
    let figures = tokio::task::spawn_blocking(move || client.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
    print(&args, storage.backend, &figures);
    relay.stop().await?;
    Ok(())
}

/// What one way of catching up cost.
#[derive(Default, Clone)]
pub(crate) struct Cost {
    sent: usize,
    received: usize,
    time: Duration,
    relay_cpu: Duration,
    rounds: usize,
    /// NIP-77 only: time of the reconciliation alone (without the fetch).
    reconcile_time: Duration,
    /// NIP-77 only: events fetched by id afterwards.
    fetched: usize,
}

/// What the client holds, and what it lacks.
struct Holding {
    held: Vec<(u64, String)>,
    missing: HashSet<String>,
}

impl Holding {
    fn split(events: &[Event], lacks: impl Fn(usize) -> bool) -> Holding {
        let mut holding = Holding {
            held: Vec::new(),
            missing: HashSet::new(),
        };
        for (i, e) in events.iter().enumerate() {
            if lacks(i) {
                holding.missing.insert(e.id.clone());
            } else {
                holding.held.push((e.created_at as u64, e.id.clone()));
            }
        }
        holding
    }
}

struct Figures {
    /// NIP-77 runs: the client lacking the newest messages, then scattered ones.
    sync: [Vec<Cost>; 2],
    full: Vec<Cost>,
}

async fn measure(
    addr: SocketAddr,
    keys: Keys,
    channel: String,
    holdings: [Holding; 2],
    total: usize,
    runs: usize,
) -> anyhow::Result<Figures> {
    let mut figures = Figures {
        sync: [Vec::new(), Vec::new()],
        full: Vec::new(),
    };
    for run in 0..runs {
        for (k, holding) in holdings.iter().enumerate() {
            let mut ws = Counted::connect(addr, &keys).await?;
            let cost = catch_up_by_sync(
                &mut ws,
                &channel,
                &holding.held,
                &holding.missing,
                run * 2 + k,
            )
            .await?;
            figures.sync[k].push(cost);
        }
        let mut ws = Counted::connect(addr, &keys).await?;
        let cost = full_download(&mut ws, &channel, total, run).await?;
        figures.full.push(cost);
    }
    Ok(figures)
}

fn print(args: &Args, backend: &str, figures: &Figures) {
    let median = |costs: &[Cost], f: fn(&Cost) -> f64| {
        let mut v: Vec<f64> = costs.iter().map(f).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let bytes = |c: &Cost| (c.sent + c.received) as f64;
    let ms = |c: &Cost| c.time.as_secs_f64() * 1e3;
    let cpu = |c: &Cost| c.relay_cpu.as_secs_f64() * 1e3;
    let rounds = |c: &Cost| c.rounds as f64;
    let f = &figures.full;
    println!(
        "sync-bench: {} messages on {backend}, client missing {}% ({} ids), median of {} runs",
        args.messages,
        args.missing_pct,
        figures.sync[0].first().map_or(0, |c| c.fetched),
        args.runs
    );
    for (label, s) in [
        ("NIP-77, newest missing", &figures.sync[0]),
        ("NIP-77, scattered missing", &figures.sync[1]),
    ] {
        println!(
            "  {label:<26} {:>11.0} bytes ({:.0} up, {:.0} down), {:>8.1} ms, {} NEG-MSG rounds \
             (reconciliation {:.1} ms, relay CPU {:.0} ms), then REQ by id; {:.1}x fewer bytes, \
             {:.1}x less time than the full download",
            median(s, bytes),
            median(s, |c| c.sent as f64),
            median(s, |c| c.received as f64),
            median(s, ms),
            median(s, rounds),
            median(s, |c| c.reconcile_time.as_secs_f64() * 1e3),
            median(s, cpu),
            median(f, bytes) / median(s, bytes).max(1.0),
            median(f, ms) / median(s, ms).max(1e-9),
        );
    }
    println!(
        "  {:<26} {:>11.0} bytes ({:.0} up, {:.0} down), {:>8.1} ms, {} REQ pages; relay CPU {:.0} ms",
        "full REQ download",
        median(f, bytes),
        median(f, |c| c.sent as f64),
        median(f, |c| c.received as f64),
        median(f, ms),
        median(f, rounds),
        median(f, cpu),
    );
}
